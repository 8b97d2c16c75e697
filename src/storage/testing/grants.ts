/**
 * Contract: what a grant keeps from its code (redirect_uri presence, approving session), lifetimes
 * chosen per code at redemption, and step-up requests on a grant.
 */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type { AuthorizationCodeRecord, GrantRecord, IssuedTokens } from "../contract.js";
import { accessView, writesNoAccessRows } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { code, DAY, HOUR, id, interaction, issueGrant, MINUTE, secret, T0, tokens } from "./fixtures.js";

const pass = () => undefined;

/** Tokens whose lifetimes follow the code, as the refresh policy does (offline_access or not). */
function lifetimesFor(now: number, record: AuthorizationCodeRecord): IssuedTokens {
  const offline = record.scopes.includes("offline_access");
  const base = tokens(now);
  return {
    ...base,
    refreshToken: { ...base.refreshToken!, expiresAt: now + (offline ? 30 * DAY : DAY) },
    grantExpiresAt: now + (offline ? 90 * DAY : 7 * DAY),
  };
}

export function grantContract(ctx: StoreContext): void {
  describe("code and grant fields", () => {
    for (const redirectUriSent of [false, true]) {
      it(`a code keeps redirectUriSent=${redirectUriSent} and its sessionHash; the grant gets the sessionHash`, async () => {
        const store = ctx.store();
        const record = code({ redirectUriSent, sessionHash: secret().hash });
        await store.insertAuthorizationCode(record);
        let seen: AuthorizationCodeRecord | undefined;
        const result = await store.redeemAuthorizationCode(
          record.codeHash,
          T0 + 1,
          (c) => {
            seen = c;
            return undefined;
          },
          tokens(T0 + 1),
        );
        expect(seen).toStrictEqual(record);
        expect(result.status).toBe("issued");
        if (result.status !== "issued") return;
        expect(result.code).toStrictEqual({ ...record, consumedAt: T0 + 1 });
        expect(result.grant.sessionHash).toBe(record.sessionHash);
        expect((await store.getGrant(record.grantId))?.sessionHash).toBe(record.sessionHash);
        expect((await store.listGrants({ clientId: record.clientId }))[0]?.sessionHash).toBe(
          record.sessionHash,
        );
      });
    }

    it("a code without a session gives a grant without sessionHash (no empty value)", async () => {
      const store = ctx.store();
      const { grantId } = await issueGrant(store);
      const grant = await store.getGrant(grantId);
      expect(grant).toBeDefined();
      expect(Object.keys(grant!)).not.toContain("sessionHash");
      expect(Object.keys(grant!)).not.toContain("stepUpRequestedAt");
    });

    it("an interaction keeps redirectUriSent, false and true", async () => {
      const store = ctx.store();
      const without = interaction({ redirectUriSent: false });
      const withUri = interaction({ redirectUriSent: true });
      await store.createInteraction(without);
      await store.createInteraction(withUri);
      expect((await store.getInteraction(without.id, T0))?.redirectUriSent).toBe(false);
      expect((await store.getInteraction(withUri.id, T0))?.redirectUriSent).toBe(true);
      expect(await store.consumeInteraction(without.id, T0)).toStrictEqual(without);
    });

    it("createGrantWithAccessToken stores sessionHash and stepUpRequestedAt as given", async () => {
      const store = ctx.store();
      const grant: GrantRecord = {
        grantId: id("grant"),
        clientId: id("client"),
        scopes: ["mcp:read"],
        resource: "https://mcp.example/mcp",
        createdAt: T0,
        expiresAt: T0 + HOUR,
        sessionHash: secret().hash,
        stepUpRequestedAt: T0 + 7,
      };
      await store.createGrantWithAccessToken(grant, { jti: id("jti"), createdAt: T0, expiresAt: T0 + HOUR });
      expect(await store.getGrant(grant.grantId)).toStrictEqual(grant);
    });
  });

  describe("tokens as a function of the code", () => {
    it("is called once, after check, with the code; the lifetimes it returns are what gets stored", async () => {
      const store = ctx.store();
      const offline = code({ scopes: ["mcp:read", "offline_access"] });
      const online = code({ scopes: ["mcp:read"] });
      for (const record of [offline, online]) {
        await store.insertAuthorizationCode(record);
        const calls: string[] = [];
        let received: AuthorizationCodeRecord | undefined;
        let written: IssuedTokens | undefined;
        const result = await store.redeemAuthorizationCode(
          record.codeHash,
          T0 + 2,
          () => {
            calls.push("check");
            return undefined;
          },
          (c) => {
            calls.push("tokens");
            received = c;
            written = lifetimesFor(T0 + 2, c);
            return written;
          },
        );
        expect(calls).toEqual(["check", "tokens"]);
        expect(received).toStrictEqual(record);
        expect(result.status === "issued" && result.refreshIssued).toBe(true);
        const grantExpiresAt = T0 + 2 + (record === offline ? 90 * DAY : 7 * DAY);
        expect(written?.grantExpiresAt).toBe(grantExpiresAt);
        expect(result.status === "issued" && result.grant.expiresAt).toBe(grantExpiresAt);
        expect((await store.getGrant(record.grantId))?.expiresAt).toBe(grantExpiresAt);
        expect((await store.getRefreshToken(written!.refreshToken!.tokenHash))?.expiresAt).toBe(
          T0 + 2 + (record === offline ? 30 * DAY : DAY),
        );
        expect((await store.getAccessToken(written!.accessToken.jti))?.expiresAt).toBe(
          writesNoAccessRows(store) ? undefined : T0 + 2 + HOUR,
        );
      }
    });

    it("is not called when check refuses, nor for a replayed, expired or unknown code", async () => {
      const store = ctx.store();
      const never = () => {
        throw new Error("tokens must not be resolved");
      };
      const refused = code();
      await store.insertAuthorizationCode(refused);
      const error = new OAuthError("invalid_grant", { description: "redirect_uri does not match" });
      expect(await store.redeemAuthorizationCode(refused.codeHash, T0, () => error, never)).toEqual({
        status: "refused",
        error,
      });
      // The refusal consumed the code, as with fixed tokens.
      expect((await store.redeemAuthorizationCode(refused.codeHash, T0 + 1, pass, never)).status).toBe(
        "replayed",
      );
      const expired = code({ expiresAt: T0 + MINUTE });
      await store.insertAuthorizationCode(expired);
      expect((await store.redeemAuthorizationCode(expired.codeHash, T0 + MINUTE, pass, never)).status).toBe(
        "expired",
      );
      expect((await store.redeemAuthorizationCode(secret().hash, T0, pass, never)).status).toBe("not_found");
      expect(await store.getGrant(refused.grantId)).toBeUndefined();
    });

    it("a tokens function that throws rolls the redemption back: the code is not consumed", async () => {
      const store = ctx.store();
      const record = code();
      await store.insertAuthorizationCode(record);
      await expect(
        store.redeemAuthorizationCode(record.codeHash, T0, pass, () => {
          throw new Error("policy crashed");
        }),
      ).rejects.toThrow("policy crashed");
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      const issued = tokens(T0 + 1);
      const result = await store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, () => issued);
      expect(result.status).toBe("issued");
      expect((await accessView(store, issued.accessToken.jti, record.grantId))?.grantId).toBe(record.grantId);
    });
  });

  describe("listGrants filters", () => {
    it("by user, client, resource, session and active, oldest first", async () => {
      const store = ctx.store();
      const userId = id("user");
      const clientId = id("client");
      const sessionHash = secret().hash;
      const base = { userId, clientId, sessionHash };
      const a = await issueGrant(store, T0, { ...base, resource: "https://a.example/mcp" });
      const b = await issueGrant(store, T0 + 1, { ...base, resource: "https://a.example/mcp" });
      await issueGrant(store, T0 + 2, { ...base, resource: "https://b.example/mcp" });
      await issueGrant(store, T0 + 3, {
        ...base,
        resource: "https://a.example/mcp",
        sessionHash: secret().hash,
      });
      await issueGrant(store, T0 + 4, {
        userId,
        clientId: id("client"),
        resource: "https://a.example/mcp",
        sessionHash,
      });
      await store.revokeGrant(a.grantId, T0 + 5);
      const narrow = { userId, clientId, resource: "https://a.example/mcp", sessionHash };
      expect((await store.listGrants(narrow)).map((g) => g.grantId)).toEqual([a.grantId, b.grantId]);
      expect((await store.listGrants({ ...narrow, active: true })).map((g) => g.grantId)).toEqual([
        b.grantId,
      ]);
      expect(await store.listGrants({ userId, clientId })).toHaveLength(4);
      expect(await store.listGrants({ userId })).toHaveLength(5);
    });

    it("listSupersedeCandidates: the same rows as the narrow active listGrants, with the decision's fields", async (test) => {
      const store = ctx.store();
      // Optional in the contract (the authorization server falls back to listGrants): a store
      // without it is reported as skipped here, never as passed.
      if (!store.listSupersedeCandidates) return test.skip();
      const listSupersedeCandidates = store.listSupersedeCandidates.bind(store);
      const userId = id("user");
      const clientId = id("client");
      const sessionHash = secret().hash;
      const resource = "https://a.example/mcp";
      const key = { userId, clientId, resource, sessionHash };
      expect(await listSupersedeCandidates(key)).toEqual([]);
      const revoked = await issueGrant(store, T0, { ...key, scopes: ["notes:read"] });
      // Two at the same moment: creation time, then id.
      const tiedA = await issueGrant(store, T0 + 1, { ...key, scopes: ["notes:read", "notes:write"] });
      const tiedB = await issueGrant(store, T0 + 1, { ...key, scopes: ["notes:write"] });
      const later = await issueGrant(store, T0 + 2, { ...key, scopes: ["notes:read"] });
      // What tells instances apart (superseded-grants.ts): a DPoP key and a step-up mark.
      const bound = await issueGrant(store, T0 + 2, key, { grantDpopJkt: "jkt-of-one-instance" });
      expect(await store.requestStepUp(bound.issued.accessToken.jti, T0 + 3)).toBe(true);
      // Each differs from the key in one field: none is a candidate.
      await issueGrant(store, T0 + 3, { ...key, userId: id("user") });
      await issueGrant(store, T0 + 3, { ...key, clientId: id("client") });
      await issueGrant(store, T0 + 3, { ...key, resource: "https://b.example/mcp" });
      await issueGrant(store, T0 + 3, { ...key, sessionHash: secret().hash });
      await store.revokeGrant(revoked.grantId, T0 + 4);

      const candidates = await listSupersedeCandidates(key);
      const full = await store.listGrants({ ...key, active: true });
      const tied = [tiedA, tiedB].sort((x, y) => (x.grantId < y.grantId ? -1 : 1));
      const lastTwo = [later, bound].sort((x, y) => (x.grantId < y.grantId ? -1 : 1));
      expect(candidates.map((c) => c.grantId)).toEqual([
        tied[0]?.grantId,
        tied[1]?.grantId,
        lastTwo[0]?.grantId,
        lastTwo[1]?.grantId,
      ]);
      expect(candidates).toEqual(
        full.map((g) => ({
          grantId: g.grantId,
          scopes: g.scopes,
          resource: g.resource,
          sessionHash: g.sessionHash,
          createdAt: g.createdAt,
          ...(g.dpopJkt !== undefined && { dpopJkt: g.dpopJkt }),
          ...(g.stepUpRequestedAt !== undefined && { stepUpRequestedAt: g.stepUpRequestedAt }),
        })),
      );
      expect(candidates.find((c) => c.grantId === bound.grantId)).toMatchObject({
        dpopJkt: "jkt-of-one-instance",
        stepUpRequestedAt: T0 + 3,
      });
      expect(candidates.find((c) => c.grantId === later.grantId)).not.toHaveProperty("dpopJkt");
      expect(candidates.find((c) => c.grantId === later.grantId)).not.toHaveProperty("stepUpRequestedAt");
      expect(candidates.find((c) => c.grantId === tiedA.grantId)?.scopes).toEqual([
        "notes:read",
        "notes:write",
      ]);
      expect(candidates.find((c) => c.grantId === later.grantId)?.createdAt).toBe(T0 + 2);
    });
  });

  describe("requestStepUp", () => {
    it("sets stepUpRequestedAt on the grant of the access token (the latest request wins), no other grant", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const other = await issueGrant(store);
      expect(await store.requestStepUp(issued.accessToken.jti, T0 + 5)).toBe(true);
      expect((await store.getGrant(grantId))?.stepUpRequestedAt).toBe(T0 + 5);
      expect(await store.requestStepUp(issued.accessToken.jti, T0 + 9)).toBe(true);
      expect((await store.getGrant(grantId))?.stepUpRequestedAt).toBe(T0 + 9);
      expect((await store.getGrant(grantId))?.revokedAt).toBeUndefined();
      expect((await store.getGrant(other.grantId))?.stepUpRequestedAt).toBeUndefined();
      expect((await store.listGrants()).find((g) => g.grantId === grantId)?.stepUpRequestedAt).toBe(T0 + 9);
    });

    it("false for an unknown jti, and for a grant id or refresh token hash passed as one", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      expect(await store.requestStepUp(id("jti"), T0)).toBe(false);
      expect(await store.requestStepUp(grantId, T0)).toBe(false);
      expect(await store.requestStepUp(issued.refreshToken!.tokenHash, T0)).toBe(false);
      expect((await store.getGrant(grantId))?.stepUpRequestedAt).toBeUndefined();
    });

    it("false for a revoked grant, which keeps its earlier request time", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      expect(await store.requestStepUp(issued.accessToken.jti, T0 + 1)).toBe(true);
      expect(await store.revokeGrant(grantId, T0 + 2)).toBe(true);
      expect(await store.requestStepUp(issued.accessToken.jti, T0 + 3)).toBe(false);
      expect((await store.getGrant(grantId))?.stepUpRequestedAt).toBe(T0 + 1);
    });

    it("works through the access token a rotation issued", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const next = tokens(T0 + 1, { grantId });
      const rotated = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 1,
        () => ({}),
        next,
      );
      expect(rotated.status).toBe("issued");
      expect(await store.requestStepUp(next.accessToken.jti, T0 + 2)).toBe(true);
      expect((await store.getGrant(grantId))?.stepUpRequestedAt).toBe(T0 + 2);
    });

    it("rotateRefreshToken's tokens may be a function of the live token and its grant, called once after check", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const next = tokens(T0 + 1);
      const calls: string[] = [];
      const refused = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 1,
        () => ({ error: new OAuthError("invalid_scope", { description: "no" }) }),
        () => {
          calls.push("refused");
          return next;
        },
      );
      expect(refused.status).toBe("refused");
      const rotated = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 1,
        () => {
          calls.push("check");
          return {};
        },
        (token, grant) => {
          calls.push(
            `tokens ${token.tokenHash === issued.refreshToken!.tokenHash} ${grant.grantId === grantId}`,
          );
          return { ...next, refreshToken: { ...next.refreshToken!, expiresAt: T0 + 1 + HOUR } };
        },
      );
      expect(rotated.status).toBe("issued");
      expect(calls).toEqual(["check", "tokens true true"]);
      expect((await store.getRefreshToken(next.refreshToken!.tokenHash))?.expiresAt).toBe(T0 + 1 + HOUR);
    });

    it("rotateRefreshToken's check receives the grant with stepUpRequestedAt and sessionHash", async () => {
      const store = ctx.store();
      const sessionHash = secret().hash;
      const { issued, grantId } = await issueGrant(store, T0, { sessionHash });
      const refreshHash = issued.refreshToken!.tokenHash;
      let seen: GrantRecord | undefined;
      const check = (_token: unknown, grant: GrantRecord) => {
        seen = grant;
        return {};
      };
      // Before any request the grant carries none.
      const first = tokens(T0 + 1, { refresh: false });
      expect((await store.rotateRefreshToken(refreshHash, T0 + 1, check, first)).status).toBe("issued");
      expect(seen?.grantId).toBe(grantId);
      expect(seen?.stepUpRequestedAt).toBeUndefined();
      expect(seen?.sessionHash).toBe(sessionHash);
      expect(await store.requestStepUp(issued.accessToken.jti, T0 + 2)).toBe(true);
      const refusal = new OAuthError("invalid_scope", {
        description: "step-up requires a new authorization",
      });
      const refused = await store.rotateRefreshToken(
        refreshHash,
        T0 + 3,
        (_token, grant) => {
          seen = grant;
          return grant.stepUpRequestedAt === undefined ? {} : { error: refusal };
        },
        tokens(T0 + 3),
      );
      expect(refused).toEqual({ status: "refused", error: refusal });
      expect(seen?.stepUpRequestedAt).toBe(T0 + 2);
      expect(seen?.sessionHash).toBe(sessionHash);
      const next = tokens(T0 + 4);
      const issuedAgain = await store.rotateRefreshToken(refreshHash, T0 + 4, check, next);
      expect(issuedAgain.status === "issued" && issuedAgain.grant.stepUpRequestedAt).toBe(T0 + 2);
    });
  });
}
