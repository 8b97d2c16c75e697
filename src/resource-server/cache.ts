/**
 * A bounded LRU cache in front of any {@link AccessTokenVerifier}: in steady state a request costs
 * one string comparison and a clock read (a repeat of the last token hit) or one short map lookup
 * more, instead of a signature check or an introspection call.
 */
import { GatehouseTypeError } from "../shared/errors.js";
import { isB64Token } from "./bearer-token.js";
import type { AccessTokenVerifier, AuthInfo } from "./types.js";

export interface CachedVerifierOptions {
  /** Most entries kept (default 10 000); the least recently used go first. */
  maxEntries?: number;
  /**
   * Longest time an entry is trusted, in seconds (default 300). An entry never outlives the token's
   * own `exp`; this bound limits how long a revoked-but-unexpired token is still accepted when the
   * inner verifier is introspection.
   */
  maxTtlSeconds?: number;
  /**
   * When a verified token is remembered. `"always"` (default): at its first successful
   * verification. `"second-use"`: only at a second one, while the mark the first one left in a
   * small table (one 32-bit fingerprint per slot, about as many slots as entries) is still there,
   * as TinyLFU's doorkeeper admits. Tokens used once then never enter the cache: a stream of them
   * neither evicts the tokens in use nor keeps their strings alive until eviction (old-generation
   * garbage), at the price of one more inner verification for each token used again. Suits a
   * local JWT verifier; with introspection that extra verification is a call to the server.
   */
  admission?: "always" | "second-use";
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

interface Entry {
  /** The exact token string that was verified: a hit needs the presented token to equal it. */
  token: string;
  /** Its map key ({@link entryKey}), to remove it when it is evicted. */
  key: string;
  auth: AuthInfo;
  /** ms since the epoch after which the entry is ignored. */
  until: number;
  /** The next less recently used entry, `undefined` for the least recently used one. */
  older: Entry | undefined;
  /** The next more recently used entry, `undefined` for the most recently used one. */
  newer: Entry | undefined;
}

/** A verification under way: the token it is for, and its outcome. */
interface Flight {
  token: string;
  promise: Promise<AuthInfo>;
}

/** Characters of a token's end that a map entry is looked up by (see {@link entryKey}). */
const KEY_LENGTH = 32;

/**
 * The map key of a token: its last {@link KEY_LENGTH} characters (the whole of a shorter one). The
 * end of a JWT is its signature and that of an opaque token is random, so distinct tokens rarely
 * share one; a map lookup by the key hashes 32 characters instead of the whole token (the
 * cryptographic hash this cache used to key by cost more than the rest of a warm request). The
 * key only finds the entry: a hit also needs the whole token to equal the one verified.
 */
function entryKey(token: string): string {
  return token.length > KEY_LENGTH ? token.slice(-KEY_LENGTH) : token;
}

/**
 * A nonzero 32-bit fingerprint of a map key (FNV-1a over its characters), for the admission marks:
 * the key is a token's random end, so its fingerprints spread evenly. A collision only lets a
 * token in at its first verification; a hit still needs the exact token.
 */
function fingerprint(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash >>> 0 || 1;
}

/**
 * The `"second-use"` rule of {@link CachedVerifierOptions.admission}: `admits(key)` tells whether
 * a token just verified (found by its map key) is remembered; `reset()` forgets every mark.
 */
function secondUseAdmission(maxEntries: number): { admits(key: string): boolean; reset(): void } {
  // Direct-mapped, a power of two at least as large as the cache: a newer mark takes an older
  // one's slot, so the table ages by itself and stays this size whatever the traffic.
  let slots = 64;
  while (slots < maxEntries && slots < 1 << 24) slots *= 2;
  const marks = new Uint32Array(slots);
  const mask = slots - 1;
  return {
    admits(key) {
      const print = fingerprint(key);
      const slot = print & mask;
      if (marks[slot] === print) {
        marks[slot] = 0;
        return true;
      }
      marks[slot] = print;
      return false;
    },
    reset() {
      marks.fill(0);
    },
  };
}

/** A caching verifier, with its size for tests and metrics. */
export interface CachedVerifier extends AccessTokenVerifier {
  readonly size: number;
  clear(): void;
  /** The cached verification of `token` if still trusted (refreshing its recency), else `undefined`. */
  peek(token: string): AuthInfo | undefined;
}

/**
 * Caches successful verifications, each until the earlier of the token's `exp` and
 * `maxTtlSeconds`. A hit is only ever granted to the exact token string that was verified: entries
 * are found by the token's ending and compared in full. Failures are never cached (a transient
 * JWKS outage must not stick). Concurrent verifications of one token share a single inner call.
 *
 * Entries hold the verified token strings in this process's memory (never in logs, errors or
 * storage), as the requests carrying them do; only tokens with the RFC 6750 §2.1 b64token syntax,
 * the only ones a request can carry, are remembered (the gate relies on it, see bearer-token.ts).
 * Two valid tokens with the same ending take turns in one entry.
 */
export function cachedVerifier(
  inner: AccessTokenVerifier,
  options: CachedVerifierOptions = {},
): CachedVerifier {
  if (!inner || typeof inner.verify !== "function") {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "cachedVerifier: inner verifier with verify() required",
    );
  }
  const maxEntries = options.maxEntries ?? 10_000;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "cachedVerifier: maxEntries must be a positive integer",
    );
  }
  const maxTtlMs = (options.maxTtlSeconds ?? 300) * 1000;
  if (!(maxTtlMs > 0)) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "cachedVerifier: maxTtlSeconds must be positive");
  }
  const admission = options.admission ?? "always";
  if (admission !== "always" && admission !== "second-use") {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      'cachedVerifier: admission must be "always" or "second-use"',
    );
  }
  const doorkeeper = admission === "second-use" ? secondUseAdmission(maxEntries) : undefined;
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  /**
   * Verifications under way, found by the same short key as the entries and granted only to the
   * same token string (concurrent verifications share a call only for the exact token; a token
   * with the same ending as one in flight gets its own, which takes the slot). An entry goes when
   * its verification settles, so a later call starts afresh.
   */
  const inflight = new Map<string, Flight>();
  /**
   * The recency order of the entries in the map, as a doubly linked list: `oldest` is the least
   * recently used (evicted first), `newest` the most recently used one still held (the one stored
   * or hit last, unless it has gone since; `undefined` for an empty cache). Every entry in the map is in the list and nothing else is: an entry leaves both
   * at once (expiry, eviction, replacement) and clear() empties both. A token equal to `newest`'s
   * can be answered without the map lookup, and a run of requests with one token changes nothing.
   *
   * Links rather than the map's insertion order: evicting the map's first key made V8 skip every
   * entry deleted before it (they stay as holes until the table is rebuilt), a few µs per miss in
   * a full cache; an unlink and a map delete by key cost the same whatever was deleted before.
   */
  let oldest: Entry | undefined;
  let newest: Entry | undefined;

  /** Takes `entry` out of the recency list (not out of the map). */
  const unlink = (entry: Entry): void => {
    const { older, newer } = entry;
    if (older === undefined) oldest = newer;
    else older.newer = newer;
    if (newer === undefined) newest = older;
    else newer.older = older;
    entry.older = undefined;
    entry.newer = undefined;
  };

  /** Puts `entry` (not in the list) at the most recently used end. */
  const append = (entry: Entry): void => {
    entry.older = newest;
    if (newest === undefined) oldest = entry;
    else newest.newer = entry;
    newest = entry;
  };

  /**
   * Remembers a successful verification until the earlier of the token's `exp` and the TTL, if
   * the admission rule lets it in.
   */
  const store = (token: string, key: string, auth: AuthInfo): void => {
    const nowMs = now();
    const until = Math.min(auth.expiresAt * 1000, nowMs + maxTtlMs);
    if (until > nowMs && isB64Token(token) && (doorkeeper === undefined || doorkeeper.admits(key))) {
      const replaced = entries.get(key);
      if (replaced !== undefined) {
        // A token with the same ending gives its place up (and its recency) rather than share it;
        // the map slot is overwritten below.
        unlink(replaced);
      } else if (entries.size >= maxEntries && oldest !== undefined) {
        const evicted = oldest;
        entries.delete(evicted.key);
        unlink(evicted);
      }
      const entry: Entry = { token, key, auth, until, older: undefined, newer: undefined };
      entries.set(key, entry);
      append(entry);
    }
  };

  /** One inner verification of `token` (map key `key`), shared by the callers that ask while it runs. */
  const verifyOnce = (token: string, key: string): Promise<AuthInfo> => {
    const pending = inflight.get(key);
    if (pending !== undefined && pending.token === token) return pending.promise;
    let started: Promise<AuthInfo>;
    try {
      // Promise.resolve: a native promise as is (no extra turn), anything else made one.
      started = Promise.resolve(inner.verify(token));
    } catch (error) {
      // A verifier that throws instead of rejecting must not wedge the entry.
      started = Promise.reject(error);
    }
    const flight: Flight = { token, promise: started };
    const settled = () => {
      if (inflight.get(key) === flight) inflight.delete(key);
    };
    flight.promise = started.then(
      (auth) => {
        settled();
        store(token, key, auth);
        return auth;
      },
      (error: unknown) => {
        settled();
        throw error;
      },
    );
    inflight.set(key, flight);
    return flight.promise;
  };

  /**
   * The answer for exactly `token` when it is the newest entry's token and still trusted, without
   * computing its map key; `undefined` otherwise (then {@link lookup}, which also drops it when it
   * expired). Exact string equality, as for any hit; the clock is read for every hit, so no entry
   * is served at or past its `until`.
   */
  const recall = (token: string): AuthInfo | undefined => {
    const last = newest;
    return last !== undefined && last.token === token && last.until > now() ? last.auth : undefined;
  };

  /** The trusted entry of exactly `token`, refreshed to most recently used; expired entries are dropped. */
  const lookup = (token: string, key: string): AuthInfo | undefined => {
    const hit = entries.get(key);
    if (hit === undefined || hit.token !== token) return undefined;
    if (!(hit.until > now())) {
      entries.delete(key);
      unlink(hit);
      return undefined;
    }
    if (hit !== newest) {
      // Refresh recency: to the most recently used end of the list (the map is left as it is).
      unlink(hit);
      append(hit);
    }
    return hit.auth;
  };

  return {
    get size() {
      return entries.size;
    },
    clear() {
      entries.clear();
      doorkeeper?.reset();
      oldest = undefined;
      newest = undefined;
    },
    peek(token: string): AuthInfo | undefined {
      return recall(token) ?? lookup(token, entryKey(token));
    },
    verify(token: string): Promise<AuthInfo> {
      const recalled = recall(token);
      if (recalled !== undefined) return Promise.resolve(recalled);
      const key = entryKey(token);
      const known = lookup(token, key);
      if (known !== undefined) return Promise.resolve(known);
      return verifyOnce(token, key);
    },
  };
}
