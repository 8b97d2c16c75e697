/**
 * src/storage/rules.ts: the judgements every backend acts on. Here the code-redemption judgement
 * on its own (the contract suite then pins that memory, SQLite and PostgreSQL act on it alike).
 */

import { describe, expect, it } from "vitest";
import { OAuthError } from "../../src/shared/errors.js";
import type { AuthorizationCodeRecord } from "../../src/storage/contract.js";
import { authorizationCodeState, judgeAuthorizationCode } from "../../src/storage/rules.js";
import { code, DAY, MINUTE, T0, tokens } from "../../src/storage/testing/fixtures.js";

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
