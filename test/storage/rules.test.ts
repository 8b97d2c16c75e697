/**
 * src/storage/rules.ts: the judgements every backend acts on. Here the code-redemption, device
 * decision and poll judgements and the marker key bound on their own (the contract suite then pins
 * that memory, SQLite and PostgreSQL act on them alike).
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
    const verdict = judgeAuthorizationCode(record, T0 + DAY, seen.check, (c) => {
      seen.calls.push(c);
      return tokens(T0);
    });
    expect(verdict).toEqual({ status: "replayed" });
    expect(seen.calls).toEqual([]);
  });

  it("an expired code is expired; neither check nor tokens run", () => {
    const seen = recorder();
    const verdict = judgeAuthorizationCode(code(), T0 + MINUTE, seen.check, (c) => {
      seen.calls.push(c);
      return tokens(T0);
    });
    expect(verdict).toEqual({ status: "expired" });
    expect(seen.calls).toEqual([]);
  });

  it("refused: check's error is the verdict and tokens are never resolved", () => {
    const error = new OAuthError("invalid_grant", { description: "PKCE verification failed" });
    let resolved = false;
    const verdict = judgeAuthorizationCode(
      code(),
      T0 + 1000,
      () => error,
      () => {
        resolved = true;
        return tokens(T0);
      },
    );
    expect(verdict).toEqual({ status: "refused", error });
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
    );
    expect(seen).toEqual([record, record]);
    expect(verdict).toEqual({
      status: "issue",
      grant: {
        grantId: record.grantId,
        clientId: record.clientId,
        userId: record.userId,
        scopes: record.scopes,
        resource: record.resource,
        createdAt: T0 + 1000,
        expiresAt: T0 + 7 * DAY,
        sessionHash: "session-hash",
      },
      tokens: { ...issued, grantExpiresAt: T0 + 7 * DAY },
    });
    if (verdict.status === "issue") expect(verdict.grant.scopes).not.toBe(record.scopes);
  });

  it("a throw from check or tokens propagates: there is no verdict to act on", () => {
    const boom = () => {
      throw new Error("boom");
    };
    expect(() => judgeAuthorizationCode(code(), T0 + 1000, boom, tokens(T0))).toThrow("boom");
    expect(() => judgeAuthorizationCode(code(), T0 + 1000, () => undefined, boom)).toThrow("boom");
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
        expect(judgeDevicePoll(record, `${record.clientId}x`, at, never)).toEqual({ status: "not_found" });
        expect(judgeDevicePoll(record, record.clientId.toUpperCase(), at, never)).toEqual({
          status: "not_found",
        });
      }
    }
    const pending = deviceAuthorization({ lastPolledAt: T0 });
    expect(judgeDevicePoll(pending, "another", T0 + 1, never)).toEqual({ status: "not_found" });
    expect(judgeDevicePoll(pending, pending.clientId, T0 + 1, never).status).toBe("slow_down");
  });

  it("expired is judged first for the right client, whatever the state; a record dies at the millisecond of expiresAt", () => {
    for (const status of ["pending", "approved", "denied", "consumed"] as const) {
      const record = deviceAuthorization({ status, userId: "u", approvedScopes: ["mcp:read"] });
      expect(judgeDevicePoll(record, record.clientId, record.expiresAt, issue)).toEqual({
        status: "expired",
      });
    }
    const record = deviceAuthorization();
    expect(judgeDevicePoll(record, record.clientId, record.expiresAt - 1, issue).status).toBe("pending");
  });

  it("slow_down when sooner than the interval after the last poll, also for a clock behind the last poll", () => {
    const record = deviceAuthorization({ interval: 5, lastPolledAt: T0 + 10_000 });
    expect(judgeDevicePoll(record, record.clientId, T0 + 14_999, issue)).toEqual({
      status: "slow_down",
      record: { ...record, interval: 10, lastPolledAt: T0 + 14_999 },
    });
    expect(judgeDevicePoll(record, record.clientId, T0 + 9_000, issue)).toMatchObject({
      status: "slow_down",
    });
    expect(judgeDevicePoll(record, record.clientId, T0 + 15_000, issue)).toEqual({
      status: "pending",
      record: { ...record, lastPolledAt: T0 + 15_000 },
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
      status: "refused",
      error,
      record: { ...record, status: "consumed", lastPolledAt: T0 + 1 },
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
    expect(bound).toMatchObject({ status: "issue", grant: { scopes: ["mcp:read"], dpopJkt: "poll-key" } });
    expect(judgeDevicePoll(record, record.clientId, T0 + 1, issue)).toMatchObject({
      grant: { dpopJkt: "record-key" },
    });
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
