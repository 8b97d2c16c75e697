/**
 * SQL the SQLite and PostgreSQL stores run word for word (revocation and purge), written once with
 * named parameters (`:now`) and rendered for each driver's placeholders. Each backend still runs
 * them inside its own transaction: SQLite's group commit, PostgreSQL's transaction.
 */

import { grantIdOfAccessTokenId } from "../access-token-id.js";
import type { AccessTokenRecord, DeviceAuthorizationRecord, PurgeResult } from "../contract.js";
import { accessTokenInsert, deviceAuthorizationColumns } from "./rows.js";

/**
 * `?`: one positional mark per occurrence (better-sqlite3, which does not bind numbered marks);
 * `$n`: one numbered mark per distinct name (`pg`).
 */
export type PlaceholderStyle = "?" | "$n";

/** A statement ready for the driver: its text and the values for its marks, in order. */
export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

/** A `:name` parameter; `::type` casts and `:=` are not parameters. */
const PARAMETER = /(?<![:\w]):([A-Za-z_]\w*)/g;

/** Renders `sql`'s named parameters in `style`, taking their values from `params`. */
export function render(
  sql: string,
  params: Readonly<Record<string, unknown>>,
  style: PlaceholderStyle,
): Statement {
  const names: string[] = [];
  const values: unknown[] = [];
  const text = sql.replace(PARAMETER, (_mark, name: string) => {
    if (!Object.hasOwn(params, name)) throw new Error(`no value for SQL parameter :${name}`);
    if (style === "?") {
      values.push(params[name]);
      return "?";
    }
    let index = names.indexOf(name);
    if (index === -1) {
      index = names.push(name) - 1;
      values.push(params[name]);
    }
    return `$${index + 1}`;
  });
  return { text, values };
}

/**
 * The grant `:grantId` and every grant exchanged from it, down the chain (RFC 8693 token exchange,
 * `grants.exchanged_from`, found through the grants_exchanged_from index). UNION, not UNION ALL:
 * a row is visited once, so even a cycle a damaged database might hold ends.
 */
const EXCHANGE_CHAIN = `WITH RECURSIVE chain(grant_id) AS (
  SELECT CAST(:grantId AS TEXT)
  UNION
  SELECT g.grant_id FROM grants g JOIN chain c ON g.exchanged_from = c.grant_id
) `;

/**
 * Revokes a grant and every token of it (OAuth 2.1 §4.1.3 on a replayed code, RFC 9700 §4.14.2 on
 * a reused refresh token, RFC 7009 §2.1 on revocation), and the same for every grant exchanged
 * from it (RFC 7009 §2.1: what was derived from a revoked grant goes with it), in this order: the
 * grant row first, then the derived grants' rows, then the tokens, the lock order every PostgreSQL
 * transaction keeps. The first statement's change count says whether the grant exists. An earlier
 * revocation time is kept.
 */
export function revokeGrantStatements(style: PlaceholderStyle, grantId: string, now: number): Statement[] {
  const params = { grantId, now };
  const inChain = "grant_id IN (SELECT grant_id FROM chain)";
  return [
    render(
      "UPDATE grants SET revoked_at = coalesce(revoked_at, :now) WHERE grant_id = :grantId",
      params,
      style,
    ),
    render(
      `${EXCHANGE_CHAIN}UPDATE grants SET revoked_at = coalesce(revoked_at, :now) WHERE ${inChain} AND grant_id <> :grantId`,
      params,
      style,
    ),
    render(
      `${EXCHANGE_CHAIN}UPDATE refresh_tokens SET revoked_at = coalesce(revoked_at, :now) WHERE ${inChain}`,
      params,
      style,
    ),
    render(
      `${EXCHANGE_CHAIN}UPDATE access_tokens SET revoked_at = coalesce(revoked_at, :now) WHERE ${inChain}`,
      params,
      style,
    ),
    // The upstream provider's tokens kept for these grants die with them (sql/upstream-tokens.ts).
    render(
      `${EXCHANGE_CHAIN}DELETE FROM upstream_token_sets WHERE holder IN (SELECT 'grant:' || grant_id FROM chain)`,
      { grantId },
      style,
    ),
  ];
}

/**
 * Revokes one access token (RFC 7009 §2.1); an earlier revocation time is kept. Contract version 2
 * writes no row per access token, so the revocation adds `token` (what the server read from the
 * verified JWT) as a revoked row when there is none: the revoked list is the `access_tokens` rows
 * with `revoked_at` set, each deleted by the purge once its token has expired. Nothing is added
 * for a grant no longer stored (its tokens are inactive already; the row would break the foreign
 * key). Changes one row when the token is now on the list.
 */
export function revokeAccessTokenStatement(
  style: PlaceholderStyle,
  jti: string,
  now: number,
  token?: AccessTokenRecord,
): Statement {
  if (token === undefined || token.jti !== jti) {
    return render(
      "UPDATE access_tokens SET revoked_at = coalesce(revoked_at, :now) WHERE jti = :jti",
      { jti, now },
      style,
    );
  }
  const { columns, values } = accessTokenInsert(token);
  const params: Record<string, unknown> = { now };
  columns.forEach((column, i) => {
    params[column] = values[i];
  });
  return render(
    `INSERT INTO access_tokens (${columns.join(", ")}, revoked_at)
     SELECT ${columns.map((c) => `:${c}`).join(", ")}, :now
     WHERE EXISTS (SELECT 1 FROM grants WHERE grant_id = :grant_id)
     ON CONFLICT (jti) DO UPDATE SET revoked_at = coalesce(access_tokens.revoked_at, excluded.revoked_at)`,
    params,
    style,
  );
}

/**
 * Marks the live grant of access token `jti` for step-up (contract `requestStepUp`): the grant its
 * `jti` names (./access-token-id.ts) or, for a token issued before the change, the grant of its row.
 */
export function requestStepUpStatement(style: PlaceholderStyle, jti: string, now: number): Statement {
  const grantId = grantIdOfAccessTokenId(jti);
  return grantId === undefined
    ? render(
        `UPDATE grants SET step_up_requested_at = :now
         WHERE grant_id = (SELECT grant_id FROM access_tokens WHERE jti = :jti) AND revoked_at IS NULL`,
        { jti, now },
        style,
      )
    : render(
        "UPDATE grants SET step_up_requested_at = :now WHERE grant_id = :grantId AND revoked_at IS NULL",
        { grantId, now },
        style,
      );
}

/**
 * Records a single-use marker (RFC 9449 §11.1, RFC 7523 §3) in one statement, which is what makes it
 * atomic across connections: the insert wins for a new key; for a known key the row is replaced only
 * when it has expired at `now` (`expires_at <= now`, the `isExpired` rule of ../rules.ts). Exactly
 * one row changes when the key may be used, none for a replay.
 */
export function useOnceStatement(
  style: PlaceholderStyle,
  key: string,
  expiresAt: number,
  now: number,
): Statement {
  return render(
    `INSERT INTO single_use_markers (marker_key, expires_at) VALUES (:key, :expiresAt)
     ON CONFLICT (marker_key) DO UPDATE SET expires_at = excluded.expires_at
     WHERE single_use_markers.expires_at <= :now`,
    { key, expiresAt, now },
    style,
  );
}

/**
 * Writes a device authorization as judged in ../rules.ts (decision, poll): every column but the two
 * code hashes, which identify it. The caller holds the row (SQLite's write lock, PostgreSQL's
 * `FOR UPDATE`) since it read it.
 */
export function updateDeviceAuthorizationStatement(
  style: PlaceholderStyle,
  record: DeviceAuthorizationRecord,
): Statement {
  const {
    device_code_hash: deviceCodeHash,
    user_code_hash: _userCode,
    ...columns
  } = deviceAuthorizationColumns(record);
  const assignments = Object.keys(columns).map((column) => `${column} = :${column}`);
  return render(
    `UPDATE device_authorizations SET ${assignments.join(", ")} WHERE device_code_hash = :deviceCodeHash`,
    { ...columns, deviceCodeHash },
    style,
  );
}

/** Grants past their absolute lifetime, or revoked with no access token still live. */
const PURGEABLE_GRANTS = `SELECT g.grant_id FROM grants g WHERE g.expires_at <= :now OR (g.revoked_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM access_tokens a WHERE a.grant_id = g.grant_id AND a.expires_at > :now))`;

const PURGE: readonly { sql: string; counts?: keyof PurgeResult }[] = [
  { counts: "codes", sql: "DELETE FROM authorization_codes WHERE expires_at <= :now" },
  {
    counts: "refreshTokens",
    sql: `DELETE FROM refresh_tokens WHERE expires_at <= :now OR grant_id IN (${PURGEABLE_GRANTS})`,
  },
  // A revoked grant without live access tokens has only expired ones, caught by the first test.
  {
    counts: "accessTokens",
    sql: `DELETE FROM access_tokens WHERE expires_at <= :now
      OR grant_id IN (SELECT grant_id FROM grants WHERE expires_at <= :now)`,
  },
  { counts: "grants", sql: `DELETE FROM grants WHERE grant_id IN (${PURGEABLE_GRANTS})` },
  { counts: "interactions", sql: "DELETE FROM interactions WHERE expires_at <= :now" },
  { counts: "sessions", sql: "DELETE FROM sessions WHERE expires_at <= :now" },
  { counts: "clients", sql: "DELETE FROM clients WHERE expires_at <= :now" },
  { counts: "markers", sql: "DELETE FROM single_use_markers WHERE expires_at <= :now" },
  { counts: "deviceAuthorizations", sql: "DELETE FROM device_authorizations WHERE expires_at <= :now" },
  { sql: "DELETE FROM rate_limits WHERE expires_at <= :now" },
  { sql: "DELETE FROM cached_documents WHERE expires_at <= :now" },
  { sql: "DELETE FROM upstream_logins WHERE expires_at <= :now" },
  // Session-held upstream token sets past their session, and the sets of grants no longer there
  // (the grant id is cut out of the holder, so each look-up uses the grants' primary key).
  {
    sql: `DELETE FROM upstream_token_sets WHERE expires_at <= :now OR (holder LIKE 'grant:%'
      AND NOT EXISTS (SELECT 1 FROM grants g WHERE g.grant_id = substr(upstream_token_sets.holder, 7)))`,
  },
];

/**
 * The purge of everything past its lifetime at `now`, in order (tokens before the grants they
 * belong to), each statement with the {@link PurgeResult} count it reports, if any.
 */
export function purgeStatements(
  style: PlaceholderStyle,
  now: number,
): { statement: Statement; counts?: keyof PurgeResult }[] {
  return PURGE.map(({ sql, counts }) => ({
    statement: render(sql, { now }, style),
    ...(counts && { counts }),
  }));
}
