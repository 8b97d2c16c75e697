/**
 * Contract: sign-in through upstream identity providers. An upstream login is consumed once, by
 * exactly one of concurrent callers across instances, and never after it expired; an identity is
 * found by (provider, subject) only, linked once, and created together with its user or not at all.
 */

import { describe, expect, it } from "vitest";
import {
  StorageConflictError,
  type UpstreamIdentityRecord,
  type UpstreamLoginRecord,
  type UserRecord,
} from "../contract.js";
import type { StoreContext } from "./context.js";
import { id, MINUTE, T0 } from "./fixtures.js";

function login(overrides: Partial<UpstreamLoginRecord> = {}): UpstreamLoginRecord {
  return {
    stateHash: id("state"),
    providerId: "github",
    browserBindingHash: id("binding"),
    createdAt: T0,
    expiresAt: T0 + 10 * MINUTE,
    ...overrides,
  };
}

function user(overrides: Partial<UserRecord> = {}): UserRecord {
  return {
    id: id("user"),
    username: id("name"),
    passwordHash: "!",
    isAdmin: false,
    createdAt: T0,
    ...overrides,
  };
}

function identity(userId: string, overrides: Partial<UpstreamIdentityRecord> = {}): UpstreamIdentityRecord {
  return {
    providerId: "github",
    subject: id("sub"),
    userId,
    email: "alice@example.com",
    emailVerified: true,
    displayName: "Alice",
    createdAt: T0,
    lastSignInAt: T0,
    ...overrides,
  };
}

export function upstreamContract(ctx: StoreContext): void {
  describe("upstream sign-in", () => {
    it("an upstream login is returned once, whole, then gone", async () => {
      const store = ctx.store();
      const record = login({ interactionId: id("interaction") });
      const account = login({ returnTo: "/admin" });
      await store.createUpstreamLogin(record);
      await store.createUpstreamLogin(account);
      expect(await store.consumeUpstreamLogin(record.stateHash, T0 + 1)).toEqual(record);
      expect(await store.consumeUpstreamLogin(record.stateHash, T0 + 2)).toBeUndefined();
      expect(await store.consumeUpstreamLogin(account.stateHash, T0 + 1)).toEqual(account);
      expect(await store.consumeUpstreamLogin(id("unknown"), T0)).toBeUndefined();
    });

    it("an expired upstream login is never returned, and purging removes it", async () => {
      const store = ctx.store();
      const expired = login();
      const live = login({ expiresAt: T0 + 60 * MINUTE });
      await store.createUpstreamLogin(expired);
      await store.createUpstreamLogin(live);
      expect(await store.consumeUpstreamLogin(expired.stateHash, expired.expiresAt)).toBeUndefined();
      await store.purgeExpired(T0 + 30 * MINUTE);
      expect(await store.consumeUpstreamLogin(live.stateHash, T0 + 31 * MINUTE)).toEqual(live);
    });

    it("a state hash is unique", async () => {
      const store = ctx.store();
      const record = login();
      await store.createUpstreamLogin(record);
      await expect(store.createUpstreamLogin({ ...record, providerId: "google" })).rejects.toBeInstanceOf(
        StorageConflictError,
      );
    });

    it("of concurrent consumers on several instances exactly one gets the login", async () => {
      const stores = await ctx.peers(4);
      const record = login();
      await stores[0]!.createUpstreamLogin(record);
      const results = await Promise.all(
        stores.flatMap((s) => [
          s.consumeUpstreamLogin(record.stateHash, T0 + 1),
          s.consumeUpstreamLogin(record.stateHash, T0 + 1),
        ]),
      );
      expect(results.filter((r) => r !== undefined)).toEqual([record]);
    });

    it("an identity is found by provider and subject exactly, never by e-mail", async () => {
      const store = ctx.store();
      const owner = user();
      const linked = identity(owner.id);
      await store.createUserWithUpstreamIdentity(owner, linked);
      expect(await store.getUser(owner.id)).toEqual(owner);
      expect(await store.getUpstreamIdentity("github", linked.subject)).toEqual(linked);
      // Same subject at another provider, same e-mail under another subject: other identities.
      expect(await store.getUpstreamIdentity("gitlab", linked.subject)).toBeUndefined();
      expect(await store.getUpstreamIdentity("github", linked.subject.toUpperCase())).toBeUndefined();
      expect(await store.getUpstreamIdentity("github", linked.email!)).toBeUndefined();
    });

    it("an identity is linked once; a second user for it is refused and not created", async () => {
      const store = ctx.store();
      const first = user();
      const linked = identity(first.id);
      await store.createUserWithUpstreamIdentity(first, linked);
      const second = user();
      await expect(
        store.createUserWithUpstreamIdentity(second, { ...linked, userId: second.id }),
      ).rejects.toBeInstanceOf(StorageConflictError);
      expect(await store.getUser(second.id)).toBeUndefined();
      await expect(store.linkUpstreamIdentity({ ...linked, userId: second.id })).rejects.toBeInstanceOf(
        StorageConflictError,
      );
      expect((await store.getUpstreamIdentity("github", linked.subject))?.userId).toBe(first.id);
    });

    it("a taken username refuses the user and leaves the identity unlinked", async () => {
      const store = ctx.store();
      const existing = user();
      await store.createUser(existing);
      const clash = user({ username: existing.username });
      const wanted = identity(clash.id);
      await expect(store.createUserWithUpstreamIdentity(clash, wanted)).rejects.toBeInstanceOf(
        StorageConflictError,
      );
      expect(await store.getUpstreamIdentity("github", wanted.subject)).toBeUndefined();
    });

    it("an existing user may be linked to identities of several providers", async () => {
      const store = ctx.store();
      const owner = user();
      await store.createUser(owner);
      const github = identity(owner.id, { email: undefined, displayName: undefined, emailVerified: false });
      const google = identity(owner.id, { providerId: "google" });
      await store.linkUpstreamIdentity(github);
      await store.linkUpstreamIdentity(google);
      expect(await store.getUpstreamIdentity("github", github.subject)).toEqual({
        providerId: "github",
        subject: github.subject,
        userId: owner.id,
        emailVerified: false,
        createdAt: T0,
        lastSignInAt: T0,
      });
      expect((await store.getUpstreamIdentity("google", google.subject))?.userId).toBe(owner.id);
    });

    it("a sign-in updates the profile fields and the time, not the link", async () => {
      const store = ctx.store();
      const owner = user();
      const linked = identity(owner.id);
      await store.createUserWithUpstreamIdentity(owner, linked);
      await store.recordUpstreamSignIn({
        providerId: "github",
        subject: linked.subject,
        emailVerified: false,
        displayName: "Alice B.",
        lastSignInAt: T0 + MINUTE,
      });
      expect(await store.getUpstreamIdentity("github", linked.subject)).toEqual({
        providerId: "github",
        subject: linked.subject,
        userId: owner.id,
        emailVerified: false,
        displayName: "Alice B.",
        createdAt: T0,
        lastSignInAt: T0 + MINUTE,
      });
    });
  });
}
