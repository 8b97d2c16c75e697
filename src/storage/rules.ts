/**
 * Rules every backend applies the same way, kept in one place so the memory, SQLite and
 * PostgreSQL stores cannot drift apart. Internal to `src/storage/`.
 */

import type {
  AccessTokenRecord,
  AuthorizationCodeRecord,
  AuthorizationStore,
  GrantRecord,
  IssuedTokens,
  RefreshTokenRecord,
  RotateRefreshResult,
} from "./contract.js";

/** A record expires at `expiresAt`: at that very millisecond it is already dead. */
export function isExpired(expiresAt: number, now: number): boolean {
  return now >= expiresAt;
}

/**
 * Whether presenting a refresh token that was already rotated counts as reuse (RFC 9700 §4.14.2:
 * then the grant ends). It always does, unless a grace window is configured and the earlier
 * rotation happened within it. The distance is taken in absolute value: a request that read its
 * clock before the rotating one committed (or an instance whose clock lags) sees a negative
 * elapsed time, which must never be read as "inside the window" when there is no window.
 */
export function isRefreshTokenReuse(rotatedAt: number | undefined, now: number, graceMs: number): boolean {
  if (rotatedAt === undefined) return false;
  return !(graceMs > 0 && Math.abs(now - rotatedAt) < graceMs);
}

/** Consent accumulates: earlier scopes first, new ones appended, no duplicates. */
export function mergeScopes(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}

/** The grant a code creates on redemption (its id was fixed when the code was issued). */
export function grantFromCode(code: AuthorizationCodeRecord, now: number, expiresAt: number): GrantRecord {
  return withoutUndefined({
    grantId: code.grantId,
    clientId: code.clientId,
    userId: code.userId,
    scopes: [...code.scopes],
    resource: code.resource,
    createdAt: now,
    expiresAt,
  });
}

export function accessTokenFromGrant(
  grant: GrantRecord,
  clientId: string,
  scopes: readonly string[],
  token: IssuedTokens["accessToken"],
): AccessTokenRecord {
  return withoutUndefined({
    jti: token.jti,
    grantId: grant.grantId,
    clientId,
    userId: grant.userId,
    scopes: [...scopes],
    resource: grant.resource,
    createdAt: token.createdAt,
    expiresAt: token.expiresAt,
  });
}

export function refreshTokenFor(
  grant: GrantRecord,
  clientId: string,
  scopes: readonly string[],
  token: NonNullable<IssuedTokens["refreshToken"]>,
): RefreshTokenRecord {
  return {
    tokenHash: token.tokenHash,
    grantId: grant.grantId,
    clientId,
    scopes: [...scopes],
    createdAt: token.createdAt,
    expiresAt: token.expiresAt,
  };
}

/**
 * The records one issuance writes: always the access token, and the refresh token when the caller
 * may write one and was given one.
 */
export function issuedTokenRecords(
  grant: GrantRecord,
  clientId: string,
  scopes: readonly string[],
  tokens: Omit<IssuedTokens, "grantExpiresAt">,
  writeRefresh: boolean,
): { access: AccessTokenRecord; refresh?: RefreshTokenRecord } {
  const access = accessTokenFromGrant(grant, clientId, scopes, tokens.accessToken);
  if (!writeRefresh || !tokens.refreshToken) return { access };
  return { access, refresh: refreshTokenFor(grant, clientId, scopes, tokens.refreshToken) };
}

/**
 * What every backend decides about a refresh token and its grant, once both are found, in this
 * order: revoked, reused (RFC 9700 §4.14.2: a rotated token presented again means it leaked; the
 * caller must then revoke the whole grant), expired, refused by `check`; otherwise `ok` with the
 * scopes to issue.
 */
export function judgeRefreshToken(
  token: RefreshTokenRecord,
  grant: GrantRecord,
  now: number,
  graceMs: number,
  check: Parameters<AuthorizationStore["rotateRefreshToken"]>[2],
):
  | Extract<RotateRefreshResult, { status: "revoked" | "reused" | "expired" | "refused" }>
  | { status: "ok"; scopes: string[] } {
  if (grant.revokedAt !== undefined || token.revokedAt !== undefined) return { status: "revoked" };
  if (isRefreshTokenReuse(token.rotatedAt, now, graceMs)) return { status: "reused" };
  if (isExpired(token.expiresAt, now) || isExpired(grant.expiresAt, now)) return { status: "expired" };
  const verdict = check(token, grant);
  if (verdict.error) return { status: "refused", error: verdict.error };
  return { status: "ok", scopes: verdict.scopes ?? token.scopes };
}

/** Drops properties whose value is `undefined` (shallow), so records compare equal across backends. */
export function withoutUndefined<T>(value: T): T {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (v !== undefined) out[k] = v;
  return out as T;
}

/** A comparator over a tuple of sort keys (numbers before strings never mix within one key). */
export function compareBy<T>(keys: (item: T) => (string | number)[]): (a: T, b: T) => number {
  return (a, b) => {
    const ka = keys(a);
    const kb = keys(b);
    for (let i = 0; i < ka.length; i++) {
      const x = ka[i]!;
      const y = kb[i]!;
      if (x < y) return -1;
      if (x > y) return 1;
    }
    return 0;
  };
}
