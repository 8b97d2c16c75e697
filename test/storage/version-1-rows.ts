/**
 * Rows as schema version 1 stored them (before redirect_uri_sent, session_hash and
 * step_up_requested_at existed), for the migration tests of the SQLite and PostgreSQL stores, and
 * the checks both run once the later migrations upgraded them. The same rows are valid at version 2
 * (its columns have defaults or may be null), so they also stand for a version-2 database that
 * migration 3 (dpop_jkt, single-use markers, device authorizations) upgrades.
 * Written with explicit version-1 columns, so they do not follow later changes of the mappers.
 */

import { expect } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { type RowInsert, toJson } from "../../src/storage/sql/rows.js";
import {
  code,
  deviceAuthorization,
  HOUR,
  id,
  interaction,
  MINUTE,
  secret,
  T0,
  tokens,
} from "../../src/storage/testing/fixtures.js";

export interface Version1Rows {
  /** The code as the store reads it back after migration 2 (redirect_uri_sent defaulted). */
  code: ReturnType<typeof code>;
  grantId: string;
  jti: string;
  interactionId: string;
  inserts: RowInsert[];
}

/** `bool` renders a boolean for the driver (0/1 for SQLite). */
export function version1Rows(bool: (value: boolean) => unknown): Version1Rows {
  const record = code({ redirectUriSent: true });
  const grantId = id("grant");
  const access = tokens(T0).accessToken;
  const { redirectUriSent: _sent, ...pending } = interaction();
  return {
    code: record,
    grantId,
    jti: access.jti,
    interactionId: pending.id,
    inserts: [
      {
        table: "authorization_codes",
        columns: [
          "code_hash",
          "grant_id",
          "client_id",
          "user_id",
          "redirect_uri",
          "scopes",
          "resource",
          "code_challenge",
          "code_challenge_method",
          "refresh_allowed",
          "created_at",
          "expires_at",
        ],
        values: [
          record.codeHash,
          record.grantId,
          record.clientId,
          record.userId,
          record.redirectUri,
          toJson(record.scopes),
          record.resource,
          record.codeChallenge,
          record.codeChallengeMethod,
          bool(record.refreshAllowed),
          record.createdAt,
          record.expiresAt,
        ],
      },
      {
        table: "grants",
        columns: ["grant_id", "client_id", "user_id", "scopes", "resource", "created_at", "expires_at"],
        values: [grantId, "client-v1", "user-v1", toJson(["mcp:read"]), record.resource, T0, T0 + 90 * HOUR],
      },
      {
        table: "access_tokens",
        columns: [
          "jti",
          "grant_id",
          "client_id",
          "user_id",
          "scopes",
          "resource",
          "created_at",
          "expires_at",
        ],
        values: [
          access.jti,
          grantId,
          "client-v1",
          "user-v1",
          toJson(["mcp:read"]),
          record.resource,
          T0,
          T0 + HOUR,
        ],
      },
      {
        table: "interactions",
        columns: ["id", "data", "user_id", "expires_at"],
        values: [pending.id, toJson(pending), null, pending.expiresAt],
      },
    ],
  };
}

/**
 * What a store migrated from version 1 must answer for `rows`: the interaction and the code read
 * redirectUriSent=true (version 1 always sent redirect_uri), the interaction has no dpopJkt and a new
 * one keeps it, the code redeems into a grant without a sessionHash, and the grant takes a step-up
 * request.
 */
export async function expectVersion1RowsMigrated(
  store: AuthorizationStore,
  rows: Version1Rows,
): Promise<void> {
  const stored = await store.getInteraction(rows.interactionId, T0);
  expect(stored?.redirectUriSent).toBe(true);
  // Interactions are kept whole as JSON: one stored before dpopJkt existed is simply not bound, and
  // a new one keeps its thumbprint without any schema change.
  expect(stored).toBeDefined();
  expect(stored).not.toHaveProperty("dpopJkt");
  const bound = interaction({ dpopJkt: secret().hash });
  await store.createInteraction(bound);
  expect(await store.consumeInteraction(bound.id, T0)).toStrictEqual(bound);
  let seen: unknown;
  const result = await store.redeemAuthorizationCode(
    rows.code.codeHash,
    T0,
    (c) => {
      seen = c;
      return undefined;
    },
    tokens(T0),
  );
  expect(seen).toStrictEqual(rows.code);
  expect(result.status).toBe("issued");
  if (result.status === "issued") expect(Object.keys(result.grant)).not.toContain("sessionHash");
  expect(await store.requestStepUp(rows.jti, T0 + 1)).toBe(true);
  expect((await store.getGrant(rows.grantId))?.stepUpRequestedAt).toBe(T0 + 1);
  await expectMigration3Applied(store, rows);
}

/**
 * Migration 3 on an upgraded database: grants and codes stored before it are not DPoP-bound (no
 * `dpopJkt`, not an empty one), new ones keep their binding, and the single-use markers and device
 * authorizations work.
 */
async function expectMigration3Applied(store: AuthorizationStore, rows: Version1Rows): Promise<void> {
  const stored = await store.getGrant(rows.grantId);
  expect(stored).toBeDefined();
  expect(stored).not.toHaveProperty("dpopJkt");
  const key = secret().hash;
  const bound = code({ dpopJkt: key });
  await store.insertAuthorizationCode(bound);
  const redeemed = await store.redeemAuthorizationCode(bound.codeHash, T0, () => undefined, {
    ...tokens(T0),
    grantDpopJkt: key,
  });
  expect(redeemed).toMatchObject({ status: "issued", code: { dpopJkt: key }, grant: { dpopJkt: key } });
  const marker = `dpop:as:${key}:${id("jti")}`;
  expect(await store.useOnce(marker, T0 + MINUTE, T0)).toBe(true);
  expect(await store.useOnce(marker, T0 + MINUTE, T0)).toBe(false);
  const device = deviceAuthorization();
  await store.createDeviceAuthorization(device);
  expect(await store.getDeviceAuthorizationByUserCode(device.userCodeHash, T0)).toStrictEqual(device);
}
