/**
 * Rules every backend applies the same way, kept in one place so the memory, SQLite and
 * PostgreSQL stores cannot drift apart. Internal to `src/storage/`.
 */

import { GatehouseTypeError, OAuthError } from "../shared/errors.js";
import {
  type AccessTokenRecord,
  type AuthorizationCodeRecord,
  type AuthorizationStore,
  type CodeRedemptionCheck,
  type CodeRedemptionTokens,
  type DeviceAuthorizationDecision,
  type DeviceAuthorizationRecord,
  type GrantRecord,
  type IssuedTokens,
  MAX_MARKER_KEY_LENGTH,
  type PollDeviceAuthorizationResult,
  type PurgeResult,
  type RedeemCodeResult,
  type RefreshTokenRecord,
  type RotateRefreshResult,
  type UserChange,
  type UserRecord,
} from "./contract.js";

/** A record expires at `expiresAt`: at that very millisecond it is already dead. */
export function isExpired(expiresAt: number, now: number): boolean {
  return now >= expiresAt;
}

/**
 * Whether presenting this refresh token counts as reuse, the sign of a stolen token (RFC 9700
 * §4.14.2: then the whole grant ends). A token never rotated is not reused. A rotated one is, except
 * inside the race window: it was first rotated less than `graceMs` ago AND none of its successors
 * has been used yet.
 *
 * Why (issue 21, "refresh races of real clients"): coding agents and desktop clients refresh from
 * several processes or windows holding the same token; under strict detection the second one
 * revokes the grant and logs the user out. While no successor has been used, the legitimate client
 * has not moved on, and a second redemption is as likely its own other process as a thief, so it
 * gets a sibling successor (refresh-policy.ts `reuseGraceMs` chooses the window). Once any
 * successor has been used, the rotated token is only ever a copy left behind, so presenting it is
 * reuse however recent the rotation: a token stolen and used after the client moved on still ends
 * the grant. The window never slides (it counts from the first rotation) and never extends a
 * lifetime (the judgement checks expiry after this, and a sibling expires with its first successor).
 *
 * The distance is taken in absolute value: a request that read its clock before the rotating one
 * committed (or an instance whose clock lags) sees a negative elapsed time, which must never be
 * read as "inside the window" when there is no window.
 */
export function isRefreshTokenReuse(
  token: Pick<RefreshTokenRecord, "rotatedAt" | "successorUsedAt">,
  now: number,
  graceMs: number,
): boolean {
  if (token.rotatedAt === undefined) return false;
  if (token.successorUsedAt !== undefined) return true;
  return !(graceMs > 0 && Math.abs(now - token.rotatedAt) < graceMs);
}

/** Consent accumulates: earlier scopes first, new ones appended, no duplicates. */
export function mergeScopes(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}

/**
 * The tokens a redemption writes: `tokens` itself, or what it returns for the code when the
 * lifetimes depend on what the code granted. Called once, after `check` passed.
 */
function tokensForCode(tokens: CodeRedemptionTokens, code: AuthorizationCodeRecord): IssuedTokens {
  return typeof tokens === "function" ? tokens(code) : tokens;
}

/**
 * The tokens a rotation writes: `tokens` itself, or what it returns for the live token and its
 * grant. Called once, after `check` passed.
 */
export function tokensForRefresh(
  tokens: Parameters<AuthorizationStore["rotateRefreshToken"]>[3],
  token: RefreshTokenRecord,
  grant: GrantRecord,
): Omit<IssuedTokens, "grantExpiresAt"> {
  return typeof tokens === "function" ? tokens(token, grant) : tokens;
}

/**
 * The grant a code creates on redemption (its id was fixed when the code was issued). It keeps the
 * browser session that approved the code, which decides what a later grant supersedes.
 */
function grantFromCode(
  code: AuthorizationCodeRecord,
  now: number,
  expiresAt: number,
  grantDpopJkt: string | undefined,
): GrantRecord {
  return withoutUndefined({
    grantId: code.grantId,
    clientId: code.clientId,
    userId: code.userId,
    scopes: [...code.scopes],
    resource: code.resource,
    createdAt: now,
    expiresAt,
    sessionHash: code.sessionHash,
    dpopJkt: grantDpopJkt,
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
  rotatedFrom?: string,
): RefreshTokenRecord {
  return withoutUndefined({
    tokenHash: token.tokenHash,
    grantId: grant.grantId,
    clientId,
    scopes: [...scopes],
    createdAt: token.createdAt,
    expiresAt: token.expiresAt,
    rotatedFrom,
  });
}

/**
 * The records one issuance writes: always the access token, and the refresh token when the caller
 * may write one and was given one (a rotation passes the hash of the token it rotates as
 * `rotatedFrom`).
 */
export function issuedTokenRecords(
  grant: GrantRecord,
  clientId: string,
  scopes: readonly string[],
  tokens: Omit<IssuedTokens, "grantExpiresAt">,
  writeRefresh: boolean,
  rotatedFrom?: string,
): { access: AccessTokenRecord; refresh?: RefreshTokenRecord } {
  const access = accessTokenFromGrant(grant, clientId, scopes, tokens.accessToken);
  if (!writeRefresh || !tokens.refreshToken) return { access };
  return { access, refresh: refreshTokenFor(grant, clientId, scopes, tokens.refreshToken, rotatedFrom) };
}

/**
 * What a rotation that passed {@link judgeRefreshToken} writes besides the new tokens, the same for
 * every backend: the presented token marked rotated when it has a successor (its first rotation time
 * kept, so the race window never slides), and, at the first use of a token that was rotated from
 * another, that other token's `successorUsedAt` (from then on presenting it is reuse).
 */
export function rotationMarks(
  token: RefreshTokenRecord,
  hasSuccessor: boolean,
  now: number,
): { rotatedAt?: number; parentSuccessorUsed?: string } {
  return withoutUndefined({
    rotatedAt: hasSuccessor ? (token.rotatedAt ?? now) : undefined,
    parentSuccessorUsed: token.rotatedAt === undefined ? token.rotatedFrom : undefined,
  });
}

/**
 * Where an authorization code stands at `now`: `consumed` (redeemed before, so presenting it again
 * is a replay) is judged before `expired`; otherwise it is `live`, and may be redeemed.
 */
export function authorizationCodeState(
  code: AuthorizationCodeRecord,
  now: number,
): "consumed" | "expired" | "live" {
  if (code.consumedAt !== undefined) return "consumed";
  return isExpired(code.expiresAt, now) ? "expired" : "live";
}

/**
 * What a backend must do with an authorization code it found, decided here for all of them:
 * - `replayed`: the code was redeemed before (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2: a code is single
 *   use, and a second use must revoke what the first issued). The caller revokes the grant of the
 *   first redemption, `code.grantId`, with every token of it.
 * - `expired`: past its lifetime; the caller changes nothing.
 * - `refused`: `check` (client, redirect URI, PKCE, resource) returned an error; the caller marks
 *   the code consumed all the same, so a wrong guess spends it.
 * - `issue`: the caller marks the code consumed and writes `grant` and the `tokens` it was given.
 * `check` and `tokens` run here, before the caller writes
 * anything, so a throw from either leaves the code unused (the SQL backends roll back).
 */
export function judgeAuthorizationCode(
  code: AuthorizationCodeRecord,
  now: number,
  check: CodeRedemptionCheck,
  tokens: CodeRedemptionTokens,
):
  | Extract<RedeemCodeResult, { status: "replayed" | "expired" | "refused" }>
  | { status: "issue"; grant: GrantRecord; tokens: IssuedTokens } {
  const state = authorizationCodeState(code, now);
  if (state === "consumed") return { status: "replayed" };
  if (state === "expired") return { status: "expired" };
  const error = check(code);
  if (error) return { status: "refused", error };
  const issued = tokensForCode(tokens, { ...code });
  // RFC 9449 §5: the token endpoint, having verified the proof, says which key the grant is bound to.
  const grant = grantFromCode(code, now, issued.grantExpiresAt, issued.grantDpopJkt);
  return { status: "issue", grant, tokens: issued };
}

/**
 * What every backend decides about a refresh token and its grant, once both are found, in this
 * order: revoked, reused (RFC 9700 §4.14.2: a rotated token presented again, outside the race
 * window of {@link isRefreshTokenReuse}, means it leaked; the caller must then revoke the whole
 * grant), expired (the token's idle or the grant's absolute lifetime, inside the window too),
 * refused by `check`; otherwise `ok` with the scopes to issue.
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
  if (isRefreshTokenReuse(token, now, graceMs)) return { status: "reused" };
  if (isExpired(token.expiresAt, now) || isExpired(grant.expiresAt, now)) return { status: "expired" };
  const verdict = check(token, grant);
  if (verdict.error) return { status: "refused", error: verdict.error };
  return { status: "ok", scopes: verdict.scopes ?? token.scopes };
}

/**
 * Refuses a single-use marker key the stores cannot hold the same way: empty, longer than
 * {@link MAX_MARKER_KEY_LENGTH} (the bounded column), or containing U+0000 (which PostgreSQL text
 * cannot hold). Every backend calls it before touching anything.
 */
export function assertMarkerKey(key: string): void {
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_MARKER_KEY_LENGTH) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `useOnce key must be a string of 1 to ${MAX_MARKER_KEY_LENGTH} characters (hash longer keys)`,
    );
  }
  if (key.includes("\u0000"))
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "useOnce key must not contain U+0000");
}

/**
 * Whether an existing single-use marker still blocks its key at `now` (RFC 9449 §11.1, RFC 7523 §3:
 * a `jti` may be refused as a replay only while the server remembers it; a marker that expired may
 * be recorded again).
 */
export function markerBlocks(expiresAt: number, now: number): boolean {
  return !isExpired(expiresAt, now);
}

/**
 * The record after the user's decision at the verification page (RFC 8628 §3.3), or undefined when
 * the authorization may no longer be decided: it is not pending, or it expired.
 */
export function decideDevice(
  record: DeviceAuthorizationRecord,
  decision: DeviceAuthorizationDecision,
  now: number,
): DeviceAuthorizationRecord | undefined {
  if (record.status !== "pending" || isExpired(record.expiresAt, now)) return undefined;
  if (!decision.approved) return { ...record, status: "denied" };
  return withoutUndefined({
    ...record,
    status: "approved",
    userId: decision.userId,
    approvedScopes: [...decision.approvedScopes],
    sessionHash: decision.sessionHash,
    refreshAllowed: decision.refreshAllowed,
  });
}

/** Whether `user` counts as an administrator who can use the admin page: an enabled one. */
export function isEnabledAdmin(user: UserRecord): boolean {
  return user.isAdmin && user.disabledAt === undefined;
}

/**
 * An operator's change to an account, judged for every backend: the user as it becomes (for
 * `remove`, as it was: the caller deletes it), or `last_admin` when the user is an enabled
 * administrator, no other one is enabled (`enabledAdmins` counts every enabled administrator,
 * this user included) and the change would take that away: nobody could use the admin page or
 * undo the change there (issue 26). Read `enabledAdmins` under the same lock that writes the result.
 */
export function judgeUserChange(
  user: UserRecord,
  change: UserChange,
  enabledAdmins: number,
  now: number,
): UserRecord | "last_admin" {
  const losesAdmin = change === "disable" || change === "remove" || change === "remove-admin";
  if (losesAdmin && isEnabledAdmin(user) && enabledAdmins <= 1) return "last_admin";
  switch (change) {
    case "disable":
      return { ...user, disabledAt: user.disabledAt ?? now };
    case "enable": {
      const { disabledAt: _gone, ...enabled } = user;
      return enabled;
    }
    case "make-admin":
      return { ...user, isAdmin: true };
    case "remove-admin":
      return { ...user, isAdmin: false };
    default:
      return user;
  }
}

/** RFC 8628 §3.5: each `slow_down` raises the polling interval by 5 seconds. */
const SLOW_DOWN_STEP_SECONDS = 5;

/**
 * What a backend must do with one poll of a device authorization it found, by client `clientId`,
 * decided here for all of them (RFC 8628 §3.5):
 * - `not_found`: the authorization was issued to another client. The device code is bound to the
 *   client that requested it (RFC 8628 §3.4: the token request carries its `client_id`; RFC 6749
 *   §4.1.3 and §5.2 applied to the device code), so for any other client it does not exist: the
 *   caller changes nothing (no poll time, no slow_down, not consumed) and answers as for an unknown
 *   code, which tells the other client nothing about its state.
 * - `expired`, `denied`, `consumed`: the caller changes nothing and answers that status.
 * - `pending`, `slow_down`: the caller writes `record` (the poll time, and for `slow_down` the
 *   interval raised by 5 seconds: the device polled sooner than `interval` after its last poll).
 * - `refused`: `tokens` returned an error; the caller writes `record` (now consumed), issues nothing.
 * - `issue`: the caller writes `record` (now consumed), `grant` and the `tokens` it was given.
 * `tokens` runs here, before the caller writes anything, so a throw from it changes nothing.
 */
export function judgeDevicePoll(
  stored: DeviceAuthorizationRecord,
  clientId: string,
  now: number,
  tokens: Parameters<AuthorizationStore["pollDeviceAuthorization"]>[3],
):
  | { status: "not_found" | "expired" | "denied" | "consumed" }
  | { status: "pending" | "slow_down"; record: DeviceAuthorizationRecord }
  | { status: "refused"; error: OAuthError; record: DeviceAuthorizationRecord }
  | { status: "issue"; record: DeviceAuthorizationRecord; grant: GrantRecord; tokens: IssuedTokens } {
  // First of all: another client learns nothing, not even that the code expired.
  if (stored.clientId !== clientId) return { status: "not_found" };
  if (isExpired(stored.expiresAt, now)) return { status: "expired" };
  if (stored.status === "denied" || stored.status === "consumed") return { status: stored.status };
  if (stored.status === "pending") {
    // A device whose clock reads before the last poll (another instance's clock) polled too soon too.
    const tooSoon = stored.lastPolledAt !== undefined && now - stored.lastPolledAt < stored.interval * 1000;
    if (!tooSoon) return { status: "pending", record: { ...stored, lastPolledAt: now } };
    const interval = stored.interval + SLOW_DOWN_STEP_SECONDS;
    return { status: "slow_down", record: { ...stored, interval, lastPolledAt: now } };
  }
  const consumed: DeviceAuthorizationRecord = { ...stored, status: "consumed", lastPolledAt: now };
  const issued = tokens(structuredClone(stored));
  if (issued instanceof OAuthError) return { status: "refused", error: issued, record: consumed };
  const grant: GrantRecord = withoutUndefined({
    grantId: stored.grantId,
    clientId: stored.clientId,
    userId: stored.userId,
    scopes: [...(stored.approvedScopes ?? stored.scopes)],
    resource: stored.resource,
    createdAt: now,
    expiresAt: issued.grantExpiresAt,
    sessionHash: stored.sessionHash,
    // RFC 9449 §5: the key the token endpoint verified, else the one the device request was bound to.
    dpopJkt: issued.grantDpopJkt ?? stored.dpopJkt,
  });
  return { status: "issue", record: consumed, grant, tokens: issued };
}

/** The answer of a poll that issued, as every backend returns it. */
export function devicePollIssued(
  record: DeviceAuthorizationRecord,
  grant: GrantRecord,
  refreshIssued: boolean,
): PollDeviceAuthorizationResult {
  return {
    status: "issued",
    record: withoutUndefined(record),
    grant: withoutUndefined(grant),
    refreshIssued,
  };
}

/** A {@link PurgeResult} with every count at zero, for a backend to fill in as it purges. */
export function emptyPurgeResult(): PurgeResult {
  return {
    codes: 0,
    refreshTokens: 0,
    accessTokens: 0,
    interactions: 0,
    sessions: 0,
    clients: 0,
    grants: 0,
    markers: 0,
    deviceAuthorizations: 0,
  };
}

/** Drops properties whose value is `undefined` (shallow), so records compare equal across backends. */
export function withoutUndefined<T>(value: T): T {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) if (v !== undefined) out[k] = v;
  return out as T;
}

/**
 * The JSON text of `value` with every object's members in one fixed order, at every depth (sorted
 * by name in UTF-16 code-unit order; JavaScript itself puts integer-like names first, ascending):
 * two values that differ only in member order get the same text. Members `JSON.stringify` drops
 * (`undefined`, functions) are dropped here too.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_name, member: unknown) => {
    if (member === null || typeof member !== "object" || Array.isArray(member)) return member;
    const sorted = Object.entries(member).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(sorted);
  });
}

/**
 * Whether a stored JSON value equals `expected`, as the compare-and-swap operations of the
 * contract define it (`replaceSigningKeyPrivateJwk`): the same {@link canonicalJson} text.
 */
export function sameJsonValue(stored: unknown, expected: unknown): boolean {
  return canonicalJson(stored) === canonicalJson(expected);
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
