/**
 * revocation.ts in isolation: which introspection failures count as a revocation of a user's
 * access (an inactive answer before the token's exp) and which do not (an expiry, an unavailable
 * endpoint, a token never seen active), and what the shared store's state says about a child.
 */
import { describe, expect, it } from "vitest";
import { accessState, type RevocationStore, watchIntrospection } from "../../src/gateway/revocation.js";
import type { AuthInfo } from "../../src/resource-server/types.js";
import { OAuthError } from "../../src/shared/errors.js";

const NOW = 1_800_000_000_000;
const auth = (subject: string, expiresAt: number): AuthInfo => ({
  subject,
  clientId: "app",
  scopes: ["mcp:use"],
  audience: ["https://mcp.example.com/mcp"],
  expiresAt,
  issuer: "https://as.example.com",
});

function scripted(answers: Record<string, AuthInfo | OAuthError>) {
  return {
    async verify(token: string) {
      const answer = answers[token];
      if (answer instanceof OAuthError) throw answer;
      if (answer === undefined) throw new OAuthError("invalid_token", { description: "unknown" });
      return answer;
    },
  };
}

describe("watchIntrospection", () => {
  it("inactive before exp, for a token seen active: the user's access is gone (once)", async () => {
    const answers: Record<string, AuthInfo | OAuthError> = { t1: auth("alice", NOW / 1000 + 3600) };
    const revoked: string[] = [];
    const watched = watchIntrospection(
      scripted(answers),
      (s) => revoked.push(s),
      () => NOW,
    );
    await watched.verify("t1");
    answers.t1 = new OAuthError("invalid_token", { description: "inactive" });
    await expect(watched.verify("t1")).rejects.toThrow();
    await expect(watched.verify("t1")).rejects.toThrow();
    expect(revoked).toEqual(["alice"]);
  });

  it("not a revocation: inactive after exp (an expiry), the endpoint unavailable, a token never seen active", async () => {
    const answers: Record<string, AuthInfo | OAuthError> = {
      expiring: auth("bob", NOW / 1000 - 1),
      flaky: auth("carol", NOW / 1000 + 3600),
    };
    const revoked: string[] = [];
    const watched = watchIntrospection(
      scripted(answers),
      (s) => revoked.push(s),
      () => NOW,
    );
    await watched.verify("expiring");
    await watched.verify("flaky");
    answers.expiring = new OAuthError("invalid_token", { description: "inactive" });
    answers.flaky = new OAuthError("temporarily_unavailable", { description: "down" });
    await expect(watched.verify("expiring")).rejects.toThrow();
    await expect(watched.verify("flaky")).rejects.toThrow();
    await expect(watched.verify("made-up")).rejects.toThrow();
    expect(revoked).toEqual([]);
  });
});

describe("accessState against the shared store", () => {
  const grant = { grantId: "g1", revokedAt: undefined as number | undefined, expiresAt: NOW + 1000 };
  let version = 1;
  let kept = true;
  const store = {
    getGrant: async (id: string) => (id === grant.grantId ? { ...grant } : undefined),
    getUpstreamTokens: async () => (kept ? { version } : undefined),
    getAccessToken: async (jti: string) => (jti === "old-style" ? { grantId: "g1" } : undefined),
  } as unknown as RevocationStore;

  it("live, then rotated, deleted, revoked; an unknown grant is revoked, a token without jti unknown", async () => {
    const record = { tokenId: "g1.abc" };
    expect(await accessState(store, record, ["github"], NOW)).toBe("live");
    expect(await accessState(store, { tokenId: "old-style" }, [], NOW)).toBe("live");
    version = 2;
    expect(await accessState(store, record, ["github"], NOW)).toBe("upstream_token_rotated");
    kept = false;
    expect(await accessState(store, record, ["github"], NOW)).toBe("upstream_token_revoked");
    grant.revokedAt = NOW - 1;
    expect(await accessState(store, record, [], NOW)).toBe("revoked");
    grant.revokedAt = undefined;
    expect(await accessState(store, record, [], NOW + 1000)).toBe("revoked");
    expect(await accessState(store, { tokenId: "nope.x" }, [], NOW)).toBe("revoked");
    expect(await accessState(store, { tokenId: "unknown-old-style" }, [], NOW)).toBe("revoked");
    expect(await accessState(store, { tokenId: undefined }, [], NOW)).toBe("unknown");
  });
});
