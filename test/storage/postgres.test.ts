/** The storage contract suite (`gatehouse-auth/storage/testing`) against PostgreSQL, one schema per test. */

import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { runStorageContract } from "../../src/storage/testing/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "./postgres-support.js";

const schemas = schemaNamer("gh_contract");
const schemaOf = new WeakMap<AuthorizationStore, string>();
let reachable: Promise<void> | undefined;

function open(schema: string): AuthorizationStore {
  const store = createPostgresStore({ connectionString: POSTGRES_URL, schema, max: 4 });
  schemaOf.set(store, schema);
  return store;
}

runStorageContract({
  name: "postgres",
  async create() {
    reachable ??= requirePostgres();
    await reachable;
    return open(schemas.next());
  },
  cleanup: () => schemas.dropSchemas(),
  // Other pools on the same schema, as other server instances would be.
  openPeer: async (store) => open(schemaOf.get(store)!),
});
