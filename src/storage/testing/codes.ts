/** Contract: authorization codes, grants and access tokens. */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type { AuthorizationCodeRecord } from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { accessView, writesNoAccessRows } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import {
  code,
  HOUR,
  id,
  issueDeviceGrant,
  issueGrant,
  MINUTE,
  secret,
  T0,
  tally,
  tokens,
} from "./fixtures.js";

const pass = () => undefined;

export function codeContract(ctx: StoreContext): void {
  describe("authorization codes", () => {
    it("issues once: consumes the code, creates the grant, the access token and the refresh token", async () => {
      const store = ctx.store();
      const record = code();
      await store.insertAuthorizationCode(record);
      const issued = tokens(T0 + 1000);
      let seen: AuthorizationCodeRecord | undefined;
      const result = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + 1000,
        (c) => {
          seen = c;
          return undefined;
        },
        issued,
      );
      expect(seen).toEqual(record);
      expect(result.status).toBe("issued");
      if (result.status !== "issued") return;
      expect(result.code).toEqual({ ...record, consumedAt: T0 + 1000 });
      expect(result.refreshIssued).toBe(true);
      const grant = {
        grantId: record.grantId,
        clientId: record.clientId,
        userId: record.userId,
        scopes: record.scopes,
        resource: record.resource,
        createdAt: T0 + 1000,
        expiresAt: issued.grantExpiresAt,
      };
      expect(result.grant).toEqual(grant);
      expect(await store.getGrant(record.grantId)).toEqual(grant);
      expect(await store.getAccessToken(issued.accessToken.jti)).toEqual(
        writesNoAccessRows(store)
          ? undefined
          : {
              ...issued.accessToken,
              grantId: record.grantId,
              clientId: record.clientId,
              userId: record.userId,
              scopes: record.scopes,
              resource: record.resource,
            },
      );
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toEqual({
        ...issued.refreshToken,
        grantId: record.grantId,
        clientId: record.clientId,
        scopes: record.scopes,
      });
    });

    it("stores hashes only: a raw code, token or session id is never a lookup key", async () => {
      const store = ctx.store();
      const raw = secret();
      await store.insertAuthorizationCode(code({ codeHash: raw.hash }));
      expect((await store.redeemAuthorizationCode(raw.raw, T0, pass, tokens(T0))).status).toBe("not_found");
      const issued = tokens(T0);
      const result = await store.redeemAuthorizationCode(raw.hash, T0, pass, issued);
      expect(result.status).toBe("issued");
      expect(await store.getRefreshToken(issued.refreshRaw!)).toBeUndefined();
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toBeDefined();
      const sessionId = secret();
      await store.createSession({ idHash: sessionId.hash, userId: "u", createdAt: T0, expiresAt: T0 + HOUR });
      expect(await store.getSession(sessionId.raw, T0)).toBeUndefined();
      expect(await store.getSession(sessionId.hash, T0)).toBeDefined();
    });

    it("writes no refresh token when the code does not allow refresh", async () => {
      const store = ctx.store();
      const record = code({ refreshAllowed: false });
      await store.insertAuthorizationCode(record);
      const issued = tokens(T0);
      const result = await store.redeemAuthorizationCode(record.codeHash, T0, pass, issued);
      expect(result.status === "issued" && result.refreshIssued).toBe(false);
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toBeUndefined();
      expect(await accessView(store, issued.accessToken.jti, record.grantId)).toBeDefined();
    });

    it("refused by check: the code is consumed and nothing is issued", async () => {
      const store = ctx.store();
      const record = code();
      await store.insertAuthorizationCode(record);
      const error = new OAuthError("invalid_grant", { description: "PKCE verification failed" });
      const issued = tokens(T0);
      const result = await store.redeemAuthorizationCode(record.codeHash, T0, () => error, issued);
      expect(result).toEqual({ status: "refused", error });
      if (result.status === "refused") expect(result.error).toBe(error);
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect(await store.getAccessToken(issued.accessToken.jti)).toBeUndefined();
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toBeUndefined();
      // Any attempt consumes the code: the right verifier afterwards is too late.
      const again = await store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1));
      expect(again.status).toBe("replayed");
      expect(await store.listGrants({ clientId: record.clientId })).toEqual([]);
    });

    it("replayed: a second redemption revokes the grant and every token of it", async () => {
      const store = ctx.store();
      const { code: record, issued, grantId } = await issueGrant(store);
      let checked = false;
      const replay = tokens(T0 + 5000);
      const result = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + 5000,
        () => {
          checked = true;
          return undefined;
        },
        replay,
      );
      expect(result).toEqual({ status: "replayed" });
      expect(checked).toBe(false);
      expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 5000);
      expect((await accessView(store, issued.accessToken.jti, grantId))?.revokedAt).toBe(T0 + 5000);
      expect((await store.getRefreshToken(issued.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 5000);
      expect(await store.getAccessToken(replay.accessToken.jti)).toBeUndefined();
      const rotation = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 6000,
        () => ({}),
        tokens(T0),
      );
      expect(rotation.status).toBe("revoked");
    });

    it("expired: a code at or past expiresAt issues nothing and check is not run", async () => {
      const store = ctx.store();
      const record = code({ expiresAt: T0 + MINUTE });
      await store.insertAuthorizationCode(record);
      const issued = tokens(T0 + MINUTE);
      const result = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + MINUTE,
        () => {
          throw new Error("check must not run on an expired code");
        },
        issued,
      );
      expect(result).toEqual({ status: "expired" });
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect(await store.getAccessToken(issued.accessToken.jti)).toBeUndefined();
    });

    it("not_found: an unknown code hash", async () => {
      const result = await ctx.store().redeemAuthorizationCode(secret().hash, T0, pass, tokens(T0));
      expect(result).toEqual({ status: "not_found" });
    });

    it("rejects a duplicate code hash", async () => {
      const store = ctx.store();
      const record = code();
      await store.insertAuthorizationCode(record);
      await expect(store.insertAuthorizationCode({ ...record, grantId: id("grant") })).rejects.toBeInstanceOf(
        StorageConflictError,
      );
    });

    it("exactly one of 50 parallel redemptions of one code is issued (the rest replay and revoke)", async () => {
      const store = ctx.store();
      const stores = await ctx.peers(4);
      const record = code();
      await store.insertAuthorizationCode(record);
      const attempts = Array.from({ length: 50 }, (_, i) => {
        const issued = tokens(T0 + 1);
        return {
          issued,
          run: stores[i % stores.length]!.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, issued),
        };
      });
      const results = await Promise.all(attempts.map((a) => a.run));
      expect(tally(results)).toEqual({ issued: 1, replayed: 49 });
      const winner = attempts[results.findIndex((r) => r.status === "issued")]!;
      expect((await accessView(store, winner.issued.accessToken.jti, record.grantId))?.grantId).toBe(
        record.grantId,
      );
      // The losers wrote nothing.
      for (const [i, attempt] of attempts.entries()) {
        if (results[i]!.status === "issued") continue;
        expect(await store.getAccessToken(attempt.issued.accessToken.jti)).toBeUndefined();
      }
      expect((await store.getGrant(record.grantId))?.revokedAt).toBe(T0 + 1);
    });

    it("a failure inside the redemption rolls back: the code is not consumed", async () => {
      const store = ctx.store();
      const record = code();
      await store.insertAuthorizationCode(record);
      await expect(
        store.redeemAuthorizationCode(
          record.codeHash,
          T0,
          () => {
            throw new Error("check crashed");
          },
          tokens(T0),
        ),
      ).rejects.toThrow("check crashed");
      // A write that fails after the code row was touched (the refresh token hash already taken; no
      // access-token id can clash: a store of contract version 2 writes none).
      const other = await issueGrant(store);
      const clash = { ...tokens(T0), refreshToken: other.issued.refreshToken! };
      await expect(store.redeemAuthorizationCode(record.codeHash, T0, pass, clash)).rejects.toBeInstanceOf(
        StorageConflictError,
      );
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect((await store.getRefreshToken(clash.refreshToken.tokenHash))?.grantId).toBe(other.grantId);
      const result = await store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1));
      expect(result.status).toBe("issued");
    });
  });

  describe("grants and access tokens", () => {
    it("client_credentials: a grant with its access token and no refresh token", async () => {
      const store = ctx.store();
      const grant = {
        grantId: id("grant"),
        clientId: id("client"),
        scopes: ["mcp:read"],
        resource: "https://mcp.example/mcp",
        createdAt: T0,
        expiresAt: T0 + HOUR,
      };
      const access = { jti: id("jti"), createdAt: T0, expiresAt: T0 + HOUR };
      await store.createGrantWithAccessToken(grant, access);
      expect(await store.getGrant(grant.grantId)).toEqual(grant);
      expect(await store.getAccessToken(access.jti)).toEqual(
        writesNoAccessRows(store)
          ? undefined
          : {
              ...access,
              grantId: grant.grantId,
              clientId: grant.clientId,
              scopes: grant.scopes,
              resource: grant.resource,
            },
      );
      await expect(
        store.createGrantWithAccessToken(grant, { ...access, jti: id("jti") }),
      ).rejects.toBeInstanceOf(StorageConflictError);
    });

    it("lists grants, filtered by user and by client", async () => {
      const store = ctx.store();
      const alice = id("alice");
      const app = id("app");
      const a = await issueGrant(store, T0, { userId: alice, clientId: app });
      const b = await issueGrant(store, T0 + 1, { userId: alice });
      const c = await issueGrant(store, T0 + 2, { clientId: app });
      const ids = (gs: { grantId: string }[]) => gs.map((g) => g.grantId);
      expect(ids(await store.listGrants())).toEqual([a.grantId, b.grantId, c.grantId]);
      expect(ids(await store.listGrants({ userId: alice }))).toEqual([a.grantId, b.grantId]);
      expect(ids(await store.listGrants({ clientId: app }))).toEqual([a.grantId, c.grantId]);
      expect(ids(await store.listGrants({ userId: alice, clientId: app }))).toEqual([a.grantId]);
    });

    it("revokeGrant revokes the grant, its refresh tokens and its access tokens, and no other grant", async () => {
      const store = ctx.store();
      const first = await issueGrant(store);
      const other = await issueGrant(store);
      expect(await store.revokeGrant(first.grantId, T0 + 10)).toBe(true);
      expect((await store.getGrant(first.grantId))?.revokedAt).toBe(T0 + 10);
      expect((await accessView(store, first.issued.accessToken.jti, first.grantId))?.revokedAt).toBe(T0 + 10);
      expect((await store.getRefreshToken(first.issued.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 10);
      expect(
        (
          await store.rotateRefreshToken(
            first.issued.refreshToken!.tokenHash,
            T0 + 11,
            () => ({}),
            tokens(T0),
          )
        ).status,
      ).toBe("revoked");
      expect((await store.getGrant(other.grantId))?.revokedAt).toBeUndefined();
      expect(
        (await accessView(store, other.issued.accessToken.jti, other.grantId))?.revokedAt,
      ).toBeUndefined();
      // Revoking again keeps the first revocation time.
      expect(await store.revokeGrant(first.grantId, T0 + 20)).toBe(true);
      expect((await store.getGrant(first.grantId))?.revokedAt).toBe(T0 + 10);
      expect(await store.revokeGrant(id("grant"), T0)).toBe(false);
    });

    it("revokeGrant reaches every token the grant was issued: each rotation's, a device poll's, a client_credentials grant's", async () => {
      const store = ctx.store();
      const first = await issueGrant(store);
      const second = tokens(T0 + 1);
      await store.rotateRefreshToken(first.issued.refreshToken!.tokenHash, T0 + 1, () => ({}), second);
      const third = tokens(T0 + 2);
      await store.rotateRefreshToken(second.refreshToken!.tokenHash, T0 + 2, () => ({}), third);
      const machine = {
        grantId: id("grant"),
        clientId: id("client"),
        scopes: ["mcp:read"],
        resource: "https://mcp.example/mcp",
        createdAt: T0,
        expiresAt: T0 + HOUR,
      };
      const machineAccess = { jti: id("jti"), createdAt: T0, expiresAt: T0 + HOUR };
      await store.createGrantWithAccessToken(machine, machineAccess);
      const { device, issued: deviceTokens } = await issueDeviceGrant(store, { userId: id("user") });

      expect(await store.revokeGrant(first.grantId, T0 + 3)).toBe(true);
      for (const issued of [first.issued, second, third]) {
        expect((await accessView(store, issued.accessToken.jti, first.grantId))?.revokedAt).toBe(T0 + 3);
        expect((await store.getRefreshToken(issued.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 3);
      }
      expect((await accessView(store, machineAccess.jti, machine.grantId))?.revokedAt).toBeUndefined();
      expect(
        (await accessView(store, deviceTokens.accessToken.jti, device.grantId))?.revokedAt,
      ).toBeUndefined();
      expect(await store.revokeGrant(machine.grantId, T0 + 4)).toBe(true);
      expect((await accessView(store, machineAccess.jti, machine.grantId))?.revokedAt).toBe(T0 + 4);
      expect(await store.revokeGrant(device.grantId, T0 + 5)).toBe(true);
      expect((await accessView(store, deviceTokens.accessToken.jti, device.grantId))?.revokedAt).toBe(T0 + 5);
      expect((await store.getRefreshToken(deviceTokens.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 5);
    });

    it("revokeAccessToken revokes only that token", async () => {
      const store = ctx.store();
      const { issued, grantId, code: record } = await issueGrant(store);
      // Version 2 wrote no row at issuance: the server passes what it read from the verified token.
      const token = {
        ...issued.accessToken,
        grantId,
        clientId: record.clientId,
        userId: record.userId!,
        scopes: ["mcp:read"],
        resource: record.resource,
      };
      expect(await store.revokeAccessToken(issued.accessToken.jti, T0 + 5, token)).toBe(true);
      expect((await store.getAccessToken(issued.accessToken.jti))?.revokedAt).toBe(T0 + 5);
      // An earlier revocation time is kept.
      expect(await store.revokeAccessToken(issued.accessToken.jti, T0 + 9, token)).toBe(true);
      expect((await store.getAccessToken(issued.accessToken.jti))?.revokedAt).toBe(T0 + 5);
      expect((await store.getGrant(grantId))?.revokedAt).toBeUndefined();
      expect((await store.getRefreshToken(issued.refreshToken!.tokenHash))?.revokedAt).toBeUndefined();
      expect(await store.revokeAccessToken(id("jti"), T0)).toBe(false);
      expect(await store.getAccessToken(id("jti"))).toBeUndefined();
    });

    it("the purge keeps a revoked-list entry until its token expires, then deletes it", async () => {
      const store = ctx.store();
      const { issued, grantId, code: record } = await issueGrant(store);
      const token = {
        ...issued.accessToken,
        grantId,
        clientId: record.clientId,
        scopes: ["mcp:read"],
        resource: record.resource,
      };
      expect(await store.revokeAccessToken(issued.accessToken.jti, T0 + 1, token)).toBe(true);
      await store.purgeExpired(token.expiresAt - 1);
      expect((await store.getAccessToken(token.jti))?.revokedAt).toBe(T0 + 1);
      const result = await store.purgeExpired(token.expiresAt);
      expect(result.accessTokens).toBe(1);
      expect(await store.getAccessToken(token.jti)).toBeUndefined();
      expect((await store.getGrant(grantId))?.revokedAt).toBeUndefined();
    });

    it("revokeAccessToken lists nothing for a grant no longer stored (its tokens are inactive already)", async () => {
      if (!writesNoAccessRows(ctx.store())) return;
      const store = ctx.store();
      const jti = `${id("grant")}.${id("unique")}`;
      const token = {
        jti,
        grantId: jti.slice(0, jti.lastIndexOf(".")),
        clientId: id("client"),
        scopes: ["mcp:read"],
        resource: "https://mcp.example/mcp",
        createdAt: T0,
        expiresAt: T0 + HOUR,
      };
      expect(await store.revokeAccessToken(jti, T0 + 1, token)).toBe(false);
      expect(await store.getAccessToken(jti)).toBeUndefined();
    });
  });
}
