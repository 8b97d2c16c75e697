/**
 * The one storage contract suite every backend runs (DESIGN.md principle 6). A backend's test file
 * calls {@link runStoreContract} with a factory that opens a fresh, empty store.
 */

import { afterAll, afterEach, beforeEach, describe } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { codeContract } from "./contract-codes.js";
import { recordContract } from "./contract-records.js";
import { refreshContract } from "./contract-refresh.js";

export interface StoreContext {
  /** The store of the current test: fresh, empty and migrated. */
  store(): AuthorizationStore;
  /**
   * `count` more stores sharing the current test's database, as several server instances would.
   * Backends that cannot share (memory) hand back the same store.
   */
  peers(count: number): Promise<AuthorizationStore[]>;
}

export interface StoreContractOptions {
  /** Opens another store on the same database as `store` (another "instance"). */
  openPeer?: (store: AuthorizationStore) => Promise<AuthorizationStore>;
}

/**
 * Registers the contract tests for one backend. `makeStore` is called before every test and must
 * return a store on its own empty database (or schema); `cleanup` runs once after the suite.
 */
export function runStoreContract(
  name: string,
  makeStore: () => Promise<AuthorizationStore>,
  cleanup?: () => Promise<void>,
  options: StoreContractOptions = {},
): void {
  describe(`storage contract: ${name}`, () => {
    let current: AuthorizationStore | undefined;
    let extra: AuthorizationStore[] = [];

    beforeEach(async () => {
      current = await makeStore();
      await current.migrate();
    });
    afterEach(async () => {
      for (const peer of extra) await peer.close();
      extra = [];
      await current?.close();
      current = undefined;
    });
    if (cleanup) afterAll(cleanup);

    const context: StoreContext = {
      store() {
        if (!current) throw new Error("store used outside a test");
        return current;
      },
      async peers(count) {
        const base = context.store();
        const stores: AuthorizationStore[] = [];
        for (let i = 0; i < count; i++) {
          if (!options.openPeer) {
            stores.push(base);
            continue;
          }
          const peer = await options.openPeer(base);
          await peer.migrate();
          extra.push(peer);
          stores.push(peer);
        }
        return stores;
      },
    };

    recordContract(context);
    codeContract(context);
    refreshContract(context);
  });
}
