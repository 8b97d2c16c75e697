/**
 * Client records the SQLite store has read, kept while the database says nothing could have
 * changed them: the authorization and token endpoints look their client up on every request, and
 * each lookup parsed the record's JSON again.
 *
 * Exact, not time-bounded: a cached record is served only while
 *
 * - `PRAGMA data_version` is unchanged: SQLite changes it for a connection whenever another
 *   connection (another instance, the admin CLI in another process) commits to the file, so any
 *   change made elsewhere, to a client or to anything else, empties the cache first;
 * - and this connection has not written a client since: every write of this store that can touch
 *   the clients table (create, upsert, delete, mark used, purge, migrate) empties it as it runs.
 *
 * So a deleted, expired-and-purged or changed client is never answered from here once the change
 * is committed: the read that follows sees what a fresh SELECT would. Only records found are kept
 * (an unknown id is read each time, so made-up ids cannot fill the cache), at most
 * `MAX_CACHED_CLIENTS` (../client-records-kept.ts), and each is frozen: callers share one object.
 */
import type Database from "better-sqlite3";
import { deepFreeze, makeRoom } from "../client-records-kept.js";
import type { ClientRecord } from "../contract.js";

export interface ClientCache {
  /** The cached record for `clientId`, or `load()`'s (cached when found). */
  get(clientId: string, load: () => ClientRecord | undefined): ClientRecord | undefined;
  /** Forgets every record (this connection is writing clients). */
  clear(): void;
}

export function createClientCache(db: Database.Database): ClientCache {
  const records = new Map<string, ClientRecord>();
  let dataVersion: Database.Statement | undefined;
  /** The data_version the cached records were read under. */
  let readUnder: unknown;
  return {
    get(clientId, load) {
      dataVersion ??= db.prepare("PRAGMA data_version").pluck();
      const version = dataVersion.get();
      if (version !== readUnder) {
        records.clear();
        readUnder = version;
      }
      const cached = records.get(clientId);
      if (cached) return cached;
      const record = load();
      if (record === undefined) return undefined;
      makeRoom(records);
      records.set(clientId, deepFreeze(record));
      return record;
    },
    clear() {
      records.clear();
    },
  };
}
