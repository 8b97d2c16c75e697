/**
 * cachedVerifier's `admission: "second-use"`: a verified token is remembered only when it is
 * verified again while its mark from the first verification is still held. These tests pin what
 * it is for (one-off tokens neither enter the cache nor evict the tokens in use) and what it must
 * never change: a hit only for the exact token verified, failures never remembered, clear()
 * forgetting everything, the default remembering on the first verification.
 */
import { describe, expect, it } from "vitest";
import { cachedVerifier } from "../../src/resource-server/index.js";
import { recordingVerifier } from "./recording-verifier.js";

/** A token of the cache's shape with a distinct random-looking 43-character ending. */
function token(n: number): string {
  const ending = n.toString(36).padStart(8, "0").repeat(6).slice(0, 43);
  return `${"h".repeat(100)}.${"p".repeat(50)}.${ending}`;
}

describe('cachedVerifier: admission "second-use"', () => {
  it("a token is remembered at its second verification, and hit from then on", async () => {
    const t = token(1);
    const inner = recordingVerifier([t]);
    const cache = cachedVerifier(inner, { admission: "second-use" });
    await cache.verify(t);
    expect(cache.size).toBe(0);
    expect(cache.peek(t)).toBeUndefined();
    await cache.verify(t);
    expect(cache.size).toBe(1);
    for (let i = 0; i < 5; i++) await cache.verify(t);
    expect(cache.peek(t)?.subject).toBe(t);
    expect(inner.calls).toEqual([t, t]);
  });

  it("rule: a flood of one-off tokens neither enters the cache nor evicts the token in use", async () => {
    const hot = token(0);
    const flood = Array.from({ length: 2000 }, (_, i) => token(i + 1));
    const inner = recordingVerifier([hot, ...flood]);
    const cache = cachedVerifier(inner, { admission: "second-use", maxEntries: 100 });
    await cache.verify(hot);
    await cache.verify(hot);
    for (const t of flood) await cache.verify(t);
    expect(cache.size).toBe(1);
    inner.calls.length = 0;
    await cache.verify(hot);
    expect(inner.calls).toEqual([]);

    // The default remembers each on its first verification: the same flood evicts the token in use.
    const always = cachedVerifier(recordingVerifier([hot, ...flood]), { maxEntries: 100 });
    await always.verify(hot);
    for (const t of flood) await always.verify(t);
    expect(always.size).toBe(100);
    expect(always.peek(hot)).toBeUndefined();
  });

  it("rule: a look-alike with the same ending is never answered from another token's entry", async () => {
    const t = token(7);
    const lookAlike = `${"Z".repeat(100)}.${t.slice(101)}`;
    expect(lookAlike.slice(-32)).toBe(t.slice(-32));
    const inner = recordingVerifier([t]);
    const cache = cachedVerifier(inner, { admission: "second-use" });
    await cache.verify(t);
    await cache.verify(t);
    // The look-alike shares the ending (and so the mark): it still goes to the inner verifier,
    // which refuses it, every time.
    for (let i = 0; i < 3; i++)
      await expect(cache.verify(lookAlike)).rejects.toMatchObject({ code: "invalid_token" });
    expect(inner.calls.filter((c) => c === lookAlike)).toHaveLength(3);
    expect(cache.peek(lookAlike)).toBeUndefined();
    expect(cache.peek(t)?.subject).toBe(t);
  });

  it("rule: a failed verification leaves no mark; a token accepted later starts over", async () => {
    const t = token(9);
    const inner = recordingVerifier([]);
    const cache = cachedVerifier(inner, { admission: "second-use" });
    await expect(cache.verify(t)).rejects.toMatchObject({ code: "invalid_token" });
    await expect(cache.verify(t)).rejects.toMatchObject({ code: "invalid_token" });
    inner.accepted.add(t);
    await cache.verify(t);
    expect(cache.size).toBe(0);
    await cache.verify(t);
    expect(cache.size).toBe(1);
  });

  it("clear() forgets the marks too", async () => {
    const t = token(3);
    const inner = recordingVerifier([t]);
    const cache = cachedVerifier(inner, { admission: "second-use" });
    await cache.verify(t);
    cache.clear();
    await cache.verify(t);
    expect(cache.size).toBe(0);
    await cache.verify(t);
    expect(cache.size).toBe(1);
  });

  it("concurrent first verifications share one call and count as one use", async () => {
    const t = token(5);
    const inner = recordingVerifier([t]);
    const cache = cachedVerifier(inner, { admission: "second-use" });
    await Promise.all([cache.verify(t), cache.verify(t), cache.verify(t)]);
    expect(inner.calls).toEqual([t]);
    expect(cache.size).toBe(0);
  });

  it("the default is admission on the first verification", async () => {
    const t = token(2);
    const inner = recordingVerifier([t]);
    const cache = cachedVerifier(inner);
    await cache.verify(t);
    expect(cache.size).toBe(1);
    await cache.verify(t);
    expect(inner.calls).toEqual([t]);
  });

  it("an unknown admission is refused at set-up", () => {
    const inner = recordingVerifier();
    expect(() => cachedVerifier(inner, { admission: "never" as "always" })).toThrow(
      expect.objectContaining({ code: "ERR_INVALID_OPTION" }),
    );
  });
});
