/**
 * cachedVerifier under concurrency, as a cold request sees it: verifications under way are found
 * by the token's ending (the cache's map key) but only ever shared with the exact same token.
 */
import { describe, expect, it } from "vitest";
import { type AuthInfo, cachedVerifier } from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";

/** An inner verifier whose answers wait for `release()`; only tokens in `valid` pass. */
function gatedVerifier(valid: Set<string>) {
  const calls: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    calls,
    release: () => open(),
    verify: async (token: string): Promise<AuthInfo> => {
      calls.push(token);
      await gate;
      if (!valid.has(token)) throw new OAuthError("invalid_token");
      return {
        subject: token,
        clientId: "c",
        scopes: [],
        audience: ["r"],
        expiresAt: Date.now() / 1000 + 600,
        issuer: "i",
      };
    },
  };
}

describe("cachedVerifier: verifications under way", () => {
  it("a token with the same ending as one being verified gets its own verification", async () => {
    const ending = "s".repeat(40);
    const good = `${"A".repeat(100)}.${ending}`;
    const forged = `${"Z".repeat(100)}.${ending}`;
    const inner = gatedVerifier(new Set([good]));
    const v = cachedVerifier(inner);
    const first = v.verify(good);
    const second = v.verify(forged);
    const again = v.verify(good);
    inner.release();
    expect((await first).subject).toBe(good);
    await expect(second).rejects.toThrow(OAuthError);
    expect((await again).subject).toBe(good);
    // The other token had its own verification (the same token's calls may be shared or not).
    expect(inner.calls.filter((t) => t === forged)).toHaveLength(1);
    expect(inner.calls[0]).toBe(good);
    expect(v.peek(forged)).toBeUndefined();
    expect(v.peek(good)?.subject).toBe(good);
  });

  it("the forged token first: the valid one with its ending is neither refused nor delayed by it", async () => {
    const ending = "e".repeat(40);
    const good = `${"A".repeat(100)}.${ending}`;
    const forged = `${"Z".repeat(100)}.${ending}`;
    const inner = gatedVerifier(new Set([good]));
    const v = cachedVerifier(inner);
    const bad = v.verify(forged);
    const fine = v.verify(good);
    const fineAgain = v.verify(good);
    inner.release();
    await expect(bad).rejects.toThrow(OAuthError);
    expect((await fine).subject).toBe(good);
    expect((await fineAgain).subject).toBe(good);
    expect(v.peek(good)?.subject).toBe(good);
    expect(inner.calls).toEqual([forged, good]);
    // Once settled, a later call starts afresh (a failure is never remembered).
    const later = v.verify(forged);
    await expect(later).rejects.toThrow(OAuthError);
    expect(inner.calls.filter((t) => t === forged)).toHaveLength(2);
  });
});
