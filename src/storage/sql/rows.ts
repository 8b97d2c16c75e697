/**
 * Row ↔ record mapping shared by the SQLite and PostgreSQL stores. Both schemas use the same
 * snake_case column names; the drivers differ only in how they hand back numbers (`bigint`
 * columns arrive as strings from `pg`), booleans (0/1 in SQLite) and JSON (text in SQLite, parsed
 * `jsonb` from `pg`), which the helpers below absorb.
 */

import type {
  AccessTokenRecord,
  AuthorizationCodeRecord,
  ClientRecord,
  ConsentRecord,
  DeviceAuthorizationRecord,
  GrantRecord,
  InteractionRecord,
  RefreshTokenRecord,
  SessionRecord,
  SignInGrantKey,
  SigningKeyRecord,
  SupersedeCandidate,
  UserRecord,
} from "../contract.js";
import { withoutUndefined } from "../rules.js";

export type Row = Record<string, unknown>;

/** One row to insert: its table, its column names and their values, in the same order. */
export interface RowInsert {
  table: string;
  columns: readonly string[];
  values: unknown[];
}

/** The INSERT statement for `row`, with the driver's placeholder for the n-th value (from 1). */
export function insertSql(row: RowInsert, placeholder: (n: number) => string): string {
  const marks = row.values.map((_, i) => placeholder(i + 1));
  return `INSERT INTO ${row.table} (${row.columns.join(", ")}) VALUES (${marks.join(", ")})`;
}

function num(value: unknown): number {
  return typeof value === "number" ? value : Number(value);
}

function optNum(value: unknown): number | undefined {
  return value === null || value === undefined ? undefined : num(value);
}

function str(value: unknown): string {
  return String(value);
}

function optStr(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

/** JSON columns hold arrays or objects only, so a string value is always serialised JSON. */
export function fromJson<T>(value: unknown): T {
  return (typeof value === "string" ? JSON.parse(value) : value) as T;
}

export function toJson(value: unknown): string {
  return JSON.stringify(value);
}

/** The parts of a client kept in columns because the store updates or filters on them. */
export function clientColumns(client: ClientRecord): {
  data: string;
  createdAt: number;
  lastUsedAt: number | null;
  expiresAt: number | null;
} {
  const { createdAt, lastUsedAt, expiresAt, ...rest } = client;
  return { data: toJson(rest), createdAt, lastUsedAt: lastUsedAt ?? null, expiresAt: expiresAt ?? null };
}

export function rowToClient(row: Row): ClientRecord {
  return withoutUndefined({
    ...fromJson<Omit<ClientRecord, "createdAt" | "lastUsedAt" | "expiresAt">>(row.data),
    createdAt: num(row.created_at),
    lastUsedAt: optNum(row.last_used_at),
    expiresAt: optNum(row.expires_at),
  });
}

export function rowToUser(row: Row): UserRecord {
  return withoutUndefined({
    id: str(row.id),
    username: str(row.username),
    passwordHash: str(row.password_hash),
    isAdmin: Boolean(row.is_admin),
    createdAt: num(row.created_at),
    disabledAt: optNum(row.disabled_at),
  });
}

export function rowToSession(row: Row): SessionRecord {
  return {
    idHash: str(row.id_hash),
    userId: str(row.user_id),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
  };
}

/** Interactions are written whole and read whole; only the user and expiry live in columns. */
export function interactionData(interaction: InteractionRecord): string {
  const { userId: _userId, ...rest } = interaction;
  return toJson(rest);
}

export function rowToInteraction(row: Row): InteractionRecord {
  const data = fromJson<
    Omit<InteractionRecord, "userId" | "redirectUriSent"> & { redirectUriSent?: boolean }
  >(row.data);
  return withoutUndefined({
    ...data,
    // Written before `redirectUriSent` existed (interactions live minutes): true is the stricter
    // reading, the token request must then repeat redirect_uri (OAuth 2.1 §4.1.3).
    redirectUriSent: data.redirectUriSent ?? true,
    userId: optStr(row.user_id),
  });
}

export function rowToConsent(row: Row): ConsentRecord {
  return {
    userId: str(row.user_id),
    clientId: str(row.client_id),
    redirectUri: str(row.redirect_uri),
    scopes: fromJson<string[]>(row.scopes),
    createdAt: num(row.created_at),
    updatedAt: num(row.updated_at),
  };
}

export function rowToCode(row: Row): AuthorizationCodeRecord {
  return withoutUndefined({
    codeHash: str(row.code_hash),
    grantId: str(row.grant_id),
    clientId: str(row.client_id),
    userId: str(row.user_id),
    redirectUri: str(row.redirect_uri),
    redirectUriSent: Boolean(row.redirect_uri_sent),
    scopes: fromJson<string[]>(row.scopes),
    resource: str(row.resource),
    codeChallenge: str(row.code_challenge),
    codeChallengeMethod: "S256",
    refreshAllowed: Boolean(row.refresh_allowed),
    sessionHash: optStr(row.session_hash),
    dpopJkt: optStr(row.dpop_jkt),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    consumedAt: optNum(row.consumed_at),
  });
}

export function rowToGrant(row: Row): GrantRecord {
  return withoutUndefined({
    grantId: str(row.grant_id),
    clientId: str(row.client_id),
    userId: optStr(row.user_id),
    scopes: fromJson<string[]>(row.scopes),
    resource: str(row.resource),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    revokedAt: optNum(row.revoked_at),
    sessionHash: optStr(row.session_hash),
    stepUpRequestedAt: optNum(row.step_up_requested_at),
    dpopJkt: optStr(row.dpop_jkt),
    exchangedFrom: optStr(row.exchanged_from),
  });
}

/**
 * A supersede candidate from a `grant_id, scopes, created_at, dpop_jkt, step_up_requested_at` row
 * of `key`'s active grants (the SQL stores' `listSupersedeCandidates`): resource and session are
 * the key's, which the query matched on.
 */
export function rowToSupersedeCandidate(row: Row, key: SignInGrantKey): SupersedeCandidate {
  return withoutUndefined({
    grantId: str(row.grant_id),
    scopes: fromJson<string[]>(row.scopes),
    resource: key.resource,
    sessionHash: key.sessionHash,
    createdAt: num(row.created_at),
    dpopJkt: optStr(row.dpop_jkt),
    stepUpRequestedAt: optNum(row.step_up_requested_at),
  });
}

function optBool(value: unknown): boolean | undefined {
  return value === null || value === undefined ? undefined : Boolean(value);
}

export function rowToDeviceAuthorization(row: Row): DeviceAuthorizationRecord {
  return withoutUndefined({
    deviceCodeHash: str(row.device_code_hash),
    userCodeHash: str(row.user_code_hash),
    clientId: str(row.client_id),
    scopes: fromJson<string[]>(row.scopes),
    resource: str(row.resource),
    interval: num(row.poll_interval),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    lastPolledAt: optNum(row.last_polled_at),
    status: str(row.status) as DeviceAuthorizationRecord["status"],
    userId: optStr(row.user_id),
    approvedScopes: row.approved_scopes === null ? undefined : fromJson<string[]>(row.approved_scopes),
    sessionHash: optStr(row.session_hash),
    refreshAllowed: optBool(row.refresh_allowed),
    grantId: str(row.grant_id),
    dpopJkt: optStr(row.dpop_jkt),
  });
}

/**
 * The columns of a device authorization, in one order for its insert and for its update (which
 * writes every column but the two code hashes). Booleans stay booleans (see {@link codeInsert}).
 */
export function deviceAuthorizationColumns(record: DeviceAuthorizationRecord): Record<string, unknown> {
  return {
    device_code_hash: record.deviceCodeHash,
    user_code_hash: record.userCodeHash,
    client_id: record.clientId,
    scopes: toJson(record.scopes),
    resource: record.resource,
    poll_interval: record.interval,
    created_at: record.createdAt,
    expires_at: record.expiresAt,
    last_polled_at: record.lastPolledAt ?? null,
    status: record.status,
    user_id: record.userId ?? null,
    approved_scopes: record.approvedScopes === undefined ? null : toJson(record.approvedScopes),
    session_hash: record.sessionHash ?? null,
    refresh_allowed: record.refreshAllowed ?? null,
    grant_id: record.grantId,
    dpop_jkt: record.dpopJkt ?? null,
  };
}

export function deviceAuthorizationInsert(record: DeviceAuthorizationRecord): RowInsert {
  const columns = deviceAuthorizationColumns(record);
  return { table: "device_authorizations", columns: Object.keys(columns), values: Object.values(columns) };
}

export function rowToRefreshToken(row: Row): RefreshTokenRecord {
  return withoutUndefined({
    tokenHash: str(row.token_hash),
    grantId: str(row.grant_id),
    clientId: str(row.client_id),
    scopes: fromJson<string[]>(row.scopes),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    rotatedAt: optNum(row.rotated_at),
    revokedAt: optNum(row.revoked_at),
    rotatedFrom: optStr(row.rotated_from),
    successorUsedAt: optNum(row.successor_used_at),
  });
}

export function rowToAccessToken(row: Row): AccessTokenRecord {
  return withoutUndefined({
    jti: str(row.jti),
    grantId: str(row.grant_id),
    clientId: str(row.client_id),
    userId: optStr(row.user_id),
    scopes: fromJson<string[]>(row.scopes),
    resource: str(row.resource),
    createdAt: num(row.created_at),
    expiresAt: num(row.expires_at),
    revokedAt: optNum(row.revoked_at),
  });
}

export function rowToSigningKey(row: Row): SigningKeyRecord {
  return withoutUndefined({
    kid: str(row.kid),
    alg: str(row.alg) as SigningKeyRecord["alg"],
    publicJwk: fromJson<Record<string, unknown>>(row.public_jwk),
    privateJwk: fromJson<Record<string, unknown>>(row.private_jwk),
    createdAt: num(row.created_at),
    retiredAt: optNum(row.retired_at),
    expiresAt: optNum(row.expires_at),
  });
}

export function grantInsert(grant: GrantRecord): RowInsert {
  return {
    table: "grants",
    columns: [
      "grant_id",
      "client_id",
      "user_id",
      "scopes",
      "resource",
      "created_at",
      "expires_at",
      "revoked_at",
      "session_hash",
      "step_up_requested_at",
      "dpop_jkt",
      "exchanged_from",
    ],
    values: [
      grant.grantId,
      grant.clientId,
      grant.userId ?? null,
      toJson(grant.scopes),
      grant.resource,
      grant.createdAt,
      grant.expiresAt,
      grant.revokedAt ?? null,
      grant.sessionHash ?? null,
      grant.stepUpRequestedAt ?? null,
      grant.dpopJkt ?? null,
      grant.exchangedFrom ?? null,
    ],
  };
}

export function accessTokenInsert(access: AccessTokenRecord): RowInsert {
  return {
    table: "access_tokens",
    columns: ["jti", "grant_id", "client_id", "user_id", "scopes", "resource", "created_at", "expires_at"],
    values: [
      access.jti,
      access.grantId,
      access.clientId,
      access.userId ?? null,
      toJson(access.scopes),
      access.resource,
      access.createdAt,
      access.expiresAt,
    ],
  };
}

export function refreshTokenInsert(refresh: RefreshTokenRecord): RowInsert {
  return {
    table: "refresh_tokens",
    columns: ["token_hash", "grant_id", "client_id", "scopes", "created_at", "expires_at", "rotated_from"],
    values: [
      refresh.tokenHash,
      refresh.grantId,
      refresh.clientId,
      toJson(refresh.scopes),
      refresh.createdAt,
      refresh.expiresAt,
      refresh.rotatedFrom ?? null,
    ],
  };
}

/** `redirect_uri_sent` and `refresh_allowed` are booleans here; a driver without booleans converts them. */
export function codeInsert(code: AuthorizationCodeRecord): RowInsert {
  return {
    table: "authorization_codes",
    columns: [
      "code_hash",
      "grant_id",
      "client_id",
      "user_id",
      "redirect_uri",
      "redirect_uri_sent",
      "scopes",
      "resource",
      "code_challenge",
      "code_challenge_method",
      "refresh_allowed",
      "session_hash",
      "dpop_jkt",
      "created_at",
      "expires_at",
      "consumed_at",
    ],
    values: [
      code.codeHash,
      code.grantId,
      code.clientId,
      code.userId,
      code.redirectUri,
      code.redirectUriSent,
      toJson(code.scopes),
      code.resource,
      code.codeChallenge,
      code.codeChallengeMethod,
      code.refreshAllowed,
      code.sessionHash ?? null,
      code.dpopJkt ?? null,
      code.createdAt,
      code.expiresAt,
      code.consumedAt ?? null,
    ],
  };
}

export function signingKeyInsert(key: SigningKeyRecord): RowInsert {
  return {
    table: "signing_keys",
    columns: ["kid", "alg", "public_jwk", "private_jwk", "created_at", "retired_at", "expires_at"],
    values: [
      key.kid,
      key.alg,
      toJson(key.publicJwk),
      toJson(key.privateJwk),
      key.createdAt,
      key.retiredAt ?? null,
      key.expiresAt ?? null,
    ],
  };
}
