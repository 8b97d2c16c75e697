/** What each part of the storage contract suite is handed: the store of the current test, and its peers. */

import type { AuthorizationStore } from "../contract.js";

export interface StoreContext {
  /** The store of the current test: fresh, empty and migrated. */
  store(): AuthorizationStore;
  /**
   * `count` more stores sharing the current test's database, as several server instances would.
   * Backends that cannot share (memory) hand back the same store.
   */
  peers(count: number): Promise<AuthorizationStore[]>;
}
