/**
 * Contract: upstream token sets (contract.ts `UpstreamTokenSetRecord`). A session's set is copied
 * only to a live grant approved in that session for the same user; a grant's set dies with the
 * grant's revocation (however it is revoked) and a session's with its logout; replacements are a
 * compare-and-swap on the version, so exactly one of concurrent refreshes across instances wins.
 */

import { describe, expect, it } from "vitest";
import type { UpstreamTokenSetRecord } from "../contract.js";
import type { StoreContext } from "./context.js";
import { HOUR, id, issueGrant, MINUTE, secret, T0, tally } from "./fixtures.js";

function tokenSet(userId: string, overrides: Partial<UpstreamTokenSetRecord> = {}): UpstreamTokenSetRecord {
  return {
    providerId: "github",
    userId,
    sealed: JSON.stringify({ enc: "A256GCM", kek: "k", iv: id("iv"), ct: id("ct") }),
    version: 1,
    createdAt: T0,
    updatedAt: T0,
    expiresAt: T0 + HOUR,
    ...overrides,
  };
}

export function upstreamTokenContract(ctx: StoreContext): void {
  describe("upstream token sets", () => {
    it("a session's set is copied to a grant of that session and user, then read by grant and provider", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      const set = tokenSet(userId);
      await store.keepSessionUpstreamTokens(sessionHash, set);
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId, { providerId: "corp" }));
      const { grantId } = await issueGrant(store, T0 + MINUTE, { userId, sessionHash });
      expect(await store.getUpstreamTokens(grantId, "github")).toBeUndefined();
      expect(await store.bindUpstreamTokens(sessionHash, grantId, T0 + MINUTE)).toBe(2);
      expect(await store.getUpstreamTokens(grantId, "github")).toEqual({
        providerId: "github",
        userId,
        sealed: set.sealed,
        version: 1,
        createdAt: T0 + MINUTE,
        updatedAt: T0 + MINUTE,
      });
      expect((await store.getUpstreamTokens(grantId, "corp"))?.userId).toBe(userId);
      expect(await store.getUpstreamTokens(grantId, "gitlab")).toBeUndefined();
      // A second bind keeps what the grant holds.
      expect(await store.bindUpstreamTokens(sessionHash, grantId, T0 + 2 * MINUTE)).toBe(0);
    });

    it("nothing is copied to a grant of another session, another user, a revoked grant, or from an expired set", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const otherSession = await issueGrant(store, T0, { userId, sessionHash: secret().hash });
      expect(await store.bindUpstreamTokens(sessionHash, otherSession.grantId, T0)).toBe(0);
      const otherUser = await issueGrant(store, T0, { userId: id("user"), sessionHash });
      expect(await store.bindUpstreamTokens(sessionHash, otherUser.grantId, T0)).toBe(0);
      const revoked = await issueGrant(store, T0, { userId, sessionHash });
      await store.revokeGrant(revoked.grantId, T0);
      expect(await store.bindUpstreamTokens(sessionHash, revoked.grantId, T0)).toBe(0);
      expect(await store.bindUpstreamTokens(sessionHash, id("grant"), T0)).toBe(0);
      const late = await issueGrant(store, T0, { userId, sessionHash });
      expect(await store.bindUpstreamTokens(sessionHash, late.grantId, T0 + HOUR)).toBe(0);
      for (const g of [otherSession, otherUser, revoked, late]) {
        expect(await store.getUpstreamTokens(g.grantId, "github")).toBeUndefined();
      }
    });

    it("revoking the grant deletes its set; a replayed code's grant loses it too", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const kept = await issueGrant(store, T0, { userId, sessionHash });
      const revoked = await issueGrant(store, T0, { userId, sessionHash });
      const replayed = await issueGrant(store, T0, { userId, sessionHash });
      for (const g of [kept, revoked, replayed]) await store.bindUpstreamTokens(sessionHash, g.grantId, T0);
      expect(await store.revokeGrant(revoked.grantId, T0 + 1)).toBe(true);
      expect(await store.getUpstreamTokens(revoked.grantId, "github")).toBeUndefined();
      const replay = await store.redeemAuthorizationCode(replayed.code.codeHash, T0 + 2, () => undefined, {
        accessToken: { jti: id("jti"), createdAt: T0, expiresAt: T0 + HOUR },
        grantExpiresAt: T0 + HOUR,
      });
      expect(replay.status).toBe("replayed");
      expect(await store.getUpstreamTokens(replayed.grantId, "github")).toBeUndefined();
      expect(await store.getUpstreamTokens(kept.grantId, "github")).toBeDefined();
    });

    it("a logout deletes the session's set but not the grant's copy", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.createSession({ idHash: sessionHash, userId, createdAt: T0, expiresAt: T0 + HOUR });
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const first = await issueGrant(store, T0, { userId, sessionHash });
      await store.bindUpstreamTokens(sessionHash, first.grantId, T0);
      await store.deleteSession(sessionHash);
      const second = await issueGrant(store, T0, { userId, sessionHash });
      expect(await store.bindUpstreamTokens(sessionHash, second.grantId, T0)).toBe(0);
      expect(await store.getUpstreamTokens(first.grantId, "github")).toBeDefined();
    });

    it("keeping a session's set again replaces it", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const newer = tokenSet(userId, { sealed: "newer" });
      await store.keepSessionUpstreamTokens(sessionHash, newer);
      const { grantId } = await issueGrant(store, T0, { userId, sessionHash });
      await store.bindUpstreamTokens(sessionHash, grantId, T0);
      expect((await store.getUpstreamTokens(grantId, "github"))?.sealed).toBe("newer");
    });

    it("a replacement is a compare-and-swap on the version; one of concurrent ones wins", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const { grantId } = await issueGrant(store, T0, { userId, sessionHash });
      await store.bindUpstreamTokens(sessionHash, grantId, T0);
      const peers = [store, ...(await ctx.peers(3))];
      const results = await Promise.all(
        peers.map((peer, i) =>
          peer.replaceUpstreamTokens(grantId, "github", 1, { sealed: `next-${i}`, updatedAt: T0 + 5 }),
        ),
      );
      expect(tally(results.map((won) => ({ status: String(won) })))).toEqual({ true: 1, false: 3 });
      const after = await store.getUpstreamTokens(grantId, "github");
      expect(after?.version).toBe(2);
      expect(after?.updatedAt).toBe(T0 + 5);
      expect(after?.sealed).toBe(`next-${results.indexOf(true)}`);
      expect(await store.replaceUpstreamTokens(grantId, "gitlab", 1, { sealed: "x", updatedAt: T0 })).toBe(
        false,
      );
    });

    it("deleting a set answers whether there was one", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const userId = id("user");
      await store.keepSessionUpstreamTokens(sessionHash, tokenSet(userId));
      const { grantId } = await issueGrant(store, T0, { userId, sessionHash });
      await store.bindUpstreamTokens(sessionHash, grantId, T0);
      expect(await store.deleteUpstreamTokens(grantId, "github")).toBe(true);
      expect(await store.deleteUpstreamTokens(grantId, "github")).toBe(false);
      expect(await store.getUpstreamTokens(grantId, "github")).toBeUndefined();
    });

    it("purging removes expired session sets and the sets of purged grants, and keeps live ones", async () => {
      const store = ctx.store();
      const userId = id("user");
      const expiring = secret().hash;
      const live = secret().hash;
      await store.keepSessionUpstreamTokens(expiring, tokenSet(userId, { expiresAt: T0 + MINUTE }));
      await store.keepSessionUpstreamTokens(live, tokenSet(userId, { expiresAt: T0 + 365 * 24 * HOUR }));
      const liveGrant = await issueGrant(store, T0 + 200 * 24 * HOUR, { userId, sessionHash: live });
      const oldGrant = await issueGrant(store, T0, { userId, sessionHash: live });
      await store.bindUpstreamTokens(live, oldGrant.grantId, T0);
      // The old grant lives 90 days (fixtures.tokens); purge after that.
      await store.purgeExpired(T0 + 100 * 24 * HOUR);
      expect(await store.getUpstreamTokens(oldGrant.grantId, "github")).toBeUndefined();
      const afterExpiring = await issueGrant(store, T0 + 200 * 24 * HOUR, { userId, sessionHash: expiring });
      expect(await store.bindUpstreamTokens(expiring, afterExpiring.grantId, T0)).toBe(0);
      expect(await store.bindUpstreamTokens(live, liveGrant.grantId, T0 + 200 * 24 * HOUR)).toBe(1);
    });
  });
}
