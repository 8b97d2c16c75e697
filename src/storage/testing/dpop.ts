/**
 * Contract: DPoP binding of interactions, codes and grants. A pending interaction keeps the
 * `dpop_jkt` of its authorization request (RFC 9449 §10) until login and consent complete it, and a
 * code keeps it for the token endpoint to compare; the grant is bound to the key the token
 * endpoint names when it issues (`IssuedTokens.grantDpopJkt`, RFC 9449 §5), and every later read
 * of the grant — a refresh rotation above all — carries that binding unchanged.
 */

import { describe, expect, it } from "vitest";
import type { AuthorizationCodeRecord, GrantRecord } from "../contract.js";
import type { StoreContext } from "./context.js";
import { code, HOUR, id, interaction, issueGrant, secret, T0, tokens } from "./fixtures.js";

const pass = () => undefined;

export function dpopContract(ctx: StoreContext): void {
  describe("DPoP-bound codes and grants", () => {
    it("an interaction keeps its dpopJkt through get, setInteractionUser and consume; one without has none", async () => {
      const store = ctx.store();
      const bound = interaction({ dpopJkt: secret().hash });
      const plain = interaction();
      await store.createInteraction(bound);
      await store.createInteraction(plain);
      expect(await store.getInteraction(bound.id, T0)).toStrictEqual(bound);
      await store.setInteractionUser(bound.id, "user-1");
      expect(await store.getInteraction(bound.id, T0 + 1)).toStrictEqual({ ...bound, userId: "user-1" });
      expect(await store.consumeInteraction(bound.id, T0 + 2)).toStrictEqual({ ...bound, userId: "user-1" });
      const consumed = await store.consumeInteraction(plain.id, T0 + 2);
      expect(consumed).toStrictEqual(plain);
      expect(consumed).not.toHaveProperty("dpopJkt");
    });

    it("a code keeps its dpopJkt; the grant is bound to the key the redemption names", async () => {
      const store = ctx.store();
      const record = code({ dpopJkt: secret().hash });
      await store.insertAuthorizationCode(record);
      let seen: AuthorizationCodeRecord | undefined;
      const issued = { ...tokens(T0 + 1), grantDpopJkt: record.dpopJkt };
      const result = await store.redeemAuthorizationCode(
        record.codeHash,
        T0 + 1,
        (c) => {
          seen = c;
          return undefined;
        },
        (c) => ({ ...issued, grantDpopJkt: c.dpopJkt }),
      );
      expect(seen).toStrictEqual(record);
      expect(result).toMatchObject({
        status: "issued",
        code: { dpopJkt: record.dpopJkt },
        grant: { dpopJkt: record.dpopJkt },
      });
      expect((await store.getGrant(record.grantId))?.dpopJkt).toBe(record.dpopJkt);
      expect((await store.listGrants({ clientId: record.clientId }))[0]?.dpopJkt).toBe(record.dpopJkt);
    });

    it("the token endpoint decides: a bound code redeemed without grantDpopJkt gives an unbound grant, and the reverse", async () => {
      const store = ctx.store();
      const boundCode = code({ dpopJkt: secret().hash });
      const plainCode = code();
      await store.insertAuthorizationCode(boundCode);
      await store.insertAuthorizationCode(plainCode);
      const key = secret().hash;
      await store.redeemAuthorizationCode(boundCode.codeHash, T0, pass, tokens(T0));
      await store.redeemAuthorizationCode(plainCode.codeHash, T0, pass, { ...tokens(T0), grantDpopJkt: key });
      const unbound = await store.getGrant(boundCode.grantId);
      expect(unbound).toBeDefined();
      expect(unbound).not.toHaveProperty("dpopJkt");
      expect((await store.getGrant(plainCode.grantId))?.dpopJkt).toBe(key);
    });

    it("createGrantWithAccessToken stores dpopJkt as given", async () => {
      const store = ctx.store();
      const grant: GrantRecord = {
        grantId: id("grant"),
        clientId: id("client"),
        scopes: ["mcp:read"],
        resource: "https://mcp.example/mcp",
        createdAt: T0,
        expiresAt: T0 + HOUR,
        dpopJkt: secret().hash,
      };
      await store.createGrantWithAccessToken(grant, { jti: id("jti"), createdAt: T0, expiresAt: T0 + HOUR });
      expect(await store.getGrant(grant.grantId)).toStrictEqual(grant);
    });

    it("a rotation hands check and the caller the grant's binding, and never changes it", async () => {
      const store = ctx.store();
      const key = secret().hash;
      const { issued, grantId } = await issueGrant(store, T0, { dpopJkt: key });
      // issueGrant's redemption named no key: bind one through a fresh redemption instead.
      const record = code({ dpopJkt: key });
      await store.insertAuthorizationCode(record);
      const first = { ...tokens(T0), grantDpopJkt: key };
      await store.redeemAuthorizationCode(record.codeHash, T0, pass, first);
      let seen: GrantRecord | undefined;
      const next = { ...tokens(T0 + 1), grantDpopJkt: secret().hash };
      const rotated = await store.rotateRefreshToken(
        first.refreshToken!.tokenHash,
        T0 + 1,
        (_token, grant) => {
          seen = grant;
          return {};
        },
        next,
      );
      expect(seen?.dpopJkt).toBe(key);
      expect(rotated).toMatchObject({ status: "issued", grant: { grantId: record.grantId, dpopJkt: key } });
      // The grantDpopJkt a rotation brings is ignored: the grant exists and keeps its key.
      expect((await store.getGrant(record.grantId))?.dpopJkt).toBe(key);
      // The unbound grant stays unbound through its rotation too.
      const plain = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 1,
        () => ({}),
        tokens(T0 + 1),
      );
      expect(plain.status).toBe("issued");
      if (plain.status === "issued") expect(plain.grant).not.toHaveProperty("dpopJkt");
      expect(await store.getGrant(grantId)).not.toHaveProperty("dpopJkt");
    });

    it("revocation keeps the binding on the revoked grant", async () => {
      const store = ctx.store();
      const key = secret().hash;
      const record = code();
      await store.insertAuthorizationCode(record);
      await store.redeemAuthorizationCode(record.codeHash, T0, pass, { ...tokens(T0), grantDpopJkt: key });
      expect(await store.revokeGrant(record.grantId, T0 + 1)).toBe(true);
      expect(await store.getGrant(record.grantId)).toMatchObject({ revokedAt: T0 + 1, dpopJkt: key });
    });
  });
}
