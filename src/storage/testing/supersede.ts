/**
 * Contract: a code redemption that retires the grants its new one supersedes in its own
 * transaction (`redeemAuthorizationCode`'s optional `supersedes`). Optional: a store that leaves
 * `superseded` absent is reported as skipped here, never as passed (the authorization server then
 * retires them after the commit).
 */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type {
  AuthorizationCodeRecord,
  AuthorizationStore,
  GrantRecord,
  SupersedeCandidate,
  SupersedeDecision,
} from "../contract.js";
import { accessView } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { code, id, issueDeviceGrant, issueGrant, MINUTE, secret, T0, tokens } from "./fixtures.js";

const pass = () => undefined;
const every: SupersedeDecision = (_grant, candidates) => candidates.map((c) => c.grantId);
const none: SupersedeDecision = () => [];

function signInKey() {
  return {
    userId: id("user"),
    clientId: id("client"),
    resource: "https://mcp.example/mcp",
    sessionHash: secret().hash,
  };
}

/** Inserts a code of `key` made at `now` and redeems it with `supersedes`. */
async function redeemWith(
  store: AuthorizationStore,
  now: number,
  overrides: Partial<AuthorizationCodeRecord>,
  supersedes: SupersedeDecision,
) {
  const record = code({ createdAt: now, expiresAt: now + MINUTE, ...overrides });
  await store.insertAuthorizationCode(record);
  const issued = tokens(now);
  const result = await store.redeemAuthorizationCode(record.codeHash, now, pass, issued, supersedes);
  return { record, issued, result };
}

/** Whether the store retires in the redemption; a test of a store that does not is skipped. */
async function retiresInRedemption(store: AuthorizationStore): Promise<boolean> {
  const { result } = await redeemWith(store, T0, { sessionHash: secret().hash }, none);
  return result.status === "issued" && result.superseded !== undefined;
}

async function isActive(store: AuthorizationStore, grantId: string): Promise<boolean> {
  return (await store.getGrant(grantId))?.revokedAt === undefined;
}

export function supersedeContract(ctx: StoreContext): void {
  describe("superseded grants retired by the code redemption", () => {
    it("offers only the sign-in's active, earlier grants and revokes those picked, with their tokens", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      const picked = await issueGrant(store, T0 + 1, { ...key, scopes: ["notes:read"] });
      const spared = await issueGrant(store, T0 + 2, { ...key, scopes: ["notes:admin"] });
      const revoked = await issueGrant(store, T0 + 3, key);
      await store.revokeGrant(revoked.grantId, T0 + 4);
      // Each differs from the key in one field: never offered.
      const others = [
        await issueGrant(store, T0 + 5, { ...key, userId: id("user") }),
        await issueGrant(store, T0 + 5, { ...key, clientId: id("client") }),
        await issueGrant(store, T0 + 5, { ...key, resource: "https://other.example/mcp" }),
        await issueGrant(store, T0 + 5, { ...key, sessionHash: secret().hash }),
      ];
      const offered: [GrantRecord, SupersedeCandidate][] = [];
      let calls = 0;
      const { record, result } = await redeemWith(store, T0 + 10, key, (grant, candidates) => {
        calls++;
        for (const candidate of candidates) offered.push([grant, candidate]);
        // An id that is not a candidate is ignored.
        return [picked.grantId, others[0]!.grantId, grant.grantId, "not-a-candidate"];
      });
      expect(result.status).toBe("issued");
      if (result.status !== "issued") return;
      // All at once, oldest first.
      expect(calls).toBe(1);
      expect(offered.map(([, c]) => c.grantId)).toEqual([picked.grantId, spared.grantId]);
      for (const [grant] of offered) expect(grant).toEqual(result.grant);
      expect(offered.find(([, c]) => c.grantId === spared.grantId)?.[1]).toEqual({
        grantId: spared.grantId,
        scopes: ["notes:admin"],
        resource: key.resource,
        sessionHash: key.sessionHash,
        createdAt: T0 + 2,
      });
      expect(result.superseded).toEqual([picked.grantId]);
      // Revoked when the redemption returns, as revokeGrant would: the grant and its tokens.
      expect((await store.getGrant(picked.grantId))?.revokedAt).toBe(T0 + 10);
      expect((await store.getRefreshToken(picked.issued.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 10);
      expect((await accessView(store, picked.issued.accessToken.jti, picked.grantId))?.revokedAt).toBe(
        T0 + 10,
      );
      expect((await store.getGrant(revoked.grantId))?.revokedAt).toBe(T0 + 4);
      for (const kept of [spared, ...others]) expect(await isActive(store, kept.grantId)).toBe(true);
      expect(await isActive(store, record.grantId)).toBe(true);
    });

    it("the decision sees each candidate's DPoP key and step-up mark, and the new grant's DPoP key", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      const marked = await issueGrant(store, T0 + 1, key);
      expect(await store.requestStepUp(marked.issued.accessToken.jti, T0 + 2)).toBe(true);
      const bound = await issueGrant(store, T0 + 3, key, { grantDpopJkt: "jkt-a" });
      const record = code({ ...key, createdAt: T0 + 10, expiresAt: T0 + 10 + MINUTE });
      await store.insertAuthorizationCode(record);
      let seen: { grant: GrantRecord; candidates: SupersedeCandidate[] } | undefined;
      const result = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + 10,
        pass,
        { ...tokens(T0 + 10), grantDpopJkt: "jkt-b" },
        (grant, candidates) => {
          seen = { grant, candidates: [...candidates] };
          return [];
        },
      );
      expect(result).toMatchObject({ status: "issued", superseded: [] });
      expect(seen?.grant.dpopJkt).toBe("jkt-b");
      expect(seen?.candidates.find((c) => c.grantId === marked.grantId)?.stepUpRequestedAt).toBe(T0 + 2);
      expect(seen?.candidates.find((c) => c.grantId === marked.grantId)).not.toHaveProperty("dpopJkt");
      expect(seen?.candidates.find((c) => c.grantId === bound.grantId)?.dpopJkt).toBe("jkt-a");
      expect(seen?.candidates.find((c) => c.grantId === bound.grantId)).not.toHaveProperty(
        "stepUpRequestedAt",
      );
    });

    it("a grant a device poll issued in the same sign-in is offered and retired like a code's", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      const { device, issued: deviceTokens } = await issueDeviceGrant(store, key);
      const offered: string[] = [];
      const { result } = await redeemWith(store, T0 + 10, key, (_grant, candidates) => {
        offered.push(...candidates.map((c) => c.grantId));
        return candidates.map((c) => c.grantId);
      });
      expect(offered).toEqual([device.grantId]);
      expect(result).toMatchObject({ status: "issued", superseded: [device.grantId] });
      expect(await isActive(store, device.grantId)).toBe(false);
      expect((await store.getRefreshToken(deviceTokens.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 10);
    });

    it("a decision that throws: the code is redeemed, nothing is retired, superseded is absent", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      const older = await issueGrant(store, T0 + 1, key);
      const { record, result } = await redeemWith(store, T0 + 10, key, (_grant, candidates) => {
        if (candidates.some((c) => c.grantId === older.grantId)) throw new Error("decision failed");
        return candidates.map((c) => c.grantId);
      });
      expect(result.status).toBe("issued");
      if (result.status !== "issued") return;
      expect(result.superseded).toBeUndefined();
      expect(await isActive(store, older.grantId)).toBe(true);
      expect(await isActive(store, record.grantId)).toBe(true);
      expect((await store.getRefreshToken(older.issued.refreshToken!.tokenHash))?.revokedAt).toBeUndefined();
      // The code is consumed all the same: a second attempt is a replay.
      const again = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + 11,
        pass,
        tokens(T0 + 11),
        every,
      );
      expect(again.status).toBe("replayed");
    });

    it("asks nothing for a grant without a session, nor for a refused, replayed or expired code", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      await issueGrant(store, T0 + 1, key);
      let asked = 0;
      const counting: SupersedeDecision = (_grant, candidates) => {
        asked++;
        return candidates.map((c) => c.grantId);
      };
      const { sessionHash: _none, ...sessionless } = key;
      const plain = await redeemWith(store, T0 + 10, sessionless, counting);
      expect(plain.result.status === "issued" && plain.result.superseded).toEqual([]);
      const refusedCode = code({ ...key, createdAt: T0 + 10, expiresAt: T0 + 10 + MINUTE });
      await store.insertAuthorizationCode(refusedCode);
      const refusal = await store.redeemAuthorizationCode(
        refusedCode.codeHash,
        T0 + 10,
        () => new OAuthError("invalid_grant", { description: "PKCE verification failed" }),
        tokens(T0 + 10),
        counting,
      );
      expect(refusal.status).toBe("refused");
      const replay = await store.redeemAuthorizationCode(
        plain.record.codeHash,
        T0 + 11,
        pass,
        tokens(T0 + 11),
        counting,
      );
      expect(replay.status).toBe("replayed");
      const stale = code({ ...key, createdAt: T0, expiresAt: T0 + MINUTE });
      await store.insertAuthorizationCode(stale);
      const late = await store.redeemAuthorizationCode(
        stale.codeHash,
        T0 + 2 * MINUTE,
        pass,
        tokens(T0),
        counting,
      );
      expect(late.status).toBe("expired");
      expect(asked).toBe(0);
    });

    it("two redemptions of one sign-in in flight together: exactly one of the two grants stays active", async (test) => {
      const store = ctx.store();
      if (!(await retiresInRedemption(store))) return test.skip();
      const key = signInKey();
      const records = [0, 1].map(() => code({ ...key, createdAt: T0, expiresAt: T0 + MINUTE }));
      for (const record of records) await store.insertAuthorizationCode(record);
      // Through two instances of the store where the backend has them (two servers, one database).
      const instances = await ctx.peers(2);
      const results = await Promise.all(
        records.map((record, i) =>
          instances[i]!.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1), every),
        ),
      );
      expect(results.map((r) => r.status)).toEqual(["issued", "issued"]);
      const active: string[] = [];
      for (const record of records) if (await isActive(store, record.grantId)) active.push(record.grantId);
      expect(active).toHaveLength(1);
      const retired = results.flatMap((r) => (r.status === "issued" ? (r.superseded ?? []) : []));
      expect(retired).toEqual(records.map((r) => r.grantId).filter((g) => g !== active[0]));
    });
  });
}
