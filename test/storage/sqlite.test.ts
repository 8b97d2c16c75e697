/** The storage contract suite (`gatehouse-auth/storage/testing`) against SQLite, one file per test. */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { runStorageContract } from "../../src/storage/testing/index.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-sqlite-contract-"));
const paths = new WeakMap<AuthorizationStore, string>();
let counter = 0;

runStorageContract({
  name: "sqlite",
  async create() {
    const path = join(root, `db-${++counter}`, "gatehouse.sqlite");
    const store = createSqliteStore({ path });
    paths.set(store, path);
    return store;
  },
  cleanup: async () => rmSync(root, { recursive: true, force: true }),
  // Other connections on the same file, as other server processes would open it.
  openPeer: async (store) => createSqliteStore({ path: paths.get(store)! }),
});
