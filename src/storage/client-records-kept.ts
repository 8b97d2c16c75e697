/**
 * What the SQLite and PostgreSQL stores' client-record caches share (sqlite/client-cache.ts,
 * postgres/client-cache.ts): the bound on how many records one keeps, and records frozen before
 * they are kept, so every caller can share the one object and none can change it for the others.
 */

/** Most client records kept; the oldest entry goes first when it is full. */
export const MAX_CACHED_CLIENTS = 1000;

/** Drops the oldest entry of `records` when it holds {@link MAX_CACHED_CLIENTS}. */
export function makeRoom(records: Map<string, unknown>): void {
  if (records.size >= MAX_CACHED_CLIENTS) records.delete(records.keys().next().value!);
}

/** `value` frozen all the way down (a record callers share). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
