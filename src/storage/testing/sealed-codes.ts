/**
 * Contract: the redemption of a sealed code (`redeemSealedAuthorizationCode`), whose record was never
 * inserted. Optional: a store without the method is reported as skipped here, never as passed (the
 * authorization server then stores every code at issue).
 *
 * The guarantees are those of a stored code: redeemed once, by exactly one of concurrent callers;
 * any attempt that gets to the checks consumes it; a second use revokes the grant of the first; a
 * failure inside the redemption leaves it unused; an expired one issues nothing.
 */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type { AuthorizationCodeRecord, AuthorizationStore } from "../contract.js";
import { accessView } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { code, MINUTE, T0, tally, tokens } from "./fixtures.js";

const pass = () => undefined;

/** The store's sealed redemption, or undefined (the test is then skipped). */
function sealedRedemption(store: AuthorizationStore) {
  const redeem = store.redeemSealedAuthorizationCode;
  return redeem && ((...args: Parameters<typeof redeem>) => redeem.apply(store, args));
}

export function sealedCodeContract(ctx: StoreContext): void {
  describe("sealed authorization codes (redeemed without having been inserted)", () => {
    it("issued once; the same code again replays and revokes the grant with its tokens", async (test) => {
      const store = ctx.store();
      const redeem = sealedRedemption(store);
      if (!redeem) return test.skip();
      const record = code();
      const first = tokens(T0 + 1);
      const result = await redeem(record, T0 + 1, pass, first);
      expect(result).toMatchObject({ status: "issued", code: { ...record, consumedAt: T0 + 1 } });
      expect((await store.getGrant(record.grantId))?.revokedAt).toBeUndefined();
      expect((await accessView(store, first.accessToken.jti, record.grantId))?.grantId).toBe(record.grantId);
      // The row the redemption wrote is what the stored-code path finds too.
      expect(await store.redeemAuthorizationCode(record.codeHash, T0 + 2, pass, tokens(T0 + 2))).toEqual({
        status: "replayed",
      });
      expect((await store.getGrant(record.grantId))?.revokedAt).toBe(T0 + 2);
      expect(await redeem(record, T0 + 3, pass, tokens(T0 + 3))).toEqual({ status: "replayed" });
      expect((await accessView(store, first.accessToken.jti, record.grantId))?.revokedAt).toBe(T0 + 2);
      expect((await store.getRefreshToken(first.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 2);
    });

    it("exactly one of 50 parallel redemptions of one sealed code is issued (the rest replay and revoke)", async (test) => {
      const store = ctx.store();
      if (!sealedRedemption(store)) return test.skip();
      const stores = await ctx.peers(4);
      const record = code();
      const attempts = Array.from({ length: 50 }, (_, i) => {
        const issued = tokens(T0 + 1);
        const peer = stores[i % stores.length]!;
        return { issued, run: peer.redeemSealedAuthorizationCode!(record, T0 + 1, pass, issued) };
      });
      const results = await Promise.all(attempts.map((a) => a.run));
      expect(tally(results)).toEqual({ issued: 1, replayed: 49 });
      for (const [i, attempt] of attempts.entries()) {
        if (results[i]!.status === "issued") continue;
        expect(await store.getAccessToken(attempt.issued.accessToken.jti)).toBeUndefined();
      }
      expect((await store.getGrant(record.grantId))?.revokedAt).toBe(T0 + 1);
    });

    it("refused by the checks: consumed all the same, so the next attempt replays", async (test) => {
      const store = ctx.store();
      const redeem = sealedRedemption(store);
      if (!redeem) return test.skip();
      const record = code();
      const refusal = new OAuthError("invalid_grant", { description: "PKCE verification failed" });
      const refused = await redeem(record, T0 + 1, () => refusal, tokens(T0 + 1));
      expect(refused).toEqual({ status: "refused", error: refusal });
      expect(await redeem(record, T0 + 2, pass, tokens(T0 + 2))).toEqual({ status: "replayed" });
      expect(await store.getGrant(record.grantId)).toBeUndefined();
    });

    it("a throw inside the redemption writes nothing: the code redeems afterwards", async (test) => {
      const store = ctx.store();
      const redeem = sealedRedemption(store);
      if (!redeem) return test.skip();
      const record = code();
      const crash = () => {
        throw new Error("check crashed");
      };
      await expect(redeem(record, T0 + 1, crash, tokens(T0 + 1))).rejects.toThrow("check crashed");
      expect(await store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1))).toEqual({
        status: "not_found",
      });
      expect((await redeem(record, T0 + 2, pass, tokens(T0 + 2))).status).toBe("issued");
    });

    it("expired: nothing is checked or written", async (test) => {
      const store = ctx.store();
      const redeem = sealedRedemption(store);
      if (!redeem) return test.skip();
      const record: AuthorizationCodeRecord = code({ createdAt: T0, expiresAt: T0 + MINUTE });
      const issued = tokens(T0 + MINUTE);
      const never = () => {
        throw new Error("check must not run on an expired code");
      };
      expect(await redeem(record, T0 + MINUTE, never, issued)).toEqual({ status: "expired" });
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect(await store.redeemAuthorizationCode(record.codeHash, T0, pass, tokens(T0))).toEqual({
        status: "not_found",
      });
      expect((await store.purgeExpired(T0 + MINUTE)).codes).toBe(0);
    });

    it("a consumedAt on the record given is ignored: the store decides consumption", async (test) => {
      const store = ctx.store();
      const redeem = sealedRedemption(store);
      if (!redeem) return test.skip();
      const record = { ...code(), consumedAt: T0 };
      expect((await redeem(record, T0 + 1, pass, tokens(T0 + 1))).status).toBe("issued");
    });
  });
}
