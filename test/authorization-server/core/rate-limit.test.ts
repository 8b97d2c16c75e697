/**
 * The rate limiters. The token endpoint's sliding-window estimate: attempts on both sides of a
 * window boundary add up (a fixed window would reset), the previous window's weight decays as it
 * slides out, and Retry-After is the real wait until one more attempt would pass. The pages' limits
 * (sign-in, device code entry): never more than the documented number in any window, across a
 * boundary, on every store and across instances (issue 22: the estimate admitted about twice).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  hitSlidingWindow,
  hitSlidingWindows,
  retryAfterMs,
  slidingEstimate,
} from "../../../src/authorization-server/core/rate-limit.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";

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

describe("hitSlidingWindows (the pages' limits): the documented number holds in every window", () => {
  /** Whether an attempt at `now` passes a limit of `limit` per W on `key`. */
  const passes = async (
    store: Parameters<typeof hitSlidingWindows>[0],
    key: string,
    now: number,
    limit = 30,
  ) => (await hitSlidingWindows(store, [{ key, limit }], { now, windowMs: W })) === undefined;

  it("thirty just before a boundary and none half a window later (the sliding estimate let fifteen more through)", async () => {
    const store = createMemoryStore();
    const boundary = 4_000 * W;
    let admitted = 0;
    for (let i = 0; i < 30; i++) if (await passes(store, "addr", boundary - 1_000)) admitted++;
    // Nothing tried in between (every attempt counts, so hammering would lock the caller out).
    for (let i = 0; i < 30; i++) if (await passes(store, "addr", boundary + W / 2)) admitted++;
    expect(admitted).toBe(30);
  });

  it("property: in any window of W, at most the limit of attempts pass, however they are spread", async () => {
    await fc.assert(
      fc.asyncProperty(
        // Bursts: a caller who waits for the right moments, not one who hammers.
        fc.array(fc.record({ at: fc.integer({ min: 0, max: 3 * W }), n: fc.integer({ min: 1, max: 12 }) }), {
          minLength: 1,
          maxLength: 8,
        }),
        async (bursts) => {
          const store = createMemoryStore();
          const start = 7_000 * W + 12_345; // not aligned to any window
          const times = bursts.flatMap((b) => Array<number>(b.n).fill(start + b.at)).sort((a, b) => a - b);
          const admitted: number[] = [];
          for (const t of times) if (await passes(store, "k", t, LIMIT)) admitted.push(t);
          for (const t of admitted) {
            expect(admitted.filter((u) => u > t - W && u <= t).length).toBeLessThanOrEqual(LIMIT);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("Retry-After is a wait after which an attempt passes, and never more than a window and a minute", async () => {
    const store = createMemoryStore();
    const start = 9_000 * W;
    for (let i = 0; i < LIMIT; i++) await passes(store, "k", start + 30_000, LIMIT);
    const wait = await hitSlidingWindows(store, [{ key: "k", limit: LIMIT }], {
      now: start + 90_000,
      windowMs: W,
    });
    expect(wait).toBeGreaterThan(0);
    expect(wait! * 1000).toBeLessThanOrEqual(W + 60_000);
    expect(await passes(store, "k", start + 90_000 + wait! * 1000, LIMIT)).toBe(true);
  });

  it.each([
    ["SQLite, two instances on one file", "sqlite"],
    ["PostgreSQL, two instances on one schema", "postgres"],
  ] as const)("holds across instances: %s", async (_name, kind) => {
    const { stores, close } = await twoInstances(kind);
    try {
      const boundary = 5_000 * W;
      let admitted = 0;
      for (let i = 0; i < 30; i++) if (await passes(stores[i % 2]!, "addr", boundary - 1_000)) admitted++;
      for (let i = 0; i < 30; i++) if (await passes(stores[i % 2]!, "addr", boundary + W / 2)) admitted++;
      expect(admitted).toBe(30);
    } finally {
      await close();
    }
  });
});

/** Two stores on one database, as two instances of the server; migrated; `close` drops them. */
async function twoInstances(
  kind: "sqlite" | "postgres",
): Promise<{ stores: AuthorizationStore[]; close(): Promise<void> }> {
  let stores: AuthorizationStore[];
  let cleanup: () => Promise<void>;
  if (kind === "sqlite") {
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-rate-limit-"));
    const path = join(dir, "gatehouse.db");
    stores = [createSqliteStore({ path }), createSqliteStore({ path })];
    cleanup = () => rm(dir, { recursive: true, force: true });
  } else {
    await requirePostgres();
    const schemas = schemaNamer("rate_limit");
    const schema = schemas.next();
    stores = [
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
    ];
    cleanup = () => schemas.dropSchemas();
  }
  for (const store of stores) await store.migrate();
  return {
    stores,
    async close() {
      for (const store of stores) await store.close();
      await cleanup();
    },
  };
}
