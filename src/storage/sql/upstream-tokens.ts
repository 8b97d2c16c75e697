/**
 * The SQL of upstream token sets (contract.ts `UpstreamTokenSetRecord`), shared word for word by
 * SQLite and PostgreSQL. One table holds both kinds of holder in its `holder` column: `session:`
 * followed by a session hash, or `grant:` followed by a grant id, so that a session's sets and a
 * grant's sets are one key space with one primary key (holder, provider).
 */
import type { UpstreamTokenSetRecord } from "../contract.js";
import type { Row } from "./rows.js";
import { type PlaceholderStyle, render, type Statement } from "./statements.js";

export const sessionHolder = (sessionHash: string) => `session:${sessionHash}`;
export const grantHolder = (grantId: string) => `grant:${grantId}`;

export function rowToUpstreamTokenSet(row: Row): UpstreamTokenSetRecord {
  return {
    providerId: String(row.provider_id),
    userId: String(row.user_id),
    sealed: String(row.sealed),
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    ...(row.expires_at == null ? {} : { expiresAt: Number(row.expires_at) }),
  };
}

export function keepSessionUpstreamTokensStatement(
  style: PlaceholderStyle,
  sessionHash: string,
  set: UpstreamTokenSetRecord,
): Statement {
  return render(
    `INSERT INTO upstream_token_sets (holder, provider_id, user_id, sealed, version, created_at, updated_at, expires_at)
     VALUES (:holder, :providerId, :userId, :sealed, :version, :createdAt, :updatedAt, :expiresAt)
     ON CONFLICT (holder, provider_id) DO UPDATE SET user_id = excluded.user_id, sealed = excluded.sealed,
       version = excluded.version, created_at = excluded.created_at, updated_at = excluded.updated_at,
       expires_at = excluded.expires_at`,
    {
      holder: sessionHolder(sessionHash),
      providerId: set.providerId,
      userId: set.userId,
      sealed: set.sealed,
      version: set.version,
      createdAt: set.createdAt,
      updatedAt: set.updatedAt,
      expiresAt: set.expiresAt ?? null,
    },
    style,
  );
}

/** One statement: the grant's conditions (live, this session's, the set's user) are read where the copy is written. */
export function bindUpstreamTokensStatement(
  style: PlaceholderStyle,
  sessionHash: string,
  grantId: string,
  now: number,
): Statement {
  return render(
    `INSERT INTO upstream_token_sets (holder, provider_id, user_id, sealed, version, created_at, updated_at, expires_at)
     SELECT :grantHolder, s.provider_id, s.user_id, s.sealed, 1, :now, :now, NULL
     FROM upstream_token_sets s JOIN grants g ON g.grant_id = :grantId
     WHERE s.holder = :sessionHolder AND (s.expires_at IS NULL OR s.expires_at > :now)
       AND g.revoked_at IS NULL AND g.session_hash = :sessionHash AND g.user_id = s.user_id
     ON CONFLICT (holder, provider_id) DO NOTHING`,
    {
      grantHolder: grantHolder(grantId),
      grantId,
      sessionHolder: sessionHolder(sessionHash),
      sessionHash,
      now,
    },
    style,
  );
}

export function getUpstreamTokensStatement(
  style: PlaceholderStyle,
  grantId: string,
  providerId: string,
): Statement {
  return render(
    "SELECT * FROM upstream_token_sets WHERE holder = :holder AND provider_id = :providerId",
    { holder: grantHolder(grantId), providerId },
    style,
  );
}

export function replaceUpstreamTokensStatement(
  style: PlaceholderStyle,
  grantId: string,
  providerId: string,
  expectedVersion: number,
  next: Pick<UpstreamTokenSetRecord, "sealed" | "updatedAt">,
): Statement {
  return render(
    `UPDATE upstream_token_sets SET sealed = :sealed, updated_at = :updatedAt, version = version + 1
     WHERE holder = :holder AND provider_id = :providerId AND version = :expectedVersion`,
    {
      sealed: next.sealed,
      updatedAt: next.updatedAt,
      holder: grantHolder(grantId),
      providerId,
      expectedVersion,
    },
    style,
  );
}

export function deleteUpstreamTokensStatement(
  style: PlaceholderStyle,
  grantId: string,
  providerId: string,
): Statement {
  return render(
    "DELETE FROM upstream_token_sets WHERE holder = :holder AND provider_id = :providerId",
    { holder: grantHolder(grantId), providerId },
    style,
  );
}

/** A session's sets go with its logout (its grants keep their copies). */
export function deleteSessionUpstreamTokensStatement(
  style: PlaceholderStyle,
  sessionHash: string,
): Statement {
  return render(
    "DELETE FROM upstream_token_sets WHERE holder = :holder",
    { holder: sessionHolder(sessionHash) },
    style,
  );
}
