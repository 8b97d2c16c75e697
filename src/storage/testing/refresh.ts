/** Contract: refresh token rotation (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2). */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../shared/errors.js";
import type { GrantRecord, RefreshTokenRecord } from "../contract.js";
import { accessView, writesNoAccessRows } from "./access-tokens.js";
import type { StoreContext } from "./context.js";
import { DAY, issueGrant, MINUTE, secret, T0, tally, tokens } from "./fixtures.js";

const keep = () => ({});

/**
 * `count` rotations of one token at once, spread over several instances of the store where the
 * backend has them (`graceMs` as the store is given it); the tokens each would write, and the answers.
 */
async function parallelRotations(ctx: StoreContext, tokenHash: string, count: number, graceMs?: number) {
  const stores = await ctx.peers(4);
  const attempts = Array.from({ length: count }, () => tokens(T0 + 1));
  const results = await Promise.all(
    attempts.map((next, i) =>
      stores[i % stores.length]!.rotateRefreshToken(tokenHash, T0 + 1, keep, next, graceMs),
    ),
  );
  return attempts.map((next, i) => ({ next, result: results[i]! }));
}

export function refreshContract(ctx: StoreContext): void {
  describe("refresh token rotation", () => {
    it("issued: the old token is marked rotated, the new one is stored and usable", async () => {
      const store = ctx.store();
      const { code, issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const next = tokens(T0 + MINUTE);
      let seen: [RefreshTokenRecord, GrantRecord] | undefined;
      const result = await store.rotateRefreshToken(
        oldHash,
        T0 + MINUTE,
        (token, grant) => {
          seen = [token, grant];
          return {};
        },
        next,
      );
      expect(seen?.[0].tokenHash).toBe(oldHash);
      expect(seen?.[0].rotatedAt).toBeUndefined();
      expect(seen?.[1].grantId).toBe(grantId);
      expect(result.status).toBe("issued");
      if (result.status !== "issued") return;
      expect(result.old.tokenHash).toBe(oldHash);
      expect(result.grant.grantId).toBe(grantId);
      expect(result.scopes).toEqual(code.scopes);
      expect((await store.getRefreshToken(oldHash))?.rotatedAt).toBe(T0 + MINUTE);
      expect(await store.getRefreshToken(next.refreshToken!.tokenHash)).toEqual({
        ...next.refreshToken,
        grantId,
        clientId: code.clientId,
        scopes: code.scopes,
        rotatedFrom: oldHash,
      });
      expect(await store.getAccessToken(next.accessToken.jti)).toEqual(
        writesNoAccessRows(store)
          ? undefined
          : {
              ...next.accessToken,
              grantId,
              clientId: code.clientId,
              userId: code.userId,
              scopes: code.scopes,
              resource: code.resource,
            },
      );
      const again = await store.rotateRefreshToken(
        next.refreshToken!.tokenHash,
        T0 + 2 * MINUTE,
        keep,
        tokens(T0),
      );
      expect(again.status).toBe("issued");
    });

    it("narrowed scopes from check go to the new refresh and access tokens", async () => {
      const store = ctx.store();
      const { issued } = await issueGrant(store);
      const next = tokens(T0 + 1);
      const result = await store.rotateRefreshToken(
        issued.refreshToken!.tokenHash,
        T0 + 1,
        () => ({ scopes: ["mcp:read"] }),
        next,
      );
      expect(result.status === "issued" && result.scopes).toEqual(["mcp:read"]);
      expect((await store.getRefreshToken(next.refreshToken!.tokenHash))?.scopes).toEqual(["mcp:read"]);
      expect((await store.getAccessToken(next.accessToken.jti))?.scopes).toEqual(
        writesNoAccessRows(store) ? undefined : ["mcp:read"],
      );
    });

    it("reuse of a rotated token revokes the grant and all its tokens", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const next = tokens(T0 + 1);
      expect((await store.rotateRefreshToken(oldHash, T0 + 1, keep, next)).status).toBe("issued");
      const attacker = tokens(T0 + 2);
      let checked = false;
      const reuse = await store.rotateRefreshToken(
        oldHash,
        T0 + 2,
        () => {
          checked = true;
          return {};
        },
        attacker,
      );
      expect(reuse).toEqual({ status: "reused" });
      expect(checked).toBe(false);
      expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 2);
      expect((await accessView(store, issued.accessToken.jti, grantId))?.revokedAt).toBe(T0 + 2);
      expect((await accessView(store, next.accessToken.jti, grantId))?.revokedAt).toBe(T0 + 2);
      expect((await store.getRefreshToken(next.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 2);
      expect(await store.getAccessToken(attacker.accessToken.jti)).toBeUndefined();
      const legit = await store.rotateRefreshToken(
        next.refreshToken!.tokenHash,
        T0 + 3,
        keep,
        tokens(T0 + 3),
      );
      expect(legit.status).toBe("revoked");
    });

    it("reuse with a clock reading earlier than the rotation still revokes (no grace window)", async () => {
      // A request that read its clock before the rotating request committed, or an instance whose
      // clock lags, sees a negative elapsed time; without a grace window that is reuse all the same.
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      expect((await store.rotateRefreshToken(oldHash, T0 + 5000, keep, tokens(T0 + 5000))).status).toBe(
        "issued",
      );
      const late = await store.rotateRefreshToken(oldHash, T0 + 4000, keep, tokens(T0 + 4000));
      expect(late).toEqual({ status: "reused" });
      expect((await store.getGrant(grantId))?.revokedAt).toBeDefined();
    });

    it("refused by check: nothing changes and the old token stays usable", async () => {
      const store = ctx.store();
      const { issued } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const before = await store.getRefreshToken(oldHash);
      const error = new OAuthError("invalid_scope", { description: "scope wider than the grant" });
      const next = tokens(T0 + 1);
      const result = await store.rotateRefreshToken(oldHash, T0 + 1, () => ({ error }), next);
      expect(result).toEqual({ status: "refused", error });
      expect(await store.getRefreshToken(oldHash)).toEqual(before);
      expect(await store.getRefreshToken(next.refreshToken!.tokenHash)).toBeUndefined();
      expect(await store.getAccessToken(next.accessToken.jti)).toBeUndefined();
      expect((await store.rotateRefreshToken(oldHash, T0 + 2, keep, tokens(T0 + 2))).status).toBe("issued");
    });

    it("a failure inside the rotation rolls back: the old token is not rotated", async () => {
      const store = ctx.store();
      const { issued } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      await expect(
        store.rotateRefreshToken(
          oldHash,
          T0 + 1,
          () => {
            throw new Error("check crashed");
          },
          tokens(T0 + 1),
        ),
      ).rejects.toThrow("check crashed");
      // The new refresh token hash is already taken: the write fails after the old token was read.
      const other = await issueGrant(store);
      const clash = { ...tokens(T0 + 1), refreshToken: other.issued.refreshToken! };
      await expect(store.rotateRefreshToken(oldHash, T0 + 1, keep, clash)).rejects.toThrow();
      expect((await store.getRefreshToken(oldHash))?.rotatedAt).toBeUndefined();
      expect((await store.getRefreshToken(clash.refreshToken.tokenHash))?.grantId).toBe(other.grantId);
      expect((await store.rotateRefreshToken(oldHash, T0 + 2, keep, tokens(T0 + 2))).status).toBe("issued");
    });

    it("grace window: a rotated token presented again within graceMs is honoured, after it revokes", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const grace = 30_000;
      expect(
        (await store.rotateRefreshToken(oldHash, T0 + 1000, keep, tokens(T0 + 1000), grace)).status,
      ).toBe("issued");
      const retry = tokens(T0 + 1000 + grace - 1);
      const within = await store.rotateRefreshToken(oldHash, T0 + 1000 + grace - 1, keep, retry, grace);
      expect(within.status).toBe("issued");
      // The rotation time is the first one, so the window does not slide.
      expect((await store.getRefreshToken(oldHash))?.rotatedAt).toBe(T0 + 1000);
      expect(await store.getRefreshToken(retry.refreshToken!.tokenHash)).toBeDefined();
      const late = await store.rotateRefreshToken(oldHash, T0 + 1000 + grace, keep, tokens(T0), grace);
      expect(late.status).toBe("reused");
      expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 1000 + grace);
    });

    it("grace window: once a successor is used, the rotated token is reuse inside the window too", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const grace = 30_000;
      const next = tokens(T0 + 1000);
      expect((await store.rotateRefreshToken(oldHash, T0 + 1000, keep, next, grace)).status).toBe("issued");
      expect((await store.getRefreshToken(oldHash))?.successorUsedAt).toBeUndefined();
      const hop = tokens(T0 + 2000);
      const moved = await store.rotateRefreshToken(next.refreshToken!.tokenHash, T0 + 2000, keep, hop, grace);
      expect(moved.status).toBe("issued");
      // The successor's first use closed the window of the token it came from.
      expect((await store.getRefreshToken(oldHash))?.successorUsedAt).toBe(T0 + 2000);
      let checked = false;
      const thief = await store.rotateRefreshToken(
        oldHash,
        T0 + 3000,
        () => {
          checked = true;
          return {};
        },
        tokens(T0 + 3000),
        grace,
      );
      expect(thief).toEqual({ status: "reused" });
      expect(checked).toBe(false);
      expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 3000);
      expect((await store.getRefreshToken(hop.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 3000);
    });

    it("grace window: a sibling names the same parent, and its first use closes the parent's window", async () => {
      const store = ctx.store();
      const { issued } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const grace = 30_000;
      const first = tokens(T0 + 1000);
      const sibling = tokens(T0 + 1500);
      expect((await store.rotateRefreshToken(oldHash, T0 + 1000, keep, first, grace)).status).toBe("issued");
      expect((await store.rotateRefreshToken(oldHash, T0 + 1500, keep, sibling, grace)).status).toBe(
        "issued",
      );
      expect((await store.getRefreshToken(sibling.refreshToken!.tokenHash))?.rotatedFrom).toBe(oldHash);
      expect((await store.getRefreshToken(oldHash))?.successorUsedAt).toBeUndefined();
      const onward = tokens(T0 + 1600);
      await store.rotateRefreshToken(sibling.refreshToken!.tokenHash, T0 + 1600, keep, onward, grace);
      expect((await store.getRefreshToken(oldHash))?.successorUsedAt).toBe(T0 + 1600);
      // The other successor is still live: its own chain continues, and its first use keeps the mark.
      expect(
        (
          await store.rotateRefreshToken(
            first.refreshToken!.tokenHash,
            T0 + 1700,
            keep,
            tokens(T0 + 1700),
            grace,
          )
        ).status,
      ).toBe("issued");
      expect((await store.getRefreshToken(oldHash))?.successorUsedAt).toBe(T0 + 1600);
      expect(
        (await store.rotateRefreshToken(oldHash, T0 + 1800, keep, tokens(T0 + 1800), grace)).status,
      ).toBe("reused");
    });

    it("grace window: a rotated token past its idle expiry is expired inside the window, not renewed", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const idle = issued.refreshToken!.expiresAt;
      const grace = 30_000;
      await store.rotateRefreshToken(oldHash, idle - 1000, keep, tokens(idle - 1000), grace);
      const next = tokens(idle);
      expect(await store.rotateRefreshToken(oldHash, idle, keep, next, grace)).toEqual({ status: "expired" });
      expect(await store.getAccessToken(next.accessToken.jti)).toBeUndefined();
      expect((await store.getGrant(grantId))?.revokedAt).toBeUndefined();
    });

    it("grace window: 50 parallel rotations of one token across instances are all issued, none revoked", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const attempts = await parallelRotations(ctx, issued.refreshToken!.tokenHash, 50, 30_000);
      expect(tally(attempts.map((a) => a.result))).toEqual({ issued: 50 });
      expect((await store.getGrant(grantId))?.revokedAt).toBeUndefined();
      // The first rotation's time stays; every successor is stored, live and names the same parent.
      expect((await store.getRefreshToken(issued.refreshToken!.tokenHash))?.rotatedAt).toBe(T0 + 1);
      for (const attempt of attempts) {
        const stored = await store.getRefreshToken(attempt.next.refreshToken!.tokenHash);
        expect(stored?.rotatedFrom).toBe(issued.refreshToken!.tokenHash);
        expect(stored?.revokedAt).toBeUndefined();
      }
    });

    it("without a new refresh token the old one is not rotated", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const oldHash = issued.refreshToken!.tokenHash;
      const next = tokens(T0 + 1, { refresh: false });
      const result = await store.rotateRefreshToken(oldHash, T0 + 1, keep, next);
      expect(result.status).toBe("issued");
      expect((await store.getRefreshToken(oldHash))?.rotatedAt).toBeUndefined();
      expect(await accessView(store, next.accessToken.jti, grantId)).toBeDefined();
    });

    it("expired: idle expiry of the token and absolute expiry of the grant", async () => {
      const store = ctx.store();
      const { issued } = await issueGrant(store);
      const idle = issued.refreshToken!.expiresAt;
      const next = tokens(idle);
      expect(await store.rotateRefreshToken(issued.refreshToken!.tokenHash, idle, keep, next)).toEqual({
        status: "expired",
      });
      expect(await store.getAccessToken(next.accessToken.jti)).toBeUndefined();
      expect((await store.getRefreshToken(issued.refreshToken!.tokenHash))?.rotatedAt).toBeUndefined();

      const live = await issueGrant(store);
      const justBefore = live.issued.refreshToken!.expiresAt - 1;
      const ok = await store.rotateRefreshToken(
        live.issued.refreshToken!.tokenHash,
        justBefore,
        keep,
        tokens(justBefore),
      );
      expect(ok.status).toBe("issued");
    });

    it("a token past the grant's absolute lifetime is expired even when its idle expiry is later", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const grantEnd = (await store.getGrant(grantId))!.expiresAt;
      const next = {
        ...tokens(grantEnd - DAY),
        refreshToken: { tokenHash: secret().hash, createdAt: grantEnd - DAY, expiresAt: grantEnd + 30 * DAY },
      };
      // Walk the token chain to just before the grant ends: rotation at grantEnd - DAY is fine.
      const hop = await store.rotateRefreshToken(issued.refreshToken!.tokenHash, T0 + DAY, keep, next);
      expect(hop.status).toBe("issued");
      const result = await store.rotateRefreshToken(
        next.refreshToken.tokenHash,
        grantEnd,
        keep,
        tokens(grantEnd),
      );
      expect(result).toEqual({ status: "expired" });
    });

    it("revoked and not_found", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      await store.revokeGrant(grantId, T0 + 1);
      expect(
        await store.rotateRefreshToken(issued.refreshToken!.tokenHash, T0 + 2, keep, tokens(T0)),
      ).toEqual({
        status: "revoked",
      });
      expect(await store.rotateRefreshToken(secret().hash, T0, keep, tokens(T0))).toEqual({
        status: "not_found",
      });
    });

    it("strict rotation: of 20 parallel rotations exactly one is issued, then the grant is revoked", async () => {
      const store = ctx.store();
      const { issued, grantId } = await issueGrant(store);
      const attempts = await parallelRotations(ctx, issued.refreshToken!.tokenHash, 20);
      const results = attempts.map((a) => a.result);
      const counts = tally(results);
      // The first loser detects the reuse and revokes the grant; later ones find it revoked.
      expect(counts.issued).toBe(1);
      expect(counts.reused).toBeGreaterThanOrEqual(1);
      expect((counts.reused ?? 0) + (counts.revoked ?? 0)).toBe(19);
      expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 1);
      for (const [i, attempt] of attempts.entries()) {
        const stored = await store.getRefreshToken(attempt.next.refreshToken!.tokenHash);
        if (results[i]!.status === "issued") expect(stored?.revokedAt).toBe(T0 + 1);
        else expect(stored).toBeUndefined();
      }
    });
  });
}
