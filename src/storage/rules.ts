/**
 * Rules every backend applies the same way, kept in one place so the memory, SQLite and
 * PostgreSQL stores cannot drift apart. Internal to `src/storage/`.
 *
 * The judgements of the three single-use operations (code redemption, refresh rotation, device
 * poll) return a {@link Verdict}: the answer and the {@link StorageWrite}s that go with it (a
 * replayed code revokes its grant, a reused refresh token its family, a poll records its time).
 * Each backend only runs the writes, in order, inside the transaction that read what was judged
 * (memory/index.ts, sqlite/store.ts and postgres/store.ts `applyWrites`), so no backend decides
 * again what an outcome writes.
 */

import { GatehouseTypeError, OAuthError } from "../shared/errors.js";
import {
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
  type SignInGrantKey,
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

/**
 * The sign-in a grant belongs to (user, client, resource, browser session): what a code redemption
 * looks up to retire the grants its new one supersedes. `undefined` for a grant without a user or
 * a session (client credentials, device grants), which supersedes nothing.
 */
export function signInGrantKey(grant: GrantRecord): SignInGrantKey | undefined {
  const { userId, sessionHash } = grant;
  if (userId === undefined || sessionHash === undefined) return undefined;
  return { userId, clientId: grant.clientId, resource: grant.resource, sessionHash };
}

/** Consent accumulates: earlier scopes first, new ones appended, no duplicates. */
export function mergeScopes(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}

/**
 * One write a verdict asks of a backend, run in order inside the transaction of the operation
 * judged. Records are complete as written (the SQL backends insert their columns, the memory store
 * keeps them); `now` is the time the operation runs at.
 * - `revokeGrant`: the grant, its tokens and every grant exchanged from it (contract `revokeGrant`).
 * - `markCodeUsed`: a stored code's `consumedAt`; `insertCode`: a sealed code, stored consumed.
 * - `insertGrant`, `insertRefreshToken`: a new record, never overwriting one
 *   (a conflict throws StorageConflictError and the operation writes nothing).
 * - `markRotated`: a refresh token's first rotation time; `markSuccessorUsed`: the first use of one
 *   of a token's successors (an earlier one is kept).
 * - `updateDevice`: a device authorization as judged (every field but its two code hashes).
 */
export type StorageWrite =
  | { readonly op: "revokeGrant"; readonly grantId: string; readonly now: number }
  | { readonly op: "markCodeUsed"; readonly codeHash: string; readonly now: number }
  | { readonly op: "insertCode"; readonly code: AuthorizationCodeRecord }
  | { readonly op: "insertGrant"; readonly grant: GrantRecord }
  | { readonly op: "insertRefreshToken"; readonly token: RefreshTokenRecord }
  | { readonly op: "markRotated"; readonly tokenHash: string; readonly rotatedAt: number }
  | { readonly op: "markSuccessorUsed"; readonly tokenHash: string; readonly now: number }
  | { readonly op: "updateDevice"; readonly record: DeviceAuthorizationRecord };

/**
 * A judgement with its effects: `result` is the operation's answer once `writes` are done. Records
 * in `result` may share objects with `writes` (a backend that keeps records in memory copies what
 * it hands out).
 */
export interface Verdict<R> {
  readonly writes: readonly StorageWrite[];
  readonly result: R;
}

const NO_WRITES: readonly StorageWrite[] = [];

/** A verdict that writes nothing. */
function answer<R>(result: R): Verdict<R> {
  return { writes: NO_WRITES, result };
}

/**
 * How the backend holds the code it judges: a stored `row` (a redemption marks it used), a
 * `sealed` code with no row (a redemption inserts it, consumed: contract
 * `redeemSealedAuthorizationCode`), or a row the backend has `claimed` already, consumed in the
 * same transaction before the judgement (PostgreSQL's `UPDATE ... RETURNING`, which makes the
 * claim atomic across instances): nothing more to write for it.
 */
export type HeldCode = "row" | "sealed" | "claimed";

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
function tokensForRefresh(
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

function refreshTokenFor(
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
 * Appends the records one issuance writes to `writes`: the refresh token when the caller may write
 * one and was given one (a rotation passes the hash of the token it rotates as `rotatedFrom`). True
 * when a refresh token is written. No access-token row (contract version 2, docs/storage.md): an
 * access token is judged by its signature, its grant (named in its `jti`) and the revoked list.
 */
function pushIssuedTokens(
  writes: StorageWrite[],
  grant: GrantRecord,
  clientId: string,
  scopes: readonly string[],
  tokens: Omit<IssuedTokens, "grantExpiresAt">,
  writeRefresh: boolean,
  rotatedFrom?: string,
): boolean {
  if (!writeRefresh || !tokens.refreshToken) return false;
  const token = refreshTokenFor(grant, clientId, scopes, tokens.refreshToken, rotatedFrom);
  writes.push({ op: "insertRefreshToken", token });
  return true;
}

/**
 * The writes of a grant made without a code (contract `createGrantWithAccessToken`): the grant as
 * given; no access-token row (contract version 2), no refresh token.
 */
export function grantWithAccessTokenWrites(grant: GrantRecord): StorageWrite[] {
  return [{ op: "insertGrant", grant }];
}

/**
 * What a rotation that passed {@link judgeRefreshToken} writes besides the new tokens, the same for
 * every backend: the presented token marked rotated when it has a successor (its first rotation time
 * kept, so the race window never slides), and, at the first use of a token that was rotated from
 * another, that other token's `successorUsedAt` (from then on presenting it is reuse).
 */
function rotationMarks(
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

/** OAuth 2.1 §4.1.3, RFC 6749 §4.1.2: a code used twice revokes what its first use issued. */
function replayedCode(code: AuthorizationCodeRecord, now: number): Verdict<RedeemCodeResult> {
  return { writes: [{ op: "revokeGrant", grantId: code.grantId, now }], result: { status: "replayed" } };
}

/** The write that spends a live code the backend holds as `held`. */
function consumeCode(code: AuthorizationCodeRecord, now: number, held: HeldCode): readonly StorageWrite[] {
  if (held === "row") return [{ op: "markCodeUsed", codeHash: code.codeHash, now }];
  if (held === "sealed") return [{ op: "insertCode", code: { ...code, consumedAt: now } }];
  return NO_WRITES;
}

/**
 * What an authorization code the backend found does, decided here for all of them:
 * - `replayed`: the code was redeemed before (OAuth 2.1 §4.1.3, RFC 6749 §4.1.2: a code is single
 *   use, and a second use must revoke what the first issued): writes the revocation of the grant
 *   of the first redemption, `code.grantId`, with every token of it.
 * - `expired`: past its lifetime; writes nothing.
 * - `refused`: `check` (client, redirect URI, PKCE, resource) returned an error; the code is spent
 *   all the same (consumed as `held` says), so a wrong guess spends it.
 * - `issued`: the code is spent, and the grant and the `tokens` it was given are written.
 * `check` and `tokens` run here, before the backend writes anything, so a throw from either leaves
 * the code unused (the SQL backends roll back).
 */
export function judgeAuthorizationCode(
  code: AuthorizationCodeRecord,
  now: number,
  check: CodeRedemptionCheck,
  tokens: CodeRedemptionTokens,
  held: HeldCode,
): Verdict<RedeemCodeResult> {
  const state = authorizationCodeState(code, now);
  if (state === "consumed") return replayedCode(code, now);
  if (state === "expired") return answer({ status: "expired" });
  const error = check(code);
  if (error) return { writes: consumeCode(code, now, held), result: { status: "refused", error } };
  const issued = tokensForCode(tokens, { ...code });
  // RFC 9449 §5: the token endpoint, having verified the proof, says which key the grant is bound to.
  const grant = grantFromCode(code, now, issued.grantExpiresAt, issued.grantDpopJkt);
  const writes = [...consumeCode(code, now, held), { op: "insertGrant", grant } as const];
  const refreshIssued = pushIssuedTokens(
    writes,
    grant,
    code.clientId,
    code.scopes,
    issued,
    code.refreshAllowed,
  );
  return { writes, result: { status: "issued", code: { ...code, consumedAt: now }, grant, refreshIssued } };
}

/**
 * A code the backend found but could not claim (PostgreSQL: another transaction consumed it, or
 * it is past its lifetime): `replayed` with its revocation when it was redeemed before, otherwise
 * `expired`. A row that reads as live here was inserted after the claim ran, and this request
 * does not redeem it.
 */
export function judgeUnclaimedCode(code: AuthorizationCodeRecord, now: number): Verdict<RedeemCodeResult> {
  return authorizationCodeState(code, now) === "consumed"
    ? replayedCode(code, now)
    : answer({ status: "expired" });
}

/**
 * What every backend does with a refresh token and its grant, once both are found, in this
 * order: revoked, reused (RFC 9700 §4.14.2: a rotated token presented again, outside the race
 * window of {@link isRefreshTokenReuse}, means it leaked: writes the revocation of the whole
 * grant), expired (the token's idle or the grant's absolute lifetime, inside the window too),
 * refused by `check`; otherwise `issued` with the scopes `check` chose: writes the presented
 * token's rotation marks ({@link rotationMarks}) and the new tokens, the refresh token with
 * `rotatedFrom` = the presented one. `check` and `tokens` run here, before anything is written.
 */
export function judgeRefreshToken(
  token: RefreshTokenRecord,
  grant: GrantRecord,
  now: number,
  graceMs: number,
  check: Parameters<AuthorizationStore["rotateRefreshToken"]>[2],
  tokensOrFn: Parameters<AuthorizationStore["rotateRefreshToken"]>[3],
): Verdict<RotateRefreshResult> {
  if (grant.revokedAt !== undefined || token.revokedAt !== undefined) return answer({ status: "revoked" });
  if (isRefreshTokenReuse(token, now, graceMs)) {
    return { writes: [{ op: "revokeGrant", grantId: grant.grantId, now }], result: { status: "reused" } };
  }
  if (isExpired(token.expiresAt, now) || isExpired(grant.expiresAt, now))
    return answer({ status: "expired" });
  const verdict = check(token, grant);
  if (verdict.error) return answer({ status: "refused", error: verdict.error });
  const scopes = verdict.scopes ?? token.scopes;
  const tokens = tokensForRefresh(tokensOrFn, token, grant);
  // Without a successor the old token stays live (non-rotating refresh for confidential clients).
  const marks = rotationMarks(token, tokens.refreshToken !== undefined, now);
  const old = { ...token };
  const writes: StorageWrite[] = [];
  if (marks.rotatedAt !== undefined) {
    old.rotatedAt = marks.rotatedAt;
    writes.push({ op: "markRotated", tokenHash: token.tokenHash, rotatedAt: marks.rotatedAt });
  }
  if (marks.parentSuccessorUsed !== undefined) {
    writes.push({ op: "markSuccessorUsed", tokenHash: marks.parentSuccessorUsed, now });
  }
  pushIssuedTokens(writes, grant, token.clientId, scopes, tokens, true, token.tokenHash);
  return { writes, result: { status: "issued", old, grant, scopes: [...scopes] } };
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
 * What one poll of a device authorization the backend found does, by client `clientId`, decided
 * here for all of them (RFC 8628 §3.5):
 * - `not_found`: the authorization was issued to another client. The device code is bound to the
 *   client that requested it (RFC 8628 §3.4: the token request carries its `client_id`; RFC 6749
 *   §4.1.3 and §5.2 applied to the device code), so for any other client it does not exist:
 *   nothing is written (no poll time, no slow_down, not consumed) and the answer is the one for an
 *   unknown code, which tells the other client nothing about its state.
 * - `expired`, `denied`, `consumed`: nothing is written.
 * - `pending`, `slow_down`: writes the poll time, and for `slow_down` the interval raised by 5
 *   seconds (the device polled sooner than `interval` after its last poll).
 * - `refused`: `tokens` returned an error; writes the authorization consumed, issues nothing.
 * - `issued`: writes the authorization consumed, the grant and the `tokens` it was given, the
 *   refresh token only when the user allowed one.
 * `tokens` runs here, before the backend writes anything, so a throw from it changes nothing.
 */
export function judgeDevicePoll(
  stored: DeviceAuthorizationRecord,
  clientId: string,
  now: number,
  tokens: Parameters<AuthorizationStore["pollDeviceAuthorization"]>[3],
): Verdict<PollDeviceAuthorizationResult> {
  // First of all: another client learns nothing, not even that the code expired.
  if (stored.clientId !== clientId) return answer({ status: "not_found" });
  if (isExpired(stored.expiresAt, now)) return answer({ status: "expired" });
  if (stored.status === "denied" || stored.status === "consumed") return answer({ status: stored.status });
  if (stored.status === "pending") {
    // A device whose clock reads before the last poll (another instance's clock) polled too soon too.
    const tooSoon = stored.lastPolledAt !== undefined && now - stored.lastPolledAt < stored.interval * 1000;
    const record: DeviceAuthorizationRecord = tooSoon
      ? { ...stored, interval: stored.interval + SLOW_DOWN_STEP_SECONDS, lastPolledAt: now }
      : { ...stored, lastPolledAt: now };
    return {
      writes: [{ op: "updateDevice", record }],
      result: { status: tooSoon ? "slow_down" : "pending" },
    };
  }
  const consumed: DeviceAuthorizationRecord = { ...stored, status: "consumed", lastPolledAt: now };
  const issued = tokens(structuredClone(stored));
  if (issued instanceof OAuthError) {
    return {
      writes: [{ op: "updateDevice", record: consumed }],
      result: { status: "refused", error: issued },
    };
  }
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
  const writes: StorageWrite[] = [
    { op: "updateDevice", record: consumed },
    { op: "insertGrant", grant },
  ];
  const refreshIssued = pushIssuedTokens(
    writes,
    grant,
    grant.clientId,
    grant.scopes,
    issued,
    consumed.refreshAllowed === true,
  );
  return { writes, result: devicePollIssued(consumed, grant, refreshIssued) };
}

/** The answer of a poll that issued, as every backend returns it. */
function devicePollIssued(
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
