/**
 * Contract: RFC 8628 device authorizations. The verification page finds a pending authorization by
 * its user code and decides it once; the device polls with its device code, is told to slow down
 * when it polls sooner than its interval (RFC 8628 §3.5), and the one poll that finds it approved
 * consumes it and writes the grant with its tokens, atomically, across instances.
 */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type { DeviceAuthorizationRecord } from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { accessView, writesNoAccessRows } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { deviceAuthorization, id, issueGrant, MINUTE, secret, T0, tally, tokens } from "./fixtures.js";

const SECOND = 1000;

/** The approval most tests give: fewer scopes than requested, a session, refresh allowed. */
function approval(overrides: { refreshAllowed?: boolean; sessionHash?: string } = {}) {
  return {
    approved: true as const,
    userId: id("user"),
    approvedScopes: ["mcp:read", "offline_access"],
    sessionHash: secret().hash,
    refreshAllowed: true,
    ...overrides,
  };
}

const refuse = () => new OAuthError("invalid_grant", { description: "refused by the test" });
const never = (): never => {
  throw new Error("tokens must not be called");
};

export function deviceContract(ctx: StoreContext): void {
  describe("device authorizations: verification page", () => {
    it("finds a pending authorization by user code hash, with every field", async () => {
      const store = ctx.store();
      const record = deviceAuthorization({ dpopJkt: secret().hash, lastPolledAt: T0 + 1 });
      await store.createDeviceAuthorization(record);
      expect(await store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toStrictEqual(record);
      // Hashes only: neither the device code hash nor another record's hash finds it.
      expect(await store.getDeviceAuthorizationByUserCode(record.deviceCodeHash, T0)).toBeUndefined();
      expect(await store.getDeviceAuthorizationByUserCode(secret().hash, T0)).toBeUndefined();
    });

    it("does not return it once expired, nor once decided", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      expect(
        await store.getDeviceAuthorizationByUserCode(record.userCodeHash, record.expiresAt - 1),
      ).toBeDefined();
      expect(
        await store.getDeviceAuthorizationByUserCode(record.userCodeHash, record.expiresAt),
      ).toBeUndefined();
      expect(await store.decideDeviceAuthorization(record.userCodeHash, { approved: false }, T0)).toBe(true);
      expect(await store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toBeUndefined();
    });

    it("refuses a second authorization with the same device code hash or user code hash", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      await expect(
        store.createDeviceAuthorization(deviceAuthorization({ deviceCodeHash: record.deviceCodeHash })),
      ).rejects.toBeInstanceOf(StorageConflictError);
      await expect(
        store.createDeviceAuthorization(deviceAuthorization({ userCodeHash: record.userCodeHash })),
      ).rejects.toBeInstanceOf(StorageConflictError);
      expect(await store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toStrictEqual(record);
    });

    it("decides once: approve, then neither a second approval nor a denial changes it", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      const decision = approval();
      expect(await store.decideDeviceAuthorization(record.userCodeHash, decision, T0 + 1)).toBe(true);
      expect(await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0 + 2)).toBe(false);
      expect(await store.decideDeviceAuthorization(record.userCodeHash, { approved: false }, T0 + 2)).toBe(
        false,
      );
      const result = await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 3, () =>
        tokens(T0 + 3),
      );
      expect(result).toMatchObject({
        status: "issued",
        record: {
          status: "consumed",
          userId: decision.userId,
          approvedScopes: decision.approvedScopes,
          sessionHash: decision.sessionHash,
          refreshAllowed: true,
        },
      });
    });

    it("a denial is final: every later poll answers denied and issues nothing", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      expect(await store.decideDeviceAuthorization(record.userCodeHash, { approved: false }, T0 + 1)).toBe(
        true,
      );
      expect(await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0 + 2)).toBe(false);
      for (const at of [T0 + 3, T0 + 4, T0 + MINUTE]) {
        expect(
          await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, at, never),
        ).toEqual({
          status: "denied",
        });
      }
      expect(await store.getGrant(record.grantId)).toBeUndefined();
    });

    it("cannot decide an expired or unknown authorization", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      expect(await store.decideDeviceAuthorization(record.userCodeHash, approval(), record.expiresAt)).toBe(
        false,
      );
      expect(await store.decideDeviceAuthorization(secret().hash, approval(), T0)).toBe(false);
      expect(await store.decideDeviceAuthorization(record.deviceCodeHash, approval(), T0)).toBe(false);
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 1, never),
      ).toEqual({
        status: "pending",
      });
    });

    it("of 20 concurrent decisions across instances exactly one wins", async () => {
      const stores = await ctx.peers(4);
      const record = deviceAuthorization();
      await ctx.store().createDeviceAuthorization(record);
      const decisions = Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0 ? approval() : { approved: false as const },
      );
      const results = await Promise.all(
        decisions.map((d, i) =>
          stores[i % stores.length]!.decideDeviceAuthorization(record.userCodeHash, d, T0 + 1),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = decisions[results.indexOf(true)]!;
      const polled = await ctx
        .store()
        .pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 2, () => tokens(T0 + 2));
      if (winner.approved) {
        expect(polled).toMatchObject({ status: "issued", grant: { userId: winner.userId } });
      } else {
        expect(polled).toEqual({ status: "denied" });
      }
    });
  });

  describe("device authorizations: polling", () => {
    it("pending, then slow_down for a poll sooner than the interval (+5 s each time), then pending", async () => {
      const store = ctx.store();
      const record = deviceAuthorization({ interval: 5 });
      await store.createDeviceAuthorization(record);
      const poll = (at: number) =>
        store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, at, never);
      const stored = async () => store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0);
      // The first poll has no earlier poll to be too close to.
      expect(await poll(T0 + SECOND)).toEqual({ status: "pending" });
      expect(await stored()).toMatchObject({ interval: 5, lastPolledAt: T0 + SECOND });
      expect(await poll(T0 + 6 * SECOND - 1)).toEqual({ status: "slow_down" });
      expect(await stored()).toMatchObject({ interval: 10, lastPolledAt: T0 + 6 * SECOND - 1 });
      // 9.999 s later is too soon for the raised interval of 10 s.
      expect(await poll(T0 + 16 * SECOND - 2)).toEqual({ status: "slow_down" });
      expect(await stored()).toMatchObject({ interval: 15, lastPolledAt: T0 + 16 * SECOND - 2 });
      // Exactly the interval after the last poll is soon enough.
      expect(await poll(T0 + 31 * SECOND - 2)).toEqual({ status: "pending" });
      expect(await stored()).toMatchObject({ interval: 15, lastPolledAt: T0 + 31 * SECOND - 2 });
    });

    it("another client's poll is not_found and changes nothing: no poll time, no slow_down for the device", async () => {
      const store = ctx.store();
      const record = deviceAuthorization({ interval: 5 });
      await store.createDeviceAuthorization(record);
      // Client ids compare exactly (RFC 6749 §2.2): a case variant or a prefix is another client.
      const others = [id("client"), record.clientId.toUpperCase(), record.clientId.slice(0, -1), ""];
      for (const [i, other] of others.entries()) {
        expect(await store.pollDeviceAuthorization(record.deviceCodeHash, other, T0 + i, never)).toEqual({
          status: "not_found",
        });
      }
      expect(await store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toStrictEqual(record);
      // The device itself, polling right after, is neither slowed down nor told its interval grew.
      const own = (at: number) =>
        store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, at, never);
      expect(await own(T0 + others.length)).toEqual({ status: "pending" });
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, others[0]!, T0 + SECOND, never),
      ).toEqual({
        status: "not_found",
      });
      expect(await own(T0 + others.length + 5 * SECOND)).toEqual({ status: "pending" });
      expect(await store.getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toMatchObject({
        interval: 5,
        lastPolledAt: T0 + others.length + 5 * SECOND,
      });
    });

    it("another client's poll is not_found in every state: it learns nothing, spends nothing, issues nothing", async () => {
      const store = ctx.store();
      const other = id("client");
      const approved = deviceAuthorization();
      const denied = deviceAuthorization();
      const consumed = deviceAuthorization();
      const expired = deviceAuthorization({ expiresAt: T0 + MINUTE });
      for (const r of [approved, denied, consumed, expired]) await store.createDeviceAuthorization(r);
      await store.decideDeviceAuthorization(approved.userCodeHash, approval(), T0);
      await store.decideDeviceAuthorization(consumed.userCodeHash, approval(), T0);
      await store.decideDeviceAuthorization(denied.userCodeHash, { approved: false }, T0);
      const consumedGrant = await store.pollDeviceAuthorization(
        consumed.deviceCodeHash,
        consumed.clientId,
        T0 + 1,
        () => tokens(T0 + 1),
      );
      expect(consumedGrant.status).toBe("issued");
      const at = T0 + 2 * MINUTE;
      for (const r of [approved, denied, consumed]) {
        expect(await store.pollDeviceAuthorization(r.deviceCodeHash, other, T0 + 2, never)).toEqual({
          status: "not_found",
        });
      }
      expect(await store.pollDeviceAuthorization(expired.deviceCodeHash, other, at, never)).toEqual({
        status: "not_found",
      });
      // The approval is still there for its own client, untouched: no poll time was written.
      expect(await store.getGrant(approved.grantId)).toBeUndefined();
      let seen: DeviceAuthorizationRecord | undefined;
      const issued = await store.pollDeviceAuthorization(
        approved.deviceCodeHash,
        approved.clientId,
        T0 + 3,
        (r) => {
          seen = r;
          return tokens(T0 + 3);
        },
      );
      expect(issued.status).toBe("issued");
      expect(seen?.status).toBe("approved");
      expect(seen).not.toHaveProperty("lastPolledAt");
      expect(
        await store.pollDeviceAuthorization(denied.deviceCodeHash, denied.clientId, T0 + 3, never),
      ).toEqual({
        status: "denied",
      });
      expect(
        await store.pollDeviceAuthorization(consumed.deviceCodeHash, consumed.clientId, T0 + 3, never),
      ).toEqual({
        status: "consumed",
      });
      expect((await store.getGrant(consumed.grantId))?.revokedAt).toBeUndefined();
      expect(
        await store.pollDeviceAuthorization(expired.deviceCodeHash, expired.clientId, at, never),
      ).toEqual({
        status: "expired",
      });
    });

    it("of 20 concurrent polls across instances by other clients, none slows down the device's own poll", async () => {
      const record = deviceAuthorization();
      await ctx.store().createDeviceAuthorization(record);
      const stores = await ctx.peers(3);
      const results = await Promise.all([
        ...Array.from({ length: 20 }, (_, i) =>
          stores[i % stores.length]!.pollDeviceAuthorization(
            record.deviceCodeHash,
            id("client"),
            T0 + 1,
            never,
          ),
        ),
        stores[0]!.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 1, never),
      ]);
      expect(tally(results)).toEqual({ not_found: 20, pending: 1 });
      expect(await ctx.store().getDeviceAuthorizationByUserCode(record.userCodeHash, T0)).toStrictEqual({
        ...record,
        lastPolledAt: T0 + 1,
      });
    });

    it("approved: issues once, consuming the authorization and writing grant, access and refresh tokens", async () => {
      const store = ctx.store();
      const record = deviceAuthorization({ dpopJkt: secret().hash });
      await store.createDeviceAuthorization(record);
      const decision = approval();
      await store.decideDeviceAuthorization(record.userCodeHash, decision, T0 + SECOND);
      const issued = tokens(T0 + 10 * SECOND);
      let seen: DeviceAuthorizationRecord | undefined;
      const result = await store.pollDeviceAuthorization(
        record.deviceCodeHash,
        record.clientId,
        T0 + 10 * SECOND,
        (r) => {
          seen = r;
          return issued;
        },
      );
      const approved: DeviceAuthorizationRecord = {
        ...record,
        status: "approved",
        userId: decision.userId,
        approvedScopes: decision.approvedScopes,
        sessionHash: decision.sessionHash,
        refreshAllowed: true,
      };
      expect(seen).toStrictEqual(approved);
      const grant = {
        grantId: record.grantId,
        clientId: record.clientId,
        userId: decision.userId,
        scopes: decision.approvedScopes,
        resource: record.resource,
        createdAt: T0 + 10 * SECOND,
        expiresAt: issued.grantExpiresAt,
        sessionHash: decision.sessionHash,
        dpopJkt: record.dpopJkt,
      };
      expect(result).toStrictEqual({
        status: "issued",
        record: { ...approved, status: "consumed", lastPolledAt: T0 + 10 * SECOND },
        grant,
        refreshIssued: true,
      });
      expect(await store.getGrant(record.grantId)).toStrictEqual(grant);
      expect(await store.getAccessToken(issued.accessToken.jti)).toStrictEqual(
        writesNoAccessRows(store)
          ? undefined
          : {
              ...issued.accessToken,
              grantId: record.grantId,
              clientId: record.clientId,
              userId: decision.userId,
              scopes: decision.approvedScopes,
              resource: record.resource,
            },
      );
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toStrictEqual({
        ...issued.refreshToken,
        grantId: record.grantId,
        clientId: record.clientId,
        scopes: decision.approvedScopes,
      });
      // A second redemption finds it consumed; tokens is not called and the grant stays live.
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 20 * SECOND, never),
      ).toEqual({
        status: "consumed",
      });
      expect((await store.getGrant(record.grantId))?.revokedAt).toBeUndefined();
    });

    it("approved without refresh: no refresh token is written even when tokens brings one", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      await store.decideDeviceAuthorization(record.userCodeHash, approval({ refreshAllowed: false }), T0);
      const issued = tokens(T0 + 1);
      const result = await store.pollDeviceAuthorization(
        record.deviceCodeHash,
        record.clientId,
        T0 + 1,
        () => issued,
      );
      expect(result).toMatchObject({ status: "issued", refreshIssued: false });
      expect(await store.getRefreshToken(issued.refreshToken!.tokenHash)).toBeUndefined();
      expect(await accessView(store, issued.accessToken.jti, record.grantId)).toBeDefined();
    });

    it("an approved poll is not slowed down: the grant is issued even right after the last poll", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 1, never),
      ).toEqual({
        status: "pending",
      });
      await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0 + 2);
      const result = await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 3, () =>
        tokens(T0 + 3),
      );
      expect(result.status).toBe("issued");
    });

    it("refused by tokens: the authorization is consumed and nothing is issued", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0);
      const error = refuse();
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 1, () => error),
      ).toEqual({
        status: "refused",
        error,
      });
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect(
        await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 2, never),
      ).toEqual({
        status: "consumed",
      });
    });

    it("a failure inside the poll rolls back: the authorization stays approved", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0);
      await expect(
        store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 1, () => {
          throw new Error("tokens crashed");
        }),
      ).rejects.toThrow("tokens crashed");
      // A write that fails after the row was touched: the refresh token hash is already taken (no
      // access-token id can clash: a store of contract version 2 writes none).
      const other = await issueGrant(store);
      const clash = { ...tokens(T0 + 2), refreshToken: other.issued.refreshToken! };
      await expect(
        store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 2, () => clash),
      ).rejects.toBeInstanceOf(StorageConflictError);
      expect(await store.getGrant(record.grantId)).toBeUndefined();
      expect((await store.getRefreshToken(clash.refreshToken.tokenHash))?.grantId).toBe(other.grantId);
      const result = await store.pollDeviceAuthorization(record.deviceCodeHash, record.clientId, T0 + 3, () =>
        tokens(T0 + 3),
      );
      expect(result.status).toBe("issued");
    });

    it("expired: at or past expiresAt every state answers expired and tokens is not called", async () => {
      const store = ctx.store();
      const pending = deviceAuthorization();
      const approved = deviceAuthorization();
      await store.createDeviceAuthorization(pending);
      await store.createDeviceAuthorization(approved);
      await store.decideDeviceAuthorization(approved.userCodeHash, approval(), T0);
      for (const record of [pending, approved]) {
        expect(
          await store.pollDeviceAuthorization(
            record.deviceCodeHash,
            record.clientId,
            record.expiresAt,
            never,
          ),
        ).toEqual({
          status: "expired",
        });
      }
      expect(await store.getGrant(approved.grantId)).toBeUndefined();
    });

    it("not_found: an unknown device code hash, or a user code hash passed as one", async () => {
      const store = ctx.store();
      const record = deviceAuthorization();
      await store.createDeviceAuthorization(record);
      expect(await store.pollDeviceAuthorization(secret().hash, record.clientId, T0, never)).toEqual({
        status: "not_found",
      });
      expect(await store.pollDeviceAuthorization(record.userCodeHash, record.clientId, T0, never)).toEqual({
        status: "not_found",
      });
    });

    it("the grant is bound to the key the token endpoint names, else to the device request's key, else none", async () => {
      const store = ctx.store();
      const bound = deviceAuthorization({ dpopJkt: secret().hash });
      const unbound = deviceAuthorization();
      const named = deviceAuthorization();
      for (const record of [bound, unbound, named]) {
        await store.createDeviceAuthorization(record);
        await store.decideDeviceAuthorization(record.userCodeHash, approval(), T0);
      }
      const pollKey = secret().hash;
      await store.pollDeviceAuthorization(bound.deviceCodeHash, bound.clientId, T0 + 1, () => tokens(T0 + 1));
      await store.pollDeviceAuthorization(unbound.deviceCodeHash, unbound.clientId, T0 + 1, () =>
        tokens(T0 + 1),
      );
      await store.pollDeviceAuthorization(named.deviceCodeHash, named.clientId, T0 + 1, () => ({
        ...tokens(T0 + 1),
        grantDpopJkt: pollKey,
      }));
      expect((await store.getGrant(bound.grantId))?.dpopJkt).toBe(bound.dpopJkt);
      const unboundGrant = await store.getGrant(unbound.grantId);
      expect(unboundGrant).toBeDefined();
      expect(unboundGrant).not.toHaveProperty("dpopJkt");
      expect((await store.getGrant(named.grantId))?.dpopJkt).toBe(pollKey);
    });

    it("of 30 concurrent polls of an approved authorization across instances exactly one issues", async () => {
      const stores = await ctx.peers(4);
      const record = deviceAuthorization();
      await ctx.store().createDeviceAuthorization(record);
      await ctx.store().decideDeviceAuthorization(record.userCodeHash, approval(), T0);
      const attempts = Array.from({ length: 30 }, (_, i) => {
        const issued = tokens(T0 + 1);
        return {
          issued,
          run: stores[i % stores.length]!.pollDeviceAuthorization(
            record.deviceCodeHash,
            record.clientId,
            T0 + 1,
            () => issued,
          ),
        };
      });
      const results = await Promise.all(attempts.map((a) => a.run));
      expect(tally(results)).toEqual({ issued: 1, consumed: 29 });
      for (const [i, attempt] of attempts.entries()) {
        const jti = attempt.issued.accessToken.jti;
        if (results[i]!.status === "issued") {
          expect((await accessView(ctx.store(), jti, record.grantId))?.grantId).toBe(record.grantId);
        } else {
          expect(await ctx.store().getAccessToken(jti)).toBeUndefined();
        }
      }
    });

    it("of 30 concurrent polls of a pending authorization at one instant, one is pending and the rest slow down", async () => {
      const stores = await ctx.peers(4);
      const record = deviceAuthorization({ interval: 5 });
      await ctx.store().createDeviceAuthorization(record);
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          stores[i % stores.length]!.pollDeviceAuthorization(
            record.deviceCodeHash,
            record.clientId,
            T0 + 1,
            never,
          ),
        ),
      );
      expect(tally(results)).toEqual({ pending: 1, slow_down: 29 });
      // Every slow_down raised the interval: none was lost to a race.
      expect((await ctx.store().getDeviceAuthorizationByUserCode(record.userCodeHash, T0))?.interval).toBe(
        5 + 29 * 5,
      );
    });

    it("purgeExpired removes expired authorizations whatever their state, and frees their user code", async () => {
      const store = ctx.store();
      const consumed = deviceAuthorization();
      const denied = deviceAuthorization();
      const live = deviceAuthorization({ expiresAt: T0 + 20 * MINUTE });
      for (const record of [consumed, denied, live]) await store.createDeviceAuthorization(record);
      await store.decideDeviceAuthorization(consumed.userCodeHash, approval(), T0);
      await store.pollDeviceAuthorization(consumed.deviceCodeHash, consumed.clientId, T0 + 1, () =>
        tokens(T0 + 1),
      );
      await store.decideDeviceAuthorization(denied.userCodeHash, { approved: false }, T0);
      const purged = await store.purgeExpired(T0 + 10 * MINUTE);
      expect(purged.deviceAuthorizations).toBe(2);
      // The grant the consumed one created is live and stays.
      expect(purged.grants).toBe(0);
      expect(await store.getGrant(consumed.grantId)).toBeDefined();
      expect(
        await store.pollDeviceAuthorization(
          consumed.deviceCodeHash,
          consumed.clientId,
          T0 + 10 * MINUTE,
          never,
        ),
      ).toEqual({
        status: "not_found",
      });
      expect(await store.getDeviceAuthorizationByUserCode(live.userCodeHash, T0 + 10 * MINUTE)).toStrictEqual(
        live,
      );
      await store.createDeviceAuthorization(deviceAuthorization({ userCodeHash: denied.userCodeHash }));
    });
  });
}
