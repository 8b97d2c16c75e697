/**
 * Client records the PostgreSQL store has read, kept for a short, fixed time: the authorization and
 * token endpoints look their client up on every request (two reads per code flow, one per refresh),
 * each a round trip and a statement for the database.
 *
 * Time-bounded, unlike SQLite's (../sqlite/client-cache.ts), which asks the file whether anything
 * changed: PostgreSQL has no such cheap question, and other instances write the same table. So:
 *
 * - a change made through this store (create, upsert, delete, mark used, purge, migrate) empties
 *   the cache as it runs: this instance never answers from before its own writes;
 * - a change made elsewhere (another instance, the admin CLI) is seen at most
 *   {@link CLIENT_CACHE_TTL_MS} after the record was read: a client deleted, replaced or purged
 *   on another instance keeps working here for at most that long (docs/storage.md).
 *
 * Only records found are kept (an unknown id is read each time, so made-up ids cannot fill the
 * cache, and the health check's read of a client that does not exist always reaches the database),
 * at most `MAX_CACHED_CLIENTS` (../client-records-kept.ts), and each is frozen: callers share one object.
 */

import { deepFreeze, makeRoom } from "../client-records-kept.js";
import type { ClientRecord } from "../contract.js";

/** Longest a record read from the database is answered from here (the staleness bound). */
export const CLIENT_CACHE_TTL_MS = 1000;

export interface ClientCache {
  /** The cached record for `clientId` if read less than the bound ago, else `load()`'s (kept when found). */
  get(clientId: string, load: () => Promise<ClientRecord | undefined>): Promise<ClientRecord | undefined>;
  /** Forgets every record, and any read on its way (this store is writing clients). */
  clear(): void;
  /** Forgets one client's record, and any read on its way (this store is writing that client). */
  forget(clientId: string): void;
}

/** `now` is a monotonic clock in ms (a wall clock set back would stretch the bound). */
export function createClientCache(now: () => number = () => performance.now()): ClientCache {
  const records = new Map<string, { record: ClientRecord; readAt: number }>();
  /** Bumped by every clear: a read that started before a write is not kept after it. */
  let generation = 0;
  return {
    async get(clientId, load) {
      const cached = records.get(clientId);
      if (cached && now() - cached.readAt < CLIENT_CACHE_TTL_MS) return cached.record;
      if (cached) records.delete(clientId);
      // The bound counts from before the read: the row may have changed while it was on its way.
      const readAt = now();
      const startedIn = generation;
      const record = await load();
      if (record === undefined || startedIn !== generation) return record;
      makeRoom(records);
      records.set(clientId, { record: deepFreeze(record), readAt });
      return record;
    },
    clear() {
      generation++;
      records.clear();
    },
    forget(clientId) {
      generation++;
      records.delete(clientId);
    },
  };
}
