/**
 * A bounded LRU cache in front of any {@link AccessTokenVerifier}: in steady state a request costs
 * one SHA-256 and one map lookup instead of a signature check or an introspection call.
 */
import * as nodeCrypto from "node:crypto";
import { GatehouseTypeError } from "../shared/errors.js";
import { SingleFlight } from "../shared/single-flight.js";
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
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

interface Entry {
  auth: AuthInfo;
  /** ms since the epoch after which the entry is ignored. */
  until: number;
}

// One-shot `crypto.hash` (Node >= 20.12) is several times cheaper than a Hash object.
const oneShotHash = (
  nodeCrypto as { hash?: (algorithm: string, data: string, encoding: "base64url") => string }
).hash;

/** The cache key: SHA-256 of the token, so the cache never holds a usable token. */
function tokenKey(token: string): string {
  return oneShotHash
    ? oneShotHash("sha256", token, "base64url")
    : nodeCrypto.createHash("sha256").update(token).digest("base64url");
}

/** A caching verifier, with its size for tests and metrics. */
export interface CachedVerifier extends AccessTokenVerifier {
  readonly size: number;
  clear(): void;
  /** The cached verification of `token` if still trusted (refreshing its recency), else `undefined`. */
  peek(token: string): AuthInfo | undefined;
}

/**
 * Caches successful verifications keyed by SHA-256 of the token, each until the earlier of the
 * token's `exp` and `maxTtlSeconds`. Failures are never cached (a transient JWKS outage must not
 * stick). Concurrent verifications of one token share a single inner call.
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
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const inflight = new SingleFlight<AuthInfo>();
  // The key stored or refreshed last is already at the end of the insertion order: a run of
  // requests with one token skips the delete/set.
  let newest: string | undefined;

  const verifyAndStore = async (key: string, token: string): Promise<AuthInfo> => {
    const auth = await inner.verify(token);
    const until = Math.min(auth.expiresAt * 1000, now() + maxTtlMs);
    if (until > now()) {
      if (entries.size >= maxEntries) {
        // Map iteration order is insertion order: the first key is the least recently used.
        const oldest = entries.keys().next().value;
        if (oldest !== undefined) entries.delete(oldest);
      }
      entries.set(key, { auth, until });
      newest = key;
    }
    return auth;
  };

  /** The trusted entry under `key`, refreshed to most recently used; expired entries are dropped. */
  const lookup = (key: string): AuthInfo | undefined => {
    const hit = entries.get(key);
    if (hit === undefined) return undefined;
    if (!(hit.until > now())) {
      entries.delete(key);
      if (key === newest) newest = undefined;
      return undefined;
    }
    if (key !== newest) {
      // Refresh recency: move to the end of the insertion order.
      entries.delete(key);
      entries.set(key, hit);
      newest = key;
    }
    return hit.auth;
  };

  return {
    get size() {
      return entries.size;
    },
    clear() {
      entries.clear();
      newest = undefined;
    },
    peek(token: string): AuthInfo | undefined {
      return lookup(tokenKey(token));
    },
    verify(token: string): Promise<AuthInfo> {
      const key = tokenKey(token);
      const known = lookup(key);
      if (known !== undefined) return Promise.resolve(known);
      return inflight.run(key, () => verifyAndStore(key, token));
    },
  };
}
