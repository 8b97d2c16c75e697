/**
 * Contract: an operator's changes to accounts (`changeUser`) and the end of what a user holds
 * (`endUserAccess`): disabling keeps the account and its consents, removing deletes them; the last
 * enabled administrator cannot be disabled, removed or demoted, not even by two changes racing
 * across instances; ending access revokes every grant with its tokens, deletes the sessions and
 * every upstream token set of the user, and denies approved device authorizations not yet redeemed.
 */

import { describe, expect, it } from "vitest";
import type { UserRecord } from "../contract.js";
import { accessView } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import {
  deviceAuthorization,
  id,
  issueDeviceGrant,
  issueGrant,
  MINUTE,
  secret,
  session,
  T0,
  tally,
} from "./fixtures.js";

function user(overrides: Partial<UserRecord> = {}): UserRecord {
  return {
    id: id("user"),
    username: id("name"),
    passwordHash: "scrypt$x",
    isAdmin: false,
    createdAt: T0,
    ...overrides,
  };
}

export function userContract(ctx: StoreContext): void {
  describe("user changes", () => {
    it("disable marks the account (an earlier mark kept), enable clears it; both are read back everywhere", async () => {
      const store = ctx.store();
      const alice = user();
      await store.createUser(alice);
      expect(await store.getUser(alice.id)).not.toHaveProperty("disabledAt");
      expect(await store.changeUser(alice.id, "disable", T0 + MINUTE)).toEqual({
        status: "changed",
        user: { ...alice, disabledAt: T0 + MINUTE },
      });
      await store.changeUser(alice.id, "disable", T0 + 2 * MINUTE);
      expect((await store.getUser(alice.id))?.disabledAt).toBe(T0 + MINUTE);
      expect((await store.getUserByUsername(alice.username))?.disabledAt).toBe(T0 + MINUTE);
      expect((await store.listUsers()).find((u) => u.id === alice.id)?.disabledAt).toBe(T0 + MINUTE);
      expect(await store.changeUser(alice.id, "enable", T0 + 3 * MINUTE)).toEqual({
        status: "changed",
        user: alice,
      });
      expect(await store.getUser(alice.id)).toEqual(alice);
      expect(await store.changeUser(id("user"), "disable", T0)).toEqual({ status: "not_found" });
    });

    it("the administrator role is given and taken; the last enabled administrator keeps it", async () => {
      const store = ctx.store();
      const [ada, bob] = [user({ isAdmin: true }), user()];
      await store.createUser(ada);
      await store.createUser(bob);
      for (const change of ["disable", "remove", "remove-admin"] as const) {
        expect(await store.changeUser(ada.id, change, T0)).toEqual({ status: "last_admin" });
      }
      expect(await store.getUser(ada.id)).toEqual(ada);
      expect((await store.changeUser(bob.id, "make-admin", T0)).status).toBe("changed");
      expect((await store.getUser(bob.id))?.isAdmin).toBe(true);
      expect((await store.changeUser(ada.id, "remove-admin", T0)).status).toBe("changed");
      expect((await store.getUser(ada.id))?.isAdmin).toBe(false);
      // Bob is now the only one: a disabled administrator does not count either.
      expect(await store.changeUser(bob.id, "disable", T0)).toEqual({ status: "last_admin" });
      await store.changeUser(ada.id, "make-admin", T0);
      await store.changeUser(ada.id, "disable", T0);
      expect(await store.changeUser(bob.id, "remove", T0)).toEqual({ status: "last_admin" });
      // A user who is not an administrator goes whatever the administrators are.
      const carol = user();
      await store.createUser(carol);
      expect((await store.changeUser(carol.id, "disable", T0)).status).toBe("changed");
    });

    it("two administrators disabling each other at once, across instances: exactly one change passes", async () => {
      for (let round = 0; round < 4; round++) {
        const [a, b] = await ctx.peers(2);
        const [ada, bob] = [user({ isAdmin: true }), user({ isAdmin: true })];
        await a!.createUser(ada);
        await a!.createUser(bob);
        // Only these two are enabled administrators: earlier rounds' survivor steps down.
        for (const other of await a!.listUsers()) {
          if (other.id !== ada.id && other.id !== bob.id && other.isAdmin)
            expect((await a!.changeUser(other.id, "disable", T0)).status).toBe("changed");
        }
        const results = await Promise.all([
          a!.changeUser(bob.id, round % 2 ? "remove" : "disable", T0),
          b!.changeUser(ada.id, "disable", T0),
        ]);
        expect(tally(results)).toEqual({ changed: 1, last_admin: 1 });
        const admins = (await a!.listUsers()).filter((u) => u.isAdmin && u.disabledAt === undefined);
        expect(admins).toHaveLength(1);
      }
    });

    it("remove deletes the user, its consents and identity links; its grants keep the id", async () => {
      const store = ctx.store();
      const alice = user();
      const other = user();
      await store.createUser(alice);
      await store.createUser(other);
      const consent = {
        clientId: id("client"),
        redirectUri: "https://app.example/cb",
        scopes: ["mcp:read"],
        createdAt: T0,
        updatedAt: T0,
      };
      await store.grantConsent({ ...consent, userId: alice.id });
      await store.grantConsent({ ...consent, userId: other.id });
      await store.linkUpstreamIdentity({
        providerId: "github",
        subject: "42",
        userId: alice.id,
        emailVerified: false,
        createdAt: T0,
        lastSignInAt: T0,
      });
      const { grantId } = await issueGrant(store, T0, { userId: alice.id });
      expect(await store.changeUser(alice.id, "remove", T0)).toEqual({ status: "changed", user: alice });
      expect(await store.getUser(alice.id)).toBeUndefined();
      expect(await store.getUserByUsername(alice.username)).toBeUndefined();
      expect(await store.listConsents(alice.id)).toEqual([]);
      expect(await store.listConsents(other.id)).toHaveLength(1);
      expect(await store.getUpstreamIdentity("github", "42")).toBeUndefined();
      expect((await store.getGrant(grantId))?.userId).toBe(alice.id);
      expect(await store.changeUser(alice.id, "remove", T0)).toEqual({ status: "not_found" });
      // The name is free again.
      await store.createUser({ ...alice, id: id("user") });
    });

    it("endUserAccess revokes every grant of the user with its tokens, ends sessions and upstream sets, denies unredeemed device approvals", async () => {
      const store = ctx.store();
      const alice = user();
      const bob = user();
      await store.createUser(alice);
      await store.createUser(bob);
      const aliceSession = session({ userId: alice.id, expiresAt: T0 + 60 * MINUTE });
      const bobSession = session({ userId: bob.id, expiresAt: T0 + 60 * MINUTE });
      await store.createSession(aliceSession);
      await store.createSession({ ...aliceSession, idHash: secret().hash });
      await store.createSession(bobSession);
      const set = (userId: string) => ({
        providerId: "github",
        userId,
        sealed: "{}",
        version: 1,
        createdAt: T0,
        updatedAt: T0,
        expiresAt: T0 + 60 * MINUTE,
      });
      await store.keepSessionUpstreamTokens(aliceSession.idHash, set(alice.id));
      await store.keepSessionUpstreamTokens(bobSession.idHash, set(bob.id));
      const one = await issueGrant(store, T0, { userId: alice.id, sessionHash: aliceSession.idHash });
      expect(await store.bindUpstreamTokens(aliceSession.idHash, one.grantId, T0)).toBe(1);
      const two = await issueGrant(store, T0, { userId: alice.id });
      const revokedBefore = await issueGrant(store, T0, { userId: alice.id });
      await store.revokeGrant(revokedBefore.grantId, T0);
      const device = await issueDeviceGrant(store, { userId: alice.id });
      const bobs = await issueGrant(store, T0, { userId: bob.id });
      // Approved on the device page, not yet polled: the device must not get it.
      const waiting = deviceAuthorization();
      await store.createDeviceAuthorization(waiting);
      await store.decideDeviceAuthorization(
        waiting.userCodeHash,
        { approved: true, userId: alice.id, approvedScopes: ["mcp:read"], refreshAllowed: true },
        T0,
      );

      const now = T0 + 2 * MINUTE;
      expect(await store.endUserAccess(alice.id, now)).toEqual({ grants: 3, sessions: 2 });
      for (const grantId of [one.grantId, two.grantId, device.device.grantId]) {
        expect((await store.getGrant(grantId))?.revokedAt).toBe(now);
      }
      expect((await store.getGrant(revokedBefore.grantId))?.revokedAt).toBe(T0);
      expect((await store.getRefreshToken(one.issued.refreshToken!.tokenHash))?.revokedAt).toBe(now);
      expect((await accessView(store, two.issued.accessToken.jti, two.grantId))?.revokedAt).toBe(now);
      expect(await store.getSession(aliceSession.idHash, now)).toBeUndefined();
      expect(await store.getUpstreamTokens(one.grantId, "github")).toBeUndefined();
      const poll = await store.pollDeviceAuthorization(waiting.deviceCodeHash, waiting.clientId, now, () => {
        throw new Error("nothing may be issued");
      });
      expect(poll.status).toBe("denied");
      // Bob keeps everything.
      expect((await store.getGrant(bobs.grantId))?.revokedAt).toBeUndefined();
      expect(await store.getSession(bobSession.idHash, now)).toBeDefined();
      // The account itself is untouched: ending access is not disabling it.
      expect(await store.getUser(alice.id)).toEqual(alice);
      expect(await store.endUserAccess(alice.id, now + 1)).toEqual({ grants: 0, sessions: 0 });
    });
  });
}
