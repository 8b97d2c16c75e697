/**
 * The sliding-window limiter behind the login limits: attempts on both sides of a window boundary
 * add up (a fixed window would reset), the previous window's weight decays as it slides out, and
 * Retry-After is the real wait until one more attempt would pass.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  hitSlidingWindow,
  retryAfterMs,
  slidingEstimate,
} from "../../src/authorization-server/rate-limit.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";

const W = 300_000;
const LIMIT = 10;

/** The estimate `t` ms after `elapsed` into the current window, with no further attempts. */
function estimateLater(previous: number, current: number, elapsed: number, t: number): number {
  const at = elapsed + t;
  if (at < W) return slidingEstimate(previous, current, at, W);
  if (at < 2 * W) return slidingEstimate(current, 0, at - W, W);
  return 0;
}

describe("hitSlidingWindow", () => {
  it("attempts straddling a window boundary still count: the limit holds across it", async () => {
    const store = createMemoryStore();
    const start = 1_000 * W; // a window boundary at 1001 W
    const results = [];
    // Six attempts in the last second of one window, then five in the first second of the next.
    for (let i = 0; i < 6; i++) {
      results.push(await hitSlidingWindow(store, "k", { now: start + W - 1_000, windowMs: W, limit: LIMIT }));
    }
    for (let i = 0; i < 5; i++) {
      results.push(await hitSlidingWindow(store, "k", { now: start + W + 1_000, windowMs: W, limit: LIMIT }));
    }
    expect(results.map((r) => r.limited)).toEqual([...Array(10).fill(false), true]);
    expect(results.at(-1)).toMatchObject({ previous: 6, current: 5 });
  });

  it("the previous window's weight decays as it slides out", async () => {
    const store = createMemoryStore();
    const start = 2_000 * W;
    for (let i = 0; i < LIMIT; i++)
      await hitSlidingWindow(store, "k", { now: start + 10, windowMs: W, limit: LIMIT });
    // Early in the next window almost all ten still count: the 11th attempt is refused.
    const early = await hitSlidingWindow(store, "k", { now: start + W + 1_000, windowMs: W, limit: LIMIT });
    expect(early.limited).toBe(true);
    expect(early.retryAfterSeconds).toBeGreaterThan(1);
    // Past the middle of it, half of them have slid out.
    const later = await hitSlidingWindow(store, "k", {
      now: start + W + W / 2 + 1_000,
      windowMs: W,
      limit: LIMIT,
    });
    expect(later).toMatchObject({ previous: LIMIT, current: 2, limited: false });
    // Two windows on, nothing is left.
    const clean = await hitSlidingWindow(store, "k", { now: start + 3 * W, windowMs: W, limit: LIMIT });
    expect(clean).toMatchObject({ previous: 0, current: 1, estimate: 1, limited: false });
  });

  it("keys are independent", async () => {
    const store = createMemoryStore();
    for (let i = 0; i <= LIMIT; i++)
      await hitSlidingWindow(store, "a", { now: 5 * W, windowMs: W, limit: LIMIT });
    const other = await hitSlidingWindow(store, "b", { now: 5 * W, windowMs: W, limit: LIMIT });
    expect(other).toMatchObject({ current: 1, limited: false });
  });

  it("a limited attempt says to retry after exactly the wait that lets the next attempt pass", async () => {
    const store = createMemoryStore();
    const start = 3_000 * W;
    for (let i = 0; i < 7; i++)
      await hitSlidingWindow(store, "k", { now: start + W - 5_000, windowMs: W, limit: LIMIT });
    let refused: Awaited<ReturnType<typeof hitSlidingWindow>> | undefined;
    let now = start + W + 30_000;
    for (let i = 0; i < 10 && !refused?.limited; i++) {
      refused = await hitSlidingWindow(store, "k", { now, windowMs: W, limit: LIMIT });
    }
    expect(refused?.limited).toBe(true);
    now += refused!.retryAfterSeconds * 1000;
    const next = await hitSlidingWindow(store, "k", { now, windowMs: W, limit: LIMIT });
    expect(next.limited).toBe(false);
  });
});

describe("retryAfterMs", () => {
  it("is the first moment one more attempt keeps the estimate within the limit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: W - 1 }),
        (previous, current, elapsed) => {
          const wait = retryAfterMs(previous, current, elapsed, W, LIMIT);
          expect(wait).toBeGreaterThanOrEqual(0);
          expect(estimateLater(previous, current, elapsed, wait) + 1).toBeLessThanOrEqual(LIMIT + 1e-9);
          if (wait >= 1) {
            expect(estimateLater(previous, current, elapsed, wait - 1) + 1).toBeGreaterThan(LIMIT - 1e-9);
          }
        },
      ),
    );
  });
});
