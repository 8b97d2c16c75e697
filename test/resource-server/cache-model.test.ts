/**
 * cachedVerifier against a reference model: long seeded random runs of verify/peek/clear with a
 * moving clock, revocations, expiring tokens and look-alike tokens (same ending, prefixes), each
 * answer compared with what a plain least-recently-used list of exactly-verified tokens would give.
 * Whatever bookkeeping the cache uses inside (map order, links, a remembered entry), it must
 * never answer a token it does not hold as verified, and must evict in LRU order.
 */
import { describe, expect, it } from "vitest";
import { type AuthInfo, cachedVerifier } from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";

/** Small deterministic PRNG (mulberry32), so a failure can be replayed by its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The cache's map key length (cache.ts): tokens sharing their last 32 characters collide. */
const KEY_LENGTH = 32;

interface ModelEntry {
  token: string;
  until: number;
}

/** The reference: an array in least- to most-recently-used order, one entry per 32-char ending. */
class ModelCache {
  entries: ModelEntry[] = [];
  constructor(
    readonly maxEntries: number,
    readonly maxTtlMs: number,
  ) {}
  private indexOfKey(token: string): number {
    const key = token.slice(-KEY_LENGTH);
    return this.entries.findIndex((e) => e.token.slice(-KEY_LENGTH) === key);
  }
  /** A hit refreshes recency; an expired entry of this exact token is dropped. */
  lookup(token: string, now: number): boolean {
    const i = this.indexOfKey(token);
    if (i < 0 || this.entries[i]!.token !== token) return false;
    const [entry] = this.entries.splice(i, 1);
    if (!(entry!.until > now)) return false;
    this.entries.push(entry!);
    return true;
  }
  store(token: string, expiresAtSeconds: number, now: number): void {
    const until = Math.min(expiresAtSeconds * 1000, now + this.maxTtlMs);
    if (!(until > now)) return;
    const i = this.indexOfKey(token);
    if (i >= 0) this.entries.splice(i, 1);
    else if (this.entries.length >= this.maxEntries) this.entries.shift();
    this.entries.push({ token, until });
  }
  clear(): void {
    this.entries = [];
  }
}

function tokenPool(random: () => number): string[] {
  const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const segment = (n: number) =>
    Array.from({ length: n }, () => letters[Math.floor(random() * letters.length)]).join("");
  const pool: string[] = [];
  for (let i = 0; i < 8; i++) pool.push(`${segment(20)}.${segment(30)}.${segment(43)}`);
  // Look-alikes: the same ending (map key) with another start, the same start with another ending,
  // a prefix, an extension.
  const base = pool[0]!;
  pool.push(`${segment(20)}${base.slice(20)}`);
  pool.push(`${segment(5)}${base.slice(-KEY_LENGTH)}`);
  pool.push(`${base.slice(0, -1)}${base.endsWith("A") ? "B" : "A"}`);
  pool.push(base.slice(0, -1));
  pool.push(`${base}A`);
  pool.push(pool[1]!.slice(-KEY_LENGTH));
  return pool;
}

async function run(seed: number, steps: number): Promise<void> {
  const random = prng(seed);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const pool = tokenPool(random);
  let now = 1_000_000_000;
  /** Each token's `exp`, in seconds, drawn once; a few already near expiry. */
  const exp = new Map(pool.map((t) => [t, now / 1000 + 1 + Math.floor(random() * 40)]));
  /** Tokens the inner verifier accepts right now (revocation takes some away, others come back). */
  const valid = new Set(pool.filter(() => random() < 0.8));
  const calls: string[] = [];
  const maxEntries = 1 + Math.floor(random() * 5);
  const maxTtlSeconds = 5 + Math.floor(random() * 30);
  const v = cachedVerifier(
    {
      verify: async (token: string): Promise<AuthInfo> => {
        calls.push(token);
        if (!valid.has(token) || !(exp.get(token)! * 1000 > now)) throw new OAuthError("invalid_token");
        return {
          subject: token,
          clientId: "c",
          scopes: [],
          audience: ["r"],
          expiresAt: exp.get(token)!,
          issuer: "i",
        };
      },
    },
    { maxEntries, maxTtlSeconds, now: () => now },
  );
  const model = new ModelCache(maxEntries, maxTtlSeconds * 1000);
  for (let step = 0; step < steps; step++) {
    const where = `seed ${seed}, step ${step}`;
    const r = random();
    if (r < 0.01) {
      v.clear();
      model.clear();
    } else if (r < 0.06) {
      now += Math.floor(random() * 4000);
    } else if (r < 0.09) {
      const token = pick(pool);
      if (valid.has(token)) valid.delete(token);
      else valid.add(token);
    } else if (r < 0.11) {
      // A token re-issued later: a fresh exp (the string stays the same, as in these tests only).
      exp.set(pick(pool), now / 1000 + 1 + Math.floor(random() * 40));
    } else if (r < 0.4) {
      const token = pick(pool);
      const hit = model.lookup(token, now);
      expect(v.peek(token)?.subject, where).toBe(hit ? token : undefined);
    } else {
      const token = pick(pool);
      const hit = model.lookup(token, now);
      const before = calls.length;
      let answer: string | undefined;
      try {
        answer = (await v.verify(token)).subject;
      } catch (error) {
        expect(error, where).toBeInstanceOf(OAuthError);
      }
      if (hit) {
        // Served from the cache: no inner call, the verified token's own answer.
        expect(calls.length, where).toBe(before);
        expect(answer, where).toBe(token);
      } else {
        expect(calls.slice(before), where).toEqual([token]);
        if (answer !== undefined) {
          expect(answer, where).toBe(token);
          model.store(token, exp.get(token)!, now);
        }
      }
    }
    expect(v.size, where).toBe(model.entries.length);
    expect(v.size, where).toBeLessThanOrEqual(maxEntries);
  }
  // Every token the model holds is answered for itself, every other one is not answered.
  for (const token of pool) {
    const hit = model.lookup(token, now);
    expect(v.peek(token)?.subject, `seed ${seed}, final`).toBe(hit ? token : undefined);
  }
}

describe("cachedVerifier against an LRU model", () => {
  it("agrees with the model over seeded random runs (hits, misses, eviction order, expiry, clear)", async () => {
    for (let seed = 1; seed <= 60; seed++) await run(seed, 800);
  });

  it("a flood of distinct valid tokens keeps the cache at its bound and serves only the newest", async () => {
    let calls = 0;
    const v = cachedVerifier(
      {
        verify: async (token: string): Promise<AuthInfo> => {
          calls++;
          return {
            subject: token,
            clientId: "c",
            scopes: [],
            audience: ["r"],
            expiresAt: 1e12,
            issuer: "i",
          };
        },
      },
      { maxEntries: 100 },
    );
    const token = (i: number) => `flood.${String(i).padStart(40, "0")}`;
    for (let i = 0; i < 5000; i++) {
      await v.verify(token(i));
      expect(v.size).toBeLessThanOrEqual(100);
    }
    expect(v.size).toBe(100);
    expect(calls).toBe(5000);
    for (let i = 0; i < 4900; i += 97) expect(v.peek(token(i))).toBeUndefined();
    for (let i = 4900; i < 5000; i++) expect(v.peek(token(i))?.subject).toBe(token(i));
  });
});
