/**
 * src/storage/rules.ts: the judgements every backend acts on. Here the code-redemption, device
 * decision and poll judgements, the writes each verdict carries, and the marker key bound on their
 * own (the contract suite then pins that memory, SQLite and PostgreSQL run those writes alike).
 */

import { describe, expect, it } from "vitest";
import { GatehouseTypeError, OAuthError } from "../../src/shared/errors.js";
import type { AuthorizationCodeRecord } from "../../src/storage/contract.js";
import {
  assertMarkerKey,
  authorizationCodeState,
  decideDevice,
  judgeAuthorizationCode,
  judgeDevicePoll,
  judgeRefreshToken,
  judgeUnclaimedCode,
} from "../../src/storage/rules.js";
import { code, DAY, deviceAuthorization, MINUTE, T0, tokens } from "../../src/storage/testing/fixtures.js";

/** A check that passes every code and records each one it is given. */
function recorder() {
  const calls: AuthorizationCodeRecord[] = [];
  return {
    calls,
    check: (c: AuthorizationCodeRecord) => {
      calls.push(c);
      return undefined;
    },
  };
}

describe("authorizationCodeState", () => {
  it("consumed is judged before expired; a code dies at the very millisecond of expiresAt", () => {
    const record = code({ expiresAt: T0 + MINUTE });
    expect(authorizationCodeState(record, T0 + MINUTE - 1)).toBe("live");
    expect(authorizationCodeState(record, T0 + MINUTE)).toBe("expired");
    expect(authorizationCodeState({ ...record, consumedAt: T0 + 1 }, T0 + 2)).toBe("consumed");
    expect(authorizationCodeState({ ...record, consumedAt: T0 + 1 }, T0 + DAY)).toBe("consumed");
  });
});

describe("judgeAuthorizationCode", () => {
  it("a second use, even after expiry, is a replay; neither check nor tokens run", () => {
    const seen = recorder();
    const record = code({ consumedAt: T0 + 1000 });
    for (const held of ["row", "sealed", "claimed"] as const) {
      const verdict = judgeAuthorizationCode(
        record,
        T0 + DAY,
        seen.check,
        (c) => {
          seen.calls.push(c);
          return tokens(T0);
        },
        held,
      );
      expect(verdict).toEqual({
        writes: [{ op: "revokeGrant", grantId: record.grantId, now: T0 + DAY }],
        result: { status: "replayed" },
      });
    }
    expect(seen.calls).toEqual([]);
  });

  it("an expired code is expired; neither check nor tokens run", () => {
    const seen = recorder();
    const verdict = judgeAuthorizationCode(
      code(),
      T0 + MINUTE,
      seen.check,
      (c) => {
        seen.calls.push(c);
        return tokens(T0);
      },
      "row",
    );
    expect(verdict).toEqual({ writes: [], result: { status: "expired" } });
    expect(seen.calls).toEqual([]);
  });

  it("refused: check's error is the verdict, the code is spent as it is held, tokens are never resolved", () => {
    const error = new OAuthError("invalid_grant", { description: "PKCE verification failed" });
    let resolved = false;
    const record = code();
    const judge = (held: "row" | "sealed" | "claimed") =>
      judgeAuthorizationCode(
        record,
        T0 + 1000,
        () => error,
        () => {
          resolved = true;
          return tokens(T0);
        },
        held,
      );
    expect(judge("row")).toEqual({
      writes: [{ op: "markCodeUsed", codeHash: record.codeHash, now: T0 + 1000 }],
      result: { status: "refused", error },
    });
    expect(judge("sealed")).toEqual({
      writes: [{ op: "insertCode", code: { ...record, consumedAt: T0 + 1000 } }],
      result: { status: "refused", error },
    });
    expect(judge("claimed")).toEqual({ writes: [], result: { status: "refused", error } });
    expect(record.consumedAt).toBeUndefined();
    expect(resolved).toBe(false);
  });

  it("issue: the grant the code names, with the lifetime tokens chose for this code", () => {
    const record = code({ sessionHash: "session-hash" });
    const issued = tokens(T0 + 1000);
    const seen: AuthorizationCodeRecord[] = [];
    const verdict = judgeAuthorizationCode(
      record,
      T0 + 1000,
      (c) => {
        seen.push(c);
        return undefined;
      },
      (c) => {
        seen.push(c);
        return { ...issued, grantExpiresAt: T0 + 7 * DAY };
      },
      "row",
    );
    expect(seen).toEqual([record, record]);
    const grant = {
      grantId: record.grantId,
      clientId: record.clientId,
      userId: record.userId,
      scopes: record.scopes,
      resource: record.resource,
      createdAt: T0 + 1000,
      expiresAt: T0 + 7 * DAY,
      sessionHash: "session-hash",
    };
    const forGrant = { grantId: record.grantId, clientId: record.clientId, scopes: record.scopes };
    expect(verdict).toEqual({
      writes: [
        { op: "markCodeUsed", codeHash: record.codeHash, now: T0 + 1000 },
        { op: "insertGrant", grant },
        // No access-token row (contract version 2): the token is judged by its grant.
        { op: "insertRefreshToken", token: { ...issued.refreshToken, ...forGrant } },
      ],
      result: {
        status: "issued",
        code: { ...record, consumedAt: T0 + 1000 },
        grant,
        refreshIssued: true,
      },
    });
    if (verdict.result.status === "issued") expect(verdict.result.grant.scopes).not.toBe(record.scopes);
  });

  it("issue without refresh allowed writes no refresh token; a claimed code writes no consumption", () => {
    const record = code({ refreshAllowed: false });
    const verdict = judgeAuthorizationCode(record, T0 + 1000, () => undefined, tokens(T0), "claimed");
    expect(verdict.writes.map((w) => w.op)).toEqual(["insertGrant"]);
    expect(verdict.result).toMatchObject({ status: "issued", refreshIssued: false });
  });

  it("a throw from check or tokens propagates: there is no verdict to act on", () => {
    const boom = () => {
      throw new Error("boom");
    };
    expect(() => judgeAuthorizationCode(code(), T0 + 1000, boom, tokens(T0), "row")).toThrow("boom");
    expect(() => judgeAuthorizationCode(code(), T0 + 1000, () => undefined, boom, "row")).toThrow("boom");
  });
});

describe("judgeUnclaimedCode", () => {
  it("consumed is a replay that revokes the first redemption's grant; anything else is expired and writes nothing", () => {
    const consumed = code({ consumedAt: T0 + 1 });
    expect(judgeUnclaimedCode(consumed, T0 + 2)).toEqual({
      writes: [{ op: "revokeGrant", grantId: consumed.grantId, now: T0 + 2 }],
      result: { status: "replayed" },
    });
    expect(judgeUnclaimedCode(code(), T0 + MINUTE)).toEqual({ writes: [], result: { status: "expired" } });
    // A row inserted after the claim ran reads live: this request does not redeem it.
    expect(judgeUnclaimedCode(code(), T0 + 1)).toEqual({ writes: [], result: { status: "expired" } });
  });
});

describe("judgeDevicePoll", () => {
  const issue = () => tokens(T0);

  it("another client is judged before anything, whatever the state: not_found, and tokens never runs", () => {
    const never = () => {
      throw new Error("tokens must not run for another client");
    };
    for (const status of ["pending", "approved", "denied", "consumed"] as const) {
      const record = deviceAuthorization({ status, userId: "u", approvedScopes: ["mcp:read"] });
      for (const at of [T0 + 1, record.expiresAt]) {
        expect(judgeDevicePoll(record, `${record.clientId}x`, at, never)).toEqual({
          writes: [],
          result: { status: "not_found" },
        });
        expect(judgeDevicePoll(record, record.clientId.toUpperCase(), at, never)).toEqual({
          writes: [],
          result: { status: "not_found" },
        });
      }
    }
    const pending = deviceAuthorization({ lastPolledAt: T0 });
    expect(judgeDevicePoll(pending, "another", T0 + 1, never)).toEqual({
      writes: [],
      result: { status: "not_found" },
    });
    expect(judgeDevicePoll(pending, pending.clientId, T0 + 1, never).result.status).toBe("slow_down");
  });

  it("expired is judged first for the right client, whatever the state; a record dies at the millisecond of expiresAt", () => {
    for (const status of ["pending", "approved", "denied", "consumed"] as const) {
      const record = deviceAuthorization({ status, userId: "u", approvedScopes: ["mcp:read"] });
      expect(judgeDevicePoll(record, record.clientId, record.expiresAt, issue)).toEqual({
        writes: [],
        result: { status: "expired" },
      });
    }
    for (const status of ["denied", "consumed"] as const) {
      const record = deviceAuthorization({ status, userId: "u" });
      expect(judgeDevicePoll(record, record.clientId, T0 + 1, issue)).toEqual({
        writes: [],
        result: { status },
      });
    }
    const record = deviceAuthorization();
    expect(judgeDevicePoll(record, record.clientId, record.expiresAt - 1, issue).result.status).toBe(
      "pending",
    );
  });

  it("slow_down when sooner than the interval after the last poll, also for a clock behind the last poll", () => {
    const record = deviceAuthorization({ interval: 5, lastPolledAt: T0 + 10_000 });
    expect(judgeDevicePoll(record, record.clientId, T0 + 14_999, issue)).toEqual({
      writes: [{ op: "updateDevice", record: { ...record, interval: 10, lastPolledAt: T0 + 14_999 } }],
      result: { status: "slow_down" },
    });
    expect(judgeDevicePoll(record, record.clientId, T0 + 9_000, issue).result).toEqual({
      status: "slow_down",
    });
    expect(judgeDevicePoll(record, record.clientId, T0 + 15_000, issue)).toEqual({
      writes: [{ op: "updateDevice", record: { ...record, lastPolledAt: T0 + 15_000 } }],
      result: { status: "pending" },
    });
  });

  it("tokens runs only for an approved record, on a copy; an OAuthError refuses and consumes", () => {
    const calls: unknown[] = [];
    const record = deviceAuthorization({
      status: "approved",
      userId: "u",
      approvedScopes: ["mcp:read"],
      refreshAllowed: false,
    });
    const error = new OAuthError("invalid_grant");
    const verdict = judgeDevicePoll(record, record.clientId, T0 + 1, (r) => {
      calls.push(r);
      r.approvedScopes!.push("mcp:admin");
      return error;
    });
    expect(verdict).toEqual({
      writes: [{ op: "updateDevice", record: { ...record, status: "consumed", lastPolledAt: T0 + 1 } }],
      result: { status: "refused", error },
    });
    expect(record.approvedScopes).toEqual(["mcp:read"]);
    for (const status of ["pending", "denied", "consumed"] as const) {
      judgeDevicePoll(deviceAuthorization({ status, clientId: "c" }), "c", T0 + 1, (r) => {
        calls.push(r);
        return issue();
      });
    }
    expect(calls).toHaveLength(1);
  });

  it("issues the approved scopes to the grant, bound to grantDpopJkt before the record's key", () => {
    const record = deviceAuthorization({
      status: "approved",
      userId: "u",
      approvedScopes: ["mcp:read"],
      refreshAllowed: true,
      dpopJkt: "record-key",
    });
    const bound = judgeDevicePoll(record, record.clientId, T0 + 1, () => ({
      ...tokens(T0),
      grantDpopJkt: "poll-key",
    }));
    expect(bound.result).toMatchObject({
      status: "issued",
      grant: { scopes: ["mcp:read"], dpopJkt: "poll-key" },
      record: { status: "consumed", lastPolledAt: T0 + 1 },
      refreshIssued: true,
    });
    expect(bound.writes.map((w) => w.op)).toEqual(["updateDevice", "insertGrant", "insertRefreshToken"]);
    expect(judgeDevicePoll(record, record.clientId, T0 + 1, issue).result).toMatchObject({
      grant: { dpopJkt: "record-key" },
    });
    const noRefresh = judgeDevicePoll({ ...record, refreshAllowed: false }, record.clientId, T0 + 1, issue);
    expect(noRefresh.writes.map((w) => w.op)).toEqual(["updateDevice", "insertGrant"]);
    expect(noRefresh.result).toMatchObject({ status: "issued", refreshIssued: false });
  });
});

describe("judgeRefreshToken", () => {
  const grant = {
    grantId: "g",
    clientId: "c",
    userId: "u",
    scopes: ["mcp:read", "offline_access"],
    resource: "https://mcp.example/mcp",
    createdAt: T0,
    expiresAt: T0 + 90 * DAY,
  };
  const live = {
    tokenHash: "t1",
    grantId: "g",
    clientId: "c",
    scopes: ["mcp:read", "offline_access"],
    createdAt: T0,
    expiresAt: T0 + 30 * DAY,
  };
  const pass = () => ({});

  it("reuse outside the window writes the revocation of the whole grant, and nothing else", () => {
    const rotated = { ...live, rotatedAt: T0 + 1000 };
    expect(judgeRefreshToken(rotated, grant, T0 + 1000 + 30_000, 30_000, pass, tokens(T0))).toEqual({
      writes: [{ op: "revokeGrant", grantId: "g", now: T0 + 31_000 }],
      result: { status: "reused" },
    });
    // Inside the window with no successor used: rotated again, its first rotation time kept.
    const sibling = judgeRefreshToken(rotated, grant, T0 + 2000, 30_000, pass, tokens(T0 + 2000));
    expect(sibling.result.status).toBe("issued");
    expect(sibling.writes[0]).toEqual({ op: "markRotated", tokenHash: "t1", rotatedAt: T0 + 1000 });
  });

  it("revoked, expired and refused write nothing", () => {
    const error = new OAuthError("invalid_grant");
    expect(judgeRefreshToken({ ...live, revokedAt: T0 }, grant, T0 + 1, 0, pass, tokens(T0))).toEqual({
      writes: [],
      result: { status: "revoked" },
    });
    expect(judgeRefreshToken(live, grant, live.expiresAt, 0, pass, tokens(T0))).toEqual({
      writes: [],
      result: { status: "expired" },
    });
    expect(judgeRefreshToken(live, grant, T0 + 1, 0, () => ({ error }), tokens(T0))).toEqual({
      writes: [],
      result: { status: "refused", error },
    });
  });

  it("issued: marks the token rotated, the parent's successor used, and writes the new tokens", () => {
    const child = { ...live, tokenHash: "t2", rotatedFrom: "t1" };
    const issued = tokens(T0 + 5);
    const verdict = judgeRefreshToken(child, grant, T0 + 5, 0, () => ({ scopes: ["mcp:read"] }), issued);
    expect(verdict.writes).toEqual([
      { op: "markRotated", tokenHash: "t2", rotatedAt: T0 + 5 },
      { op: "markSuccessorUsed", tokenHash: "t1", now: T0 + 5 },
      {
        op: "insertRefreshToken",
        token: {
          ...issued.refreshToken,
          grantId: "g",
          clientId: "c",
          scopes: ["mcp:read"],
          rotatedFrom: "t2",
        },
      },
    ]);
    expect(verdict.result).toEqual({
      status: "issued",
      old: { ...child, rotatedAt: T0 + 5 },
      grant,
      scopes: ["mcp:read"],
    });
    // Without a successor the old token is not marked rotated: it stays usable.
    const kept = judgeRefreshToken(live, grant, T0 + 5, 0, pass, tokens(T0 + 5, { refresh: false }));
    expect(kept.writes.map((w) => w.op)).toEqual([]);
    expect(kept.result).toMatchObject({ status: "issued", old: live });
  });
});

describe("decideDevice", () => {
  it("decides a pending, unexpired record only", () => {
    const record = deviceAuthorization();
    expect(decideDevice(record, { approved: false }, T0)).toEqual({ ...record, status: "denied" });
    expect(decideDevice(record, { approved: false }, record.expiresAt)).toBeUndefined();
    for (const status of ["approved", "denied", "consumed"] as const) {
      expect(decideDevice({ ...record, status }, { approved: false }, T0)).toBeUndefined();
    }
    const approved = decideDevice(
      record,
      { approved: true, userId: "u", approvedScopes: ["a"], refreshAllowed: false },
      T0,
    );
    expect(approved).toEqual({
      ...record,
      status: "approved",
      userId: "u",
      approvedScopes: ["a"],
      refreshAllowed: false,
    });
  });
});

describe("assertMarkerKey", () => {
  it("accepts 1 to 512 UTF-16 code units without U+0000, and refuses the rest as misuse", () => {
    expect(() => assertMarkerKey("k")).not.toThrow();
    expect(() => assertMarkerKey("k".repeat(512))).not.toThrow();
    for (const key of ["", "k".repeat(513), "a\u0000"]) {
      expect(() => assertMarkerKey(key)).toThrow(GatehouseTypeError);
    }
  });
});
