/**
 * cachedVerifier's remembered entry: a repeat of the token last stored or hit is answered without
 * the map lookup. These tests pin what that shortcut must never do: answer another token, or
 * answer from an entry the cache no longer holds (expired, evicted, replaced, cleared), and they
 * check that the least-recently-used order stays right when hits go through it.
 */
import { describe, expect, it } from "vitest";
import { cachedVerifier } from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";
import { recordingVerifier } from "./recording-verifier.js";

const SIGNATURE = "s".repeat(43);

/** Another token of the cache's shape: 100 characters of `letter`, then a 43-character ending. */
function tokenOf(letter: string, ending = letter.toLowerCase().repeat(43)): string {
  return `${letter.repeat(100)}.${ending}`;
}
const good = `${"A".repeat(150)}.${"p".repeat(200)}.${SIGNATURE}`;

describe("cachedVerifier: the last hit remembered", () => {
  it("rule: a different token never gets the remembered entry's answer", async () => {
    const forged = [
      // Same ending (the map key) and same length.
      `${"Z".repeat(150)}.${"p".repeat(200)}.${SIGNATURE}`,
      // Same length, one character different at the start, the middle, the end.
      `B${good.slice(1)}`,
      `${good.slice(0, 200)}q${good.slice(201)}`,
      `${good.slice(0, -1)}t`,
      // Prefixes and extensions of it.
      good.slice(0, -1),
      good.slice(0, 32),
      `${good}s`,
      `${good}=`,
      `x${good}`,
    ];
    const inner = recordingVerifier([good]);
    const v = cachedVerifier(inner);
    expect((await v.verify(good)).subject).toBe(good);
    // Hit twice: the entry is now the remembered one.
    expect(v.peek(good)?.subject).toBe(good);
    expect((await v.verify(good)).subject).toBe(good);
    for (const token of forged) {
      expect(v.peek(token)).toBeUndefined();
      await expect(v.verify(token)).rejects.toThrow(OAuthError);
      // The valid token is still answered from the cache in between.
      expect(v.peek(good)?.subject).toBe(good);
    }
    expect(inner.calls).toEqual([good, ...forged]);
  });

  it("the same token as another string object is a hit (equality by value)", async () => {
    const inner = recordingVerifier([good]);
    const v = cachedVerifier(inner);
    await v.verify(good);
    const copy = [...good].join("");
    expect((await v.verify(copy)).subject).toBe(good);
    expect(v.peek(copy)?.subject).toBe(good);
    expect(inner.calls).toHaveLength(1);
  });

  it("rule: an expired remembered entry is never served, not even once", async () => {
    let now = 1_000_000;
    const exp = now / 1000 + 10;
    const inner = recordingVerifier([good], () => exp);
    const v = cachedVerifier(inner, { now: () => now, maxTtlSeconds: 3600 });
    await v.verify(good);
    expect(v.peek(good)?.subject).toBe(good);
    now = exp * 1000 - 1;
    expect(v.peek(good)?.subject).toBe(good);
    // At exp itself the entry is no longer trusted (its `until` is exclusive).
    now = exp * 1000;
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(v.peek(good)).toBeUndefined();
    expect(v.size).toBe(0);
    // Time running backwards afterwards does not bring it back.
    now = 1_000_000;
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
  });

  it("rule: an entry past maxTtlSeconds is never served through the remembered entry", async () => {
    let now = 1_000_000;
    const inner = recordingVerifier([good]);
    const v = cachedVerifier(inner, { now: () => now, maxTtlSeconds: 5 });
    await v.verify(good);
    await v.verify(good);
    now += 5_000;
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(inner.calls).toEqual([good, good]);
  });

  it("rule: a cleared cache serves nothing it held, also after a new entry is stored", async () => {
    const other = tokenOf("O");
    const inner = recordingVerifier([good, other]);
    const v = cachedVerifier(inner);
    await v.verify(good);
    expect(v.peek(good)?.subject).toBe(good);
    v.clear();
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    // A new entry after the clear: the old remembered one must not come back with it.
    expect((await v.verify(other)).subject).toBe(other);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(v.size).toBe(1);
  });

  it("rule: an evicted entry is never served (one entry: the next token evicts the remembered one)", async () => {
    const other = tokenOf("O");
    const inner = recordingVerifier([good, other]);
    const v = cachedVerifier(inner, { maxEntries: 1 });
    await v.verify(good);
    expect(v.peek(good)?.subject).toBe(good);
    await v.verify(other);
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(v.peek(other)?.subject).toBe(other);
  });

  it("rule: an entry evicted after newer ones were stored is never served", async () => {
    const b = tokenOf("B");
    const c = tokenOf("C");
    const inner = recordingVerifier([good, b, c]);
    const v = cachedVerifier(inner, { maxEntries: 2 });
    await v.verify(good);
    await v.verify(b);
    // A hit on `good` (through the map: it becomes the most recent), then repeats of it.
    expect(v.peek(good)?.subject).toBe(good);
    expect(v.peek(good)?.subject).toBe(good);
    // `c` is stored: `b`, the least recently used, goes.
    await v.verify(c);
    inner.calls.length = 0;
    expect(v.peek(good)?.subject).toBe(good);
    expect(v.peek(c)?.subject).toBe(c);
    expect(v.peek(b)).toBeUndefined();
    // Repeats of `c`, then a new token: `good` is now the least recently used and goes.
    expect(v.peek(c)?.subject).toBe(c);
    await v.verify(b);
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(inner.calls).toEqual([b, good]);
  });

  it("rule: the remembered entry, evicted as least recently used once two newer ones came, is never served", async () => {
    const b = tokenOf("B");
    const c = tokenOf("C");
    const inner = recordingVerifier([good, b, c]);
    const v = cachedVerifier(inner, { maxEntries: 2 });
    await v.verify(good);
    await v.verify(good);
    await v.verify(b);
    await v.verify(c);
    inner.accepted.delete(good);
    expect(v.peek(good)).toBeUndefined();
    await expect(v.verify(good)).rejects.toThrow(OAuthError);
    expect(inner.calls).toEqual([good, b, c, good]);
  });

  it("a hit on an older entry after a newer one was stored refreshes its recency", async () => {
    const b = tokenOf("B");
    const c = tokenOf("C");
    const inner = recordingVerifier([good, b, c]);
    const v = cachedVerifier(inner, { maxEntries: 2 });
    await v.verify(good);
    await v.verify(good);
    await v.verify(b);
    // `good` was the remembered entry before `b` was stored: this hit must move it to the end.
    await v.verify(good);
    await v.verify(c);
    expect(inner.calls).toEqual([good, b, c]);
    expect(v.peek(good)?.subject).toBe(good);
    expect(v.peek(c)?.subject).toBe(c);
    expect(v.peek(b)).toBeUndefined();
  });

  it("rule: a token replaced by another with the same ending is not served from the remembered entry", async () => {
    const first = tokenOf("A", SIGNATURE);
    const second = tokenOf("Z", SIGNATURE);
    const inner = recordingVerifier([first, second]);
    const v = cachedVerifier(inner);
    await v.verify(first);
    expect(v.peek(first)?.subject).toBe(first);
    // `second` takes the entry `first` had (same map key).
    await v.verify(second);
    inner.accepted.delete(first);
    expect(v.peek(first)).toBeUndefined();
    await expect(v.verify(first)).rejects.toThrow(OAuthError);
    expect(v.peek(second)?.subject).toBe(second);
    expect(inner.calls).toEqual([first, second, first]);
  });

  it("rule: failures are never remembered, before or after a hit", async () => {
    const bad = tokenOf("X");
    const inner = recordingVerifier([good]);
    const v = cachedVerifier(inner);
    await expect(v.verify(bad)).rejects.toThrow(OAuthError);
    expect(v.peek(bad)).toBeUndefined();
    await v.verify(good);
    await v.verify(good);
    await expect(v.verify(bad)).rejects.toThrow(OAuthError);
    await expect(v.verify(bad)).rejects.toThrow(OAuthError);
    expect(v.peek(bad)).toBeUndefined();
    expect(inner.calls).toEqual([bad, good, bad, bad]);
    expect(v.size).toBe(1);
  });

  it("rule: a token that is not a b64token is never remembered, even right after a hit", async () => {
    const inner = recordingVerifier([good, `${good} `]);
    const v = cachedVerifier(inner);
    await v.verify(good);
    expect((await v.verify(`${good} `)).subject).toBe(`${good} `);
    expect(v.peek(`${good} `)).toBeUndefined();
    expect(v.peek(good)?.subject).toBe(good);
  });
});
