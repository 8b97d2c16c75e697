/**
 * Rate limits on top of the store's fixed-window counters (`store.hitRateLimit`), shared by every
 * instance: the pages' limits never pass more than their number in any window
 * ({@link hitBoundedWindow}); the token endpoint's, a high budget on a hot path, is the cheaper
 * sliding-window estimate below, which may pass up to about twice its number across a boundary.
 *
 * A plain fixed window forgets everything at its boundary: ten guesses at 4:59 and ten more at 5:01
 * all pass, and a test (or a person) whose attempts straddle the boundary sees the count reset. The
 * estimate here weighs the previous window's count by how much of it still overlaps the last
 * `windowMs` (the usual sliding-window approximation):
 *
 *   estimate = previous × (1 − elapsed / windowMs) + current
 *
 * Each window has its own counter key (`<key>:<window index>`), kept for two windows so it is still
 * there while it is the "previous" one. The store can only add a hit, not read a count, so every
 * attempt hits both keys: the previous key's count is then its own hits plus this window's, and the
 * current key's count is this window's, so their difference is the previous window's count.
 */
import { OAuthError } from "../../shared/errors.js";
import type { AuthorizationStore } from "../../storage/contract.js";
import type { RateLimitKeyKind, RateLimitName } from "./audit.js";
import { isUrlClientId } from "./client-id.js";
import type { FetchInfo, ServerContext } from "./context.js";

/** What one attempt found: the counts, the estimate, and how long until an attempt would pass. */
export interface SlidingWindowResult {
  /** Hits in the previous window. */
  previous: number;
  /** Hits in the current window, this one included. */
  current: number;
  /** The weighted estimate of hits in the last `windowMs`, this one included. */
  estimate: number;
  /** True when the estimate is above the limit (the attempt is refused; it still counts). */
  limited: boolean;
  /** Seconds until an attempt would pass if nothing else came in (at least 1 when limited). */
  retryAfterSeconds: number;
}

/** The sliding-window estimate of hits in the last `windowMs`. */
export function slidingEstimate(
  previous: number,
  current: number,
  elapsedMs: number,
  windowMs: number,
): number {
  const overlap = Math.max(0, Math.min(1, 1 - elapsedMs / windowMs));
  return previous * overlap + current;
}

/**
 * Milliseconds from `elapsedMs` into the current window until one more attempt would keep the
 * estimate within `limit`, assuming no other attempt arrives meanwhile.
 */
export function retryAfterMs(
  previous: number,
  current: number,
  elapsedMs: number,
  windowMs: number,
  limit: number,
): number {
  const room = limit - 1; // the next attempt counts itself
  if (current <= room) {
    // Within this window: wait until the previous window's weight has decayed enough.
    if (previous === 0 || slidingEstimate(previous, current, elapsedMs, windowMs) <= room) return 0;
    const untilOverlap = windowMs * (1 - (room - current) / previous) - elapsedMs;
    return Math.max(0, Math.ceil(untilOverlap));
  }
  // This window alone is over: wait for it to end, then for its weight to decay in the next one.
  const rest = windowMs - elapsedMs;
  return Math.ceil(rest + windowMs * (1 - Math.max(0, room) / current));
}

/**
 * Counts one attempt against `key` and says whether it is over `limit` hits in any `windowMs`
 * (sliding-window estimate). Every attempt counts, refused ones too, so parallel guesses cannot
 * slip past the limit before a failure is recorded.
 */
export async function hitSlidingWindow(
  store: Pick<AuthorizationStore, "hitRateLimit">,
  key: string,
  options: { now: number; windowMs: number; limit: number },
): Promise<SlidingWindowResult> {
  const { now, windowMs, limit } = options;
  const index = Math.floor(now / windowMs);
  const elapsed = now - index * windowMs;
  // Each key lives two windows: its own, and the next one, where it is the previous window.
  const [current, previousPlusCurrent] = await Promise.all([
    store.hitRateLimit(`${key}:${index}`, index * windowMs, 2 * windowMs),
    store.hitRateLimit(`${key}:${index - 1}`, (index - 1) * windowMs, 2 * windowMs),
  ]);
  // Concurrent attempts may interleave the two hits: a difference below zero is no previous hit.
  const previous = Math.max(0, previousPlusCurrent - current);
  const estimate = slidingEstimate(previous, current, elapsed, windowMs);
  const limited = estimate > limit;
  const retryMs = retryAfterMs(previous, current, elapsed, windowMs, limit);
  return {
    previous,
    current,
    estimate,
    limited,
    retryAfterSeconds: limited ? Math.max(1, Math.ceil(retryMs / 1000)) : Math.ceil(retryMs / 1000),
  };
}

/** Sub-windows per window of {@link hitBoundedWindow}: a refused caller waits at most one longer. */
export const BOUNDED_WINDOW_BUCKETS = 5;

/** What {@link hitBoundedWindow} found. */
export interface BoundedWindowResult {
  /** Attempts counted (this one included): every attempt since the start of the oldest sub-window. */
  count: number;
  /** True when `count` is above the limit (the attempt is refused; it still counts). */
  limited: boolean;
  /** Seconds until an attempt would pass if nothing else came in (0 when not limited). */
  retryAfterSeconds: number;
}

/**
 * Counts one attempt against `key` and refuses it when more than `limit` attempts fall in the last
 * `windowMs` or a little more: never more than `limit` pass in ANY window of `windowMs`, across
 * window boundaries, on every store and across instances (the counts are the store's). The sliding
 * estimate above cannot promise that: it assumes the previous window's attempts were spread evenly,
 * so a caller who spends the whole budget just before a boundary and waits half a window gets half
 * a budget more (issue 22: about twice the documented number across a boundary).
 *
 * How, with a store that can only add a hit to a fixed-window counter and return its count: the
 * window is cut into {@link BOUNDED_WINDOW_BUCKETS} sub-windows, and counter `j` spans sub-windows
 * `j .. j + BUCKETS`. An attempt in sub-window `b` hits the BUCKETS + 1 counters that span it; the
 * oldest, `b - BUCKETS`, then holds every attempt since the start of sub-window `b - BUCKETS`, a
 * span at least `windowMs` long, so it never counts fewer attempts than the last `windowMs` holds.
 * The price: a refused caller may wait up to one sub-window longer than a perfect log would say,
 * and an attempt costs BUCKETS + 1 counter writes (these limits guard pages people type into, not
 * the token endpoint).
 */
export async function hitBoundedWindow(
  store: Pick<AuthorizationStore, "hitRateLimit">,
  key: string,
  options: { now: number; windowMs: number; limit: number },
): Promise<BoundedWindowResult> {
  const { now, windowMs, limit } = options;
  const n = BOUNDED_WINDOW_BUCKETS;
  const bucketMs = Math.ceil(windowMs / n);
  const b = Math.floor(now / bucketMs);
  // spans[i]: counter b - n + i, the attempts from the start of sub-window b - n + i until now.
  const spans = await Promise.all(
    Array.from({ length: n + 1 }, (_, i) => {
      const j = b - n + i;
      return store.hitRateLimit(`${key}:s${j}`, j * bucketMs, (n + 1) * bucketMs);
    }),
  );
  const count = spans[0]!;
  if (count <= limit) return { count, limited: false, retryAfterSeconds: 0 };
  // After m sub-window boundaries the counted span starts at sub-window b - n + m, whose counter
  // (spans[m]) holds the attempts already made in it: the first m where one more fits is the wait.
  let m = 1;
  while (m <= n && spans[m]! + 1 > limit) m++;
  const retryMs = (b + m) * bucketMs - now;
  return { count, limited: true, retryAfterSeconds: Math.max(1, Math.ceil(retryMs / 1000)) };
}

/**
 * Counts one attempt against each of `limits` ({@link hitBoundedWindow}: at most `limit` in any
 * window of `windowMs`, every attempt counted, refused ones too) and returns the seconds to wait
 * when any of them is over, the longest wait of those, or undefined when none is. For the pages'
 * limits that key one attempt several ways (sign-in: username and address; device code entry:
 * sign-in and address).
 */
export async function hitSlidingWindows(
  store: Pick<AuthorizationStore, "hitRateLimit">,
  limits: readonly { key: string; limit: number }[],
  window: { now: number; windowMs: number },
): Promise<number | undefined> {
  const results = await Promise.all(
    limits.map(({ key, limit }) => hitBoundedWindow(store, key, { ...window, limit })),
  );
  const limited = results.filter((r) => r.limited);
  return limited.length ? Math.max(...limited.map((r) => r.retryAfterSeconds)) : undefined;
}

/**
 * The rate-limit key of a request's client: the address its host passed to `fetch`, never a
 * header the client wrote; one shared bucket ("unknown") when the host passed none.
 */
export function clientRateLimitKey(info: FetchInfo): string {
  return info.clientAddress ?? "unknown";
}

/**
 * The token endpoint's per-client key: the client id, or for a URL client id (a Client ID Metadata
 * Document) its host, so that minting new document URLs on one host does not buy a new budget.
 */
export function tokenClientRateLimitKey(clientId: string): string {
  if (isUrlClientId(clientId)) {
    try {
      return `host:${new URL(clientId).hostname}`;
    } catch {
      // A malformed URL id never gets this far (the resolver refuses it); count it as itself.
    }
  }
  return `client:${clientId}`;
}

/** 429 `temporarily_unavailable` with `Retry-After` (RFC 6585 §4). */
export class RateLimitedError extends OAuthError {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number, description = "too many registrations; retry later") {
    super("temporarily_unavailable", {
      description,
      status: 429,
      headers: { "retry-after": String(retryAfterSeconds) },
    });
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

const MINUTE_MS = 60_000;

/**
 * Counts one token endpoint request against `key` (sliding minute, `perMinute` requests; 0 = off)
 * and throws {@link RateLimitedError} with a `rate_limited` audit event when it is over.
 */
export async function enforceTokenRateLimit(
  ctx: ServerContext,
  limit: { kind: Extract<RateLimitKeyKind, "address" | "client" | "host">; key: string; perMinute: number },
  about: { clientId?: string; address: string },
): Promise<void> {
  if (limit.perMinute === 0) return;
  const result = await hitSlidingWindow(ctx.store, `token:${limit.key}`, {
    now: ctx.now(),
    windowMs: MINUTE_MS,
    limit: limit.perMinute,
  });
  if (!result.limited) return;
  const name: RateLimitName = "token";
  ctx.audit?.({
    type: "rate_limited",
    limit: name,
    key_kind: limit.kind,
    retry_after_seconds: result.retryAfterSeconds,
    address: about.address,
    ...(about.clientId === undefined ? {} : { client_id: about.clientId }),
  });
  throw new RateLimitedError(result.retryAfterSeconds, "too many token requests; retry later");
}
