/** Contract: clients, users, sessions, interactions, consents, rate limits, documents, purge. */

import { describe, expect, it } from "vitest";
import { StorageConflictError } from "../contract.js";
import { writesNoAccessRows } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import {
  client,
  code,
  DAY,
  deviceAuthorization,
  HOUR,
  id,
  interaction,
  issueGrant,
  MINUTE,
  secret,
  session,
  T0,
  tokens,
} from "./fixtures.js";

export function recordContract(ctx: StoreContext): void {
  describe("clients", () => {
    it("round-trips every field, lists in creation order, deletes", async () => {
      const store = ctx.store();
      const full = client({
        source: "preregistered",
        clientUri: "https://app.example",
        logoUri: "https://app.example/logo.png",
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: secret().hash,
        clientSecretExpiresAt: 0,
        jwksUri: "https://app.example/jwks",
        jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y" }] },
        scope: "mcp:read mcp:write",
        lastUsedAt: T0 + 5,
        expiresAt: T0 + DAY,
      });
      const minimal = client({ createdAt: T0 + 1 });
      await store.createClient(minimal);
      await store.createClient(full);
      expect(await store.getClient(full.clientId)).toEqual(full);
      expect(await store.getClient(minimal.clientId)).toEqual(minimal);
      expect(await store.getClient(id("nobody"))).toBeUndefined();
      expect((await store.listClients()).map((c) => c.clientId)).toEqual([full.clientId, minimal.clientId]);
      expect(await store.deleteClient(full.clientId)).toBe(true);
      expect(await store.deleteClient(full.clientId)).toBe(false);
      expect(await store.getClient(full.clientId)).toBeUndefined();
    });

    it("createClient refuses an existing id; upsertClient replaces", async () => {
      const store = ctx.store();
      const original = client({ source: "metadata-document", clientId: "https://app.example/client.json" });
      await store.createClient(original);
      await expect(store.createClient({ ...original, clientName: "Impostor" })).rejects.toBeInstanceOf(
        StorageConflictError,
      );
      expect((await store.getClient(original.clientId))?.clientName).toBe(original.clientName);
      const replaced = { ...original, clientName: "Renamed", redirectUris: ["https://app.example/new"] };
      delete replaced.clientUri;
      await store.upsertClient(replaced);
      expect(await store.getClient(original.clientId)).toEqual(replaced);
      const fresh = client();
      await store.upsertClient(fresh);
      expect(await store.getClient(fresh.clientId)).toEqual(fresh);
    });

    it("markClientUsed records use and clears expiresAt", async () => {
      const store = ctx.store();
      const dynamic = client({ expiresAt: T0 + DAY });
      await store.createClient(dynamic);
      await store.markClientUsed(dynamic.clientId, T0 + 100);
      const used = await store.getClient(dynamic.clientId);
      expect(used?.lastUsedAt).toBe(T0 + 100);
      expect(used?.expiresAt).toBeUndefined();
      await store.markClientUsed(id("nobody"), T0);
    });
  });

  describe("users", () => {
    it("creates, finds by id and username, lists, changes the password hash", async () => {
      const store = ctx.store();
      const alice = {
        id: id("u"),
        username: "alice",
        passwordHash: "scrypt$1",
        isAdmin: true,
        createdAt: T0,
      };
      const bob = {
        id: id("u"),
        username: "bob",
        passwordHash: "scrypt$2",
        isAdmin: false,
        createdAt: T0 + 1,
      };
      await store.createUser(bob);
      await store.createUser(alice);
      expect(await store.getUser(alice.id)).toEqual(alice);
      expect(await store.getUserByUsername("bob")).toEqual(bob);
      expect(await store.getUserByUsername("carol")).toBeUndefined();
      expect(await store.getUser(id("u"))).toBeUndefined();
      expect((await store.listUsers()).map((u) => u.username)).toEqual(["alice", "bob"]);
      await store.setUserPassword(bob.id, "scrypt$3");
      expect((await store.getUser(bob.id))?.passwordHash).toBe("scrypt$3");
      await expect(store.createUser({ ...alice, id: id("u") })).rejects.toBeInstanceOf(StorageConflictError);
    });
  });

  describe("browser sessions", () => {
    it("returns a live session, not an expired one, and forgets a deleted one", async () => {
      const store = ctx.store();
      const record = session({ expiresAt: T0 + HOUR });
      await store.createSession(record);
      expect(await store.getSession(record.idHash, T0 + HOUR - 1)).toEqual(record);
      expect(await store.getSession(record.idHash, T0 + HOUR)).toBeUndefined();
      await store.deleteSession(record.idHash);
      expect(await store.getSession(record.idHash, T0)).toBeUndefined();
      await expect(
        (async () => {
          await store.createSession(record);
          await store.createSession(record);
        })(),
      ).rejects.toBeInstanceOf(StorageConflictError);
    });
  });

  describe("interactions", () => {
    it("stores, attaches the user, expires", async () => {
      const store = ctx.store();
      const record = interaction();
      await store.createInteraction(record);
      expect(await store.getInteraction(record.id, T0)).toEqual(record);
      await store.setInteractionUser(record.id, "user-1");
      expect(await store.getInteraction(record.id, T0)).toEqual({ ...record, userId: "user-1" });
      expect(await store.getInteraction(record.id, record.expiresAt)).toBeUndefined();
      expect(await store.consumeInteraction(record.id, record.expiresAt)).toBeUndefined();
    });

    it("is consumed once, even by 20 parallel attempts", async () => {
      const store = ctx.store();
      const record = interaction();
      await store.createInteraction(record);
      const stores = await ctx.peers(4);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          stores[i % stores.length]!.consumeInteraction(record.id, T0 + 1),
        ),
      );
      expect(results.filter((r) => r !== undefined)).toEqual([record]);
      expect(await store.consumeInteraction(record.id, T0 + 1)).toBeUndefined();
      expect(await store.getInteraction(record.id, T0 + 1)).toBeUndefined();
    });
  });

  describe("consents", () => {
    it("accumulate scopes per (user, client, redirect URI)", async () => {
      const store = ctx.store();
      const base = { userId: id("u"), clientId: id("c"), redirectUri: "https://app.example/cb" };
      await store.grantConsent({ ...base, scopes: ["a", "b"], createdAt: T0, updatedAt: T0 });
      await store.grantConsent({ ...base, scopes: ["b", "c"], createdAt: T0 + 9, updatedAt: T0 + 9 });
      expect(await store.getConsent(base.userId, base.clientId, base.redirectUri)).toEqual({
        ...base,
        scopes: ["a", "b", "c"],
        createdAt: T0,
        updatedAt: T0 + 9,
      });
      // Another redirect URI of the same client is a separate consent.
      expect(await store.getConsent(base.userId, base.clientId, "http://127.0.0.1:9/cb")).toBeUndefined();
      expect(await store.getConsent(id("u"), base.clientId, base.redirectUri)).toBeUndefined();
    });

    it("revoke one redirect URI or all of a client; list by user", async () => {
      const store = ctx.store();
      const user = id("u");
      const app = id("c");
      const other = id("c");
      const give = (clientId: string, redirectUri: string, at: number, userId = user) =>
        store.grantConsent({ userId, clientId, redirectUri, scopes: ["s"], createdAt: at, updatedAt: at });
      await give(app, "https://a/1", T0);
      await give(app, "https://a/2", T0 + 1);
      await give(other, "https://b/1", T0 + 2);
      await give(app, "https://a/1", T0 + 3, id("u"));
      expect((await store.listConsents(user)).map((c) => c.redirectUri)).toEqual([
        "https://a/1",
        "https://a/2",
        "https://b/1",
      ]);
      expect(await store.listConsents()).toHaveLength(4);
      expect(await store.revokeConsent(user, app, "https://a/2")).toBe(1);
      expect(await store.getConsent(user, app, "https://a/2")).toBeUndefined();
      expect(await store.getConsent(user, app, "https://a/1")).toBeDefined();
      await give(app, "https://a/3", T0 + 4);
      expect(await store.revokeConsent(user, app)).toBe(2);
      expect((await store.listConsents(user)).map((c) => c.clientId)).toEqual([other]);
      expect(await store.revokeConsent(user, app)).toBe(0);
      expect(await store.listConsents()).toHaveLength(2);
    });
  });

  describe("rate limits", () => {
    it("count hits per key in a fixed window; a new window starts at one", async () => {
      const store = ctx.store();
      const key = id("register:127.0.0.1");
      expect(await store.hitRateLimit(key, T0, MINUTE)).toBe(1);
      expect(await store.hitRateLimit(key, T0, MINUTE)).toBe(2);
      expect(await store.hitRateLimit(id("other"), T0, MINUTE)).toBe(1);
      expect(await store.hitRateLimit(key, T0, MINUTE)).toBe(3);
      expect(await store.hitRateLimit(key, T0 + MINUTE, MINUTE)).toBe(1);
      expect(await store.hitRateLimit(key, T0 + MINUTE, MINUTE)).toBe(2);
    });

    it("counts every one of 20 parallel hits across instances", async () => {
      const store = ctx.store();
      const stores = await ctx.peers(4);
      const key = id("token");
      const counts = await Promise.all(
        Array.from({ length: 20 }, (_, i) => stores[i % stores.length]!.hitRateLimit(key, T0, MINUTE)),
      );
      expect([...counts].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await store.hitRateLimit(key, T0, MINUTE)).toBe(21);
    });
  });

  describe("cached metadata documents", () => {
    it("are returned until they expire and replaced on put", async () => {
      const store = ctx.store();
      const url = `https://app.example/${id("doc")}.json`;
      expect(await store.getCachedDocument(url, T0)).toBeUndefined();
      await store.putCachedDocument(url, '{"client_id":"x"}', T0 + MINUTE);
      expect(await store.getCachedDocument(url, T0)).toEqual({
        body: '{"client_id":"x"}',
        expiresAt: T0 + MINUTE,
      });
      expect(await store.getCachedDocument(url, T0 + MINUTE)).toBeUndefined();
      await store.putCachedDocument(url, "{}", T0 + 2 * MINUTE);
      expect(await store.getCachedDocument(url, T0 + MINUTE)).toEqual({
        body: "{}",
        expiresAt: T0 + 2 * MINUTE,
      });
    });
  });

  describe("purgeExpired", () => {
    it("removes what has expired and leaves live grants and their tokens", async () => {
      const store = ctx.store();
      const now = T0 + 2 * DAY;
      // Codes: one expired (consumed), one expired (unused), one live.
      const consumed = await issueGrant(store, T0);
      await store.insertAuthorizationCode(code({ expiresAt: now }));
      const liveCode = code({ expiresAt: now + 1 });
      await store.insertAuthorizationCode(liveCode);
      // The grant of `consumed` is live; give it an expired access token via a refresh.
      const rotated = tokens(T0 + HOUR);
      await store.rotateRefreshToken(consumed.issued.refreshToken!.tokenHash, T0 + HOUR, () => ({}), rotated);
      const liveAccess = { jti: id("jti"), createdAt: now - 1, expiresAt: now + HOUR };
      const fresh = { ...tokens(now - 1), accessToken: liveAccess };
      await store.rotateRefreshToken(rotated.refreshToken!.tokenHash, now - 1, () => ({}), fresh);
      // An expired grant (absolute lifetime over) with its tokens.
      const old = await issueGrant(store, T0 - 100 * DAY);
      // A revoked grant whose access tokens have all expired.
      const revoked = await issueGrant(store, T0);
      await store.revokeGrant(revoked.grantId, T0 + 1);
      // A revoked grant with a live access token stays until the token expires.
      const revokedLive = await issueGrant(store, now - MINUTE);
      await store.revokeGrant(revokedLive.grantId, now - 1);

      await store.createSession(session({ expiresAt: now }));
      const liveSession = session({ expiresAt: now + 1 });
      await store.createSession(liveSession);
      await store.createInteraction(interaction({ expiresAt: now - 5 }));
      const liveInteraction = interaction({ expiresAt: now + MINUTE });
      await store.createInteraction(liveInteraction);
      await store.createClient(client({ expiresAt: now }));
      const usedClient = client({ expiresAt: now - 1 });
      await store.createClient(usedClient);
      await store.markClientUsed(usedClient.clientId, T0);
      const pending = client({ expiresAt: now + DAY });
      await store.createClient(pending);
      const forever = client({ source: "preregistered" });
      await store.createClient(forever);
      await store.putCachedDocument("https://expired.example/c.json", "{}", now);
      // Single-use markers and device authorizations: one expired, one live of each.
      expect(await store.useOnce(`purge:${id("jti")}`, now, T0)).toBe(true);
      const liveMarker = `purge:${id("jti")}`;
      expect(await store.useOnce(liveMarker, now + 1, T0)).toBe(true);
      const expiredDevice = deviceAuthorization({ expiresAt: now });
      await store.createDeviceAuthorization(expiredDevice);
      const liveDevice = deviceAuthorization({ expiresAt: now + MINUTE });
      await store.createDeviceAuthorization(liveDevice);

      const result = await store.purgeExpired(now);
      // Contract version 2 wrote no access-token row: a revoked grant has no live token row to
      // wait for and goes at once (its tokens are inactive with or without it).
      const v2 = writesNoAccessRows(store);
      expect(result).toEqual({
        // the codes behind the four issued grants (all past expiry) and the unused expired one
        codes: 5,
        // those of the expired grant and of the revoked grant with no live access token
        refreshTokens: v2 ? 3 : 2,
        // two expired ones of the live grant, plus one each of the two purged grants
        accessTokens: v2 ? 0 : 4,
        interactions: 1,
        sessions: 1,
        clients: 1,
        grants: v2 ? 3 : 2,
        markers: 1,
        deviceAuthorizations: 1,
      });
      expect(await store.getGrant(consumed.grantId)).toBeDefined();
      if (!v2) expect(await store.getAccessToken(liveAccess.jti)).toBeDefined();
      expect(await store.getRefreshToken(fresh.refreshToken!.tokenHash)).toBeDefined();
      // A rotated token inside its idle lifetime is kept so its reuse is still detected.
      expect((await store.getRefreshToken(consumed.issued.refreshToken!.tokenHash))?.rotatedAt).toBe(
        T0 + HOUR,
      );
      expect(await store.getGrant(old.grantId)).toBeUndefined();
      expect(await store.getRefreshToken(old.issued.refreshToken!.tokenHash)).toBeUndefined();
      expect(await store.getGrant(revoked.grantId)).toBeUndefined();
      if (!v2) {
        expect((await store.getGrant(revokedLive.grantId))?.revokedAt).toBe(now - 1);
        expect((await store.getAccessToken(revokedLive.issued.accessToken.jti))?.revokedAt).toBe(now - 1);
      } else {
        expect(await store.getGrant(revokedLive.grantId)).toBeUndefined();
      }
      expect(
        await store.redeemAuthorizationCode(liveCode.codeHash, now, () => undefined, tokens(now)),
      ).toMatchObject({
        status: "issued",
      });
      expect(await store.getSession(liveSession.idHash, now)).toEqual(liveSession);
      expect(await store.getInteraction(liveInteraction.id, now)).toEqual(liveInteraction);
      expect((await store.listClients()).map((c) => c.clientId).sort()).toEqual(
        [usedClient.clientId, pending.clientId, forever.clientId].sort(),
      );
      expect(await store.getCachedDocument("https://expired.example/c.json", now - 1)).toBeUndefined();
      expect(await store.useOnce(liveMarker, now + HOUR, now)).toBe(false);
      expect(await store.getDeviceAuthorizationByUserCode(liveDevice.userCodeHash, now)).toEqual(liveDevice);
      expect(
        await store.pollDeviceAuthorization(expiredDevice.deviceCodeHash, expiredDevice.clientId, now, () =>
          tokens(now),
        ),
      ).toEqual({
        status: "not_found",
      });
      // The user code of a purged authorization is free again.
      await store.createDeviceAuthorization(
        deviceAuthorization({ userCodeHash: expiredDevice.userCodeHash, expiresAt: now + MINUTE }),
      );
      expect(await store.purgeExpired(now)).toEqual({
        codes: 0,
        refreshTokens: 0,
        accessTokens: 0,
        interactions: 0,
        sessions: 0,
        clients: 0,
        grants: 0,
        markers: 0,
        deviceAuthorizations: 0,
      });
    });
  });
}
