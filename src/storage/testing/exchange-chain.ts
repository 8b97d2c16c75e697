/**
 * Contract: grants made by token exchange (RFC 8693) name the grant they were exchanged from
 * (`GrantRecord.exchangedFrom`), and revoking a grant revokes every grant exchanged from it, down
 * the chain, with their tokens (RFC 7009 §2.1: revoking a grant revokes what was derived from it).
 * Without it, a token exchanged from a since-revoked grant could be exchanged again for a fresh one.
 */

import { describe, expect, it } from "vitest";
import type { AuthorizationStore, GrantRecord } from "../contract.js";
import { accessView } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { HOUR, id, T0 } from "./fixtures.js";

/** A grant with one access token, as the token exchange (or client_credentials) writes it. */
async function grantWithToken(
  store: AuthorizationStore,
  exchangedFrom?: string,
): Promise<{ grant: GrantRecord; jti: string }> {
  const grant: GrantRecord = {
    grantId: id("grant"),
    clientId: id("client"),
    userId: "alice",
    scopes: ["files:read"],
    resource: "https://files.example/mcp",
    createdAt: T0,
    expiresAt: T0 + HOUR,
    ...(exchangedFrom === undefined ? {} : { exchangedFrom }),
  };
  // The jti names its grant, as the server draws it (storage/access-token-id.ts).
  const jti = `${grant.grantId}.${id("jti")}`;
  await store.createGrantWithAccessToken(grant, { jti, createdAt: T0, expiresAt: T0 + HOUR });
  return { grant, jti };
}

export function exchangeChainContract(ctx: StoreContext): void {
  describe("token exchange chains", () => {
    it("a grant keeps the grant it was exchanged from", async () => {
      const store = ctx.store();
      const origin = await grantWithToken(store);
      const exchanged = await grantWithToken(store, origin.grant.grantId);
      expect((await store.getGrant(exchanged.grant.grantId))?.exchangedFrom).toBe(origin.grant.grantId);
      expect((await store.getGrant(origin.grant.grantId))?.exchangedFrom).toBeUndefined();
    });

    it("revoking a grant revokes every grant exchanged from it, down the chain, with their tokens", async () => {
      const store = ctx.store();
      const origin = await grantWithToken(store);
      const first = await grantWithToken(store, origin.grant.grantId);
      const second = await grantWithToken(store, first.grant.grantId);
      const sibling = await grantWithToken(store, origin.grant.grantId);
      const unrelated = await grantWithToken(store);
      const fromUnrelated = await grantWithToken(store, unrelated.grant.grantId);

      expect(await store.revokeGrant(origin.grant.grantId, T0 + 5)).toBe(true);
      for (const derived of [origin, first, second, sibling]) {
        expect((await store.getGrant(derived.grant.grantId))?.revokedAt).toBe(T0 + 5);
        expect((await accessView(store, derived.jti, derived.grant.grantId))?.revokedAt).toBe(T0 + 5);
      }
      for (const other of [unrelated, fromUnrelated]) {
        expect((await store.getGrant(other.grant.grantId))?.revokedAt).toBeUndefined();
        expect((await accessView(store, other.jti, other.grant.grantId))?.revokedAt).toBeUndefined();
      }
    });

    it("revoking a link in the middle leaves its origin, and an earlier revocation time stands", async () => {
      const store = ctx.store();
      const origin = await grantWithToken(store);
      const middle = await grantWithToken(store, origin.grant.grantId);
      const last = await grantWithToken(store, middle.grant.grantId);
      expect(await store.revokeGrant(last.grant.grantId, T0 + 1)).toBe(true);
      expect(await store.revokeGrant(middle.grant.grantId, T0 + 2)).toBe(true);
      expect((await store.getGrant(origin.grant.grantId))?.revokedAt).toBeUndefined();
      expect((await store.getGrant(middle.grant.grantId))?.revokedAt).toBe(T0 + 2);
      expect((await store.getGrant(last.grant.grantId))?.revokedAt).toBe(T0 + 1);
      expect((await accessView(store, last.jti, last.grant.grantId))?.revokedAt).toBe(T0 + 1);
    });

    it("a chain revoked from another instance is revoked for this one", async () => {
      const [a, b] = await ctx.peers(2);
      const origin = await grantWithToken(a!);
      const exchanged = await grantWithToken(b!, origin.grant.grantId);
      expect(await b!.revokeGrant(origin.grant.grantId, T0 + 3)).toBe(true);
      expect((await a!.getGrant(exchanged.grant.grantId))?.revokedAt).toBe(T0 + 3);
      expect((await accessView(a!, exchanged.jti, exchanged.grant.grantId))?.revokedAt).toBe(T0 + 3);
    });
  });
}
