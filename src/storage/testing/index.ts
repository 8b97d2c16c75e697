/**
 * `gatehouse/storage/testing`: the one storage contract suite every backend runs (DESIGN.md
 * principle 6), published so a third-party backend can prove itself against the same tests as
 * memory, SQLite and PostgreSQL. It registers vitest tests, so only this subpath imports vitest.
 */

import { afterAll, afterEach, beforeEach, describe } from "vitest";
import type { AuthorizationStore } from "../contract.js";
import { codeContract } from "./codes.js";
import type { StoreContext } from "./context.js";
import { deviceContract } from "./devices.js";
import { dpopContract } from "./dpop.js";
import { exchangeChainContract } from "./exchange-chain.js";
import { grantContract } from "./grants.js";
import { markerContract } from "./markers.js";
import { recordContract } from "./records.js";
import { refreshContract } from "./refresh.js";
import { sealedCodeContract } from "./sealed-codes.js";
import { signingKeyContract } from "./signing-keys.js";
import { supersedeContract } from "./supersede.js";
import { upstreamContract } from "./upstream.js";
import { upstreamTokenContract } from "./upstream-tokens.js";
import { userContract } from "./users.js";

export interface StorageContractOptions {
  /** Names the suite in the test report: `storage contract: <name>`. */
  name: string;
  /**
   * Opens a store on its own fresh, empty database (or schema). Called before every test; the suite
   * calls `migrate()` on it, and `close()` after the test.
   */
  create: () => Promise<AuthorizationStore>;
  /** Runs once after the whole suite (drop the databases `create` made). */
  cleanup?: () => Promise<void>;
  /**
   * Opens another store on the same database as `store`, as another server instance would. With
   * it, the concurrency tests race several instances against one database; without it, they race
   * callers of one store.
   */
  openPeer?: (store: AuthorizationStore) => Promise<AuthorizationStore>;
}

/**
 * Registers the storage contract tests for one backend, inside the calling vitest test file:
 *
 * ```ts
 * runStorageContract({ name: "mine", create: async () => createMyStore(await freshDatabase()) });
 * ```
 */
export function runStorageContract(options: StorageContractOptions): void {
  const { name, create, cleanup, openPeer } = options;
  describe(`storage contract: ${name}`, () => {
    let current: AuthorizationStore | undefined;
    let extra: AuthorizationStore[] = [];

    beforeEach(async () => {
      current = await create();
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
          if (!openPeer) {
            stores.push(base);
            continue;
          }
          const peer = await openPeer(base);
          await peer.migrate();
          extra.push(peer);
          stores.push(peer);
        }
        return stores;
      },
    };

    recordContract(context);
    signingKeyContract(context);
    codeContract(context);
    sealedCodeContract(context);
    grantContract(context);
    exchangeChainContract(context);
    supersedeContract(context);
    refreshContract(context);
    dpopContract(context);
    markerContract(context);
    deviceContract(context);
    upstreamContract(context);
    upstreamTokenContract(context);
    userContract(context);
  });
}
