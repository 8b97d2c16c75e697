import { describe, expect, it } from "vitest";
import { type AuthInfo, cachedVerifier } from "../../src/resource-server/index.js";
import { GatehouseTypeError, OAuthError } from "../../src/shared/errors.js";

function countingVerifier(expiresAt: (token: string) => number, fail?: (token: string) => boolean) {
  const seen: string[] = [];
  return {
    seen,
    verify: async (token: string): Promise<AuthInfo> => {
      seen.push(token);
      if (fail?.(token)) throw new OAuthError("invalid_token");
      return {
        subject: token,
        clientId: "c",
        scopes: [],
        audience: ["r"],
        expiresAt: expiresAt(token),
        issuer: "i",
      };
    },
  };
}

describe("cachedVerifier", () => {
  it("serves repeats from the cache", async () => {
    let now = 1_000_000;
    const inner = countingVerifier(() => now / 1000 + 60);
    const v = cachedVerifier(inner, { now: () => now });
    expect((await v.verify("a")).subject).toBe("a");
    expect((await v.verify("a")).subject).toBe("a");
    expect(inner.seen).toEqual(["a"]);
    now += 1000;
    await v.verify("a");
    expect(inner.seen).toEqual(["a"]);
  });

  it("rule: an entry never outlives the token's exp", async () => {
    let now = 1_000_000;
    const inner = countingVerifier(() => 1_000_000 / 1000 + 10);
    const v = cachedVerifier(inner, { now: () => now, maxTtlSeconds: 3600 });
    await v.verify("a");
    now += 9_000;
    await v.verify("a");
    expect(inner.seen).toHaveLength(1);
    now += 2_000;
    await v.verify("a");
    expect(inner.seen).toHaveLength(2);
  });

  it("rule: entries expire after maxTtlSeconds even for long-lived tokens", async () => {
    let now = 1_000_000;
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner, { now: () => now, maxTtlSeconds: 5 });
    await v.verify("a");
    now += 6000;
    await v.verify("a");
    expect(inner.seen).toHaveLength(2);
  });

  it("rule: failures are never cached", async () => {
    let failing = true;
    const inner = countingVerifier(
      () => 1e12,
      () => failing,
    );
    const v = cachedVerifier(inner);
    await expect(v.verify("a")).rejects.toThrow(OAuthError);
    await expect(v.verify("a")).rejects.toThrow(OAuthError);
    failing = false;
    expect((await v.verify("a")).subject).toBe("a");
    expect(inner.seen).toHaveLength(3);
    expect(v.size).toBe(1);
  });

  it("is bounded and evicts the least recently used entry", async () => {
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner, { maxEntries: 2 });
    await v.verify("a");
    await v.verify("b");
    await v.verify("a"); // a is now the most recent
    await v.verify("c"); // evicts b
    expect(v.size).toBe(2);
    inner.seen.length = 0;
    await v.verify("a");
    await v.verify("c");
    expect(inner.seen).toEqual([]);
    await v.verify("b");
    expect(inner.seen).toEqual(["b"]);
  });

  it("coalesces concurrent verifications of one token", async () => {
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner);
    await Promise.all(Array.from({ length: 10 }, () => v.verify("same")));
    expect(inner.seen).toEqual(["same"]);
  });

  it("does not wedge when the inner verifier throws synchronously", async () => {
    let calls = 0;
    const v = cachedVerifier({
      verify: ((token: string) => {
        calls++;
        if (calls === 1) throw new OAuthError("invalid_token");
        return Promise.resolve({
          subject: token,
          clientId: "c",
          scopes: [],
          audience: ["r"],
          expiresAt: 1e12,
          issuer: "i",
        });
      }) as (t: string) => Promise<AuthInfo>,
    });
    await expect(v.verify("a")).rejects.toThrow(OAuthError);
    expect((await v.verify("a")).subject).toBe("a");
  });

  it("distinct tokens never share an entry", async () => {
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner);
    expect((await v.verify("token-1")).subject).toBe("token-1");
    expect((await v.verify("token-2")).subject).toBe("token-2");
  });

  it("rule: a hit is only granted to the exact token string that was verified", async () => {
    // Only `good` is a valid token; the others share its ending (what the cache looks entries up
    // by), its beginning, or are a part of it.
    const good = `${"A".repeat(200)}.${"b".repeat(120)}`;
    const forged = [
      `${"Z".repeat(200)}.${"b".repeat(120)}`,
      `X${good}`,
      good.slice(1),
      good.slice(0, -1),
      `${good}=`,
      good.toLowerCase(),
    ];
    const inner = countingVerifier(
      () => 1e12,
      (token) => token !== good,
    );
    const v = cachedVerifier(inner);
    expect((await v.verify(good)).subject).toBe(good);
    for (const token of forged) {
      expect(v.peek(token)).toBeUndefined();
      await expect(v.verify(token)).rejects.toThrow(OAuthError);
    }
    expect(inner.seen).toEqual([good, ...forged]);
    // The valid token is still served from the cache after the forgeries were refused.
    expect(v.peek(good)?.subject).toBe(good);
    expect((await v.verify(good)).subject).toBe(good);
    expect(inner.seen).toHaveLength(1 + forged.length);
  });

  it("two valid tokens with the same ending are both answered for themselves", async () => {
    const first = `${"A".repeat(40)}${"t".repeat(40)}`;
    const second = `${"B".repeat(40)}${"t".repeat(40)}`;
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner);
    expect((await v.verify(first)).subject).toBe(first);
    expect((await v.verify(second)).subject).toBe(second);
    expect(v.peek(first)?.subject ?? (await v.verify(first)).subject).toBe(first);
    expect(v.peek(second)?.subject ?? (await v.verify(second)).subject).toBe(second);
  });

  it("rule: a token that no request could carry (not an RFC 6750 b64token) is verified, never remembered", async () => {
    const inner = countingVerifier(() => 1e12);
    const v = cachedVerifier(inner);
    for (const token of ["has space", "a,b", "", "=abc", "ab=c"]) {
      expect((await v.verify(token)).subject).toBe(token);
      expect(v.peek(token)).toBeUndefined();
    }
    expect(v.size).toBe(0);
  });

  it("refuses bad options", () => {
    expect(() => cachedVerifier({} as never)).toThrow(GatehouseTypeError);
    expect(() =>
      cachedVerifier(
        countingVerifier(() => 1),
        { maxEntries: 0 },
      ),
    ).toThrow(GatehouseTypeError);
    expect(() =>
      cachedVerifier(
        countingVerifier(() => 1),
        { maxTtlSeconds: 0 },
      ),
    ).toThrow(GatehouseTypeError);
  });
});
