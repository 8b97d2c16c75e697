/**
 * The storage contract of the authorization server (DESIGN.md principle 6).
 *
 * Storage speaks OAuth operations, not key-value. Every single-use operation is atomic in every
 * backend (SQLite `BEGIN IMMEDIATE`, PostgreSQL `UPDATE ... WHERE consumed_at IS NULL RETURNING`
 * inside one transaction). Codes, tokens, secrets and session ids reach storage only as SHA-256
 * hashes (`*Hash` fields); nothing here ever sees a raw credential.
 *
 * Times are milliseconds since the epoch (`number`). Every backend passes the contract suite in
 * `src/storage/testing/` (published as `gatehouse/storage/testing`).
 */

import type { OAuthError } from "../shared/errors.js";
import type {
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  DeviceAuthorizationDecision,
  EndedUserAccess,
  GrantFilter,
  IssuedTokens,
  PollDeviceAuthorizationResult,
  PurgeResult,
  RedeemCodeResult,
  RotateRefreshResult,
  SignInGrantKey,
  SupersedeCandidate,
  SupersedeDecision,
  UserChange,
  UserChangeResult,
} from "./contract-operations.js";
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
  SigningKeyRecord,
  UpstreamIdentityRecord,
  UpstreamLoginRecord,
  UpstreamTokenSetRecord,
  UserRecord,
} from "./contract-records.js";

export { StorageConflictError, StorageUnavailableError } from "./contract-errors.js";
export type {
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  DeviceAuthorizationDecision,
  EndedUserAccess,
  GrantFilter,
  IssuedTokens,
  PollDeviceAuthorizationResult,
  PurgeResult,
  RedeemCodeResult,
  RotateRefreshResult,
  SignInGrantKey,
  SupersedeCandidate,
  SupersedeDecision,
  UserChange,
  UserChangeResult,
} from "./contract-operations.js";
export type {
  AccessTokenRecord,
  AuthorizationCodeRecord,
  ClientRecord,
  ClientSource,
  ConsentRecord,
  DeviceAuthorizationRecord,
  GrantRecord,
  InteractionRecord,
  RefreshTokenRecord,
  SessionRecord,
  SigningKeyRecord,
  TokenEndpointAuthMethod,
  UpstreamIdentityRecord,
  UpstreamLoginRecord,
  UpstreamTokenSetRecord,
  UserRecord,
} from "./contract-records.js";

/** The longest key {@link AuthorizationStore.useOnce} accepts, in UTF-16 code units. */
export const MAX_MARKER_KEY_LENGTH = 512;

/**
 * The contract version a store implements ({@link AuthorizationStore.contractVersion}; absent
 * means 1). Version 2 (issue 25, docs/storage.md "Access tokens without a row per issuance"):
 * issuance writes no access-token row (`IssuedTokens.accessToken` and the access token of
 * `createGrantWithAccessToken` are ignored), {@link AuthorizationStore.revokeAccessToken} adds its
 * `token` as a revoked row when none exists, and {@link AuthorizationStore.requestStepUp} finds
 * the grant named in the `jti` (`<grantId>.<unique>`, split at the last `.`). The server drives
 * both versions alike: it passes the same arguments, and judges an access token by its signature,
 * its grant and a row only when one exists.
 */
export type StorageContractVersion = 1 | 2;

export interface AuthorizationStore {
  /** {@link StorageContractVersion}; absent means 1. `runStorageContract` runs that version's cases. */
  readonly contractVersion?: StorageContractVersion;
  /** Creates or upgrades the schema; safe to call from several instances at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;

  // Clients
  createClient(client: ClientRecord): Promise<void>;
  /** Inserts or replaces (used for cached metadata documents and `clients add --force`). */
  upsertClient(client: ClientRecord): Promise<void>;
  getClient(clientId: string): Promise<ClientRecord | undefined>;
  listClients(): Promise<ClientRecord[]>;
  deleteClient(clientId: string): Promise<boolean>;
  /** Records use; clears `expiresAt` so a used dynamic registration no longer expires. */
  markClientUsed(clientId: string, now: number): Promise<void>;

  // Users
  createUser(user: UserRecord): Promise<void>;
  getUserByUsername(username: string): Promise<UserRecord | undefined>;
  getUser(id: string): Promise<UserRecord | undefined>;
  listUsers(): Promise<UserRecord[]>;
  setUserPassword(id: string, passwordHash: string): Promise<void>;
  /**
   * Atomic: applies `change` to user `id` unless it would leave no enabled administrator where
   * there was one (storage/rules.ts `judgeUserChange` decides; of two concurrent changes to two
   * administrators at most one passes). `disable` keeps an earlier `disabledAt`. It changes the
   * account only: ending what the user holds is {@link endUserAccess}, called after this one has
   * settled, so that a grant committed meanwhile is either revoked there or sees the change when
   * its issuer reads the user again (authorization-server/users.ts).
   */
  changeUser(id: string, change: UserChange, now: number): Promise<UserChangeResult>;
  /**
   * Revokes every grant of user `userId` (as {@link revokeGrant}: its tokens, its upstream token
   * sets, the grants exchanged from it), deletes the user's browser sessions with the upstream
   * token sets they hold, and marks the user's approved, not yet redeemed device authorizations
   * denied. In one transaction.
   */
  endUserAccess(userId: string, now: number): Promise<EndedUserAccess>;

  // Browser sessions
  createSession(session: SessionRecord): Promise<void>;
  getSession(idHash: string, now: number): Promise<SessionRecord | undefined>;
  /** Deletes the session and the upstream token sets it holds (grants keep their copies). */
  deleteSession(idHash: string): Promise<void>;

  // Pending authorization requests
  createInteraction(interaction: InteractionRecord): Promise<void>;
  getInteraction(id: string, now: number): Promise<InteractionRecord | undefined>;
  setInteractionUser(id: string, userId: string): Promise<void>;
  /** Atomic: returns the record once, deletes it; a second call returns undefined. */
  consumeInteraction(id: string, now: number): Promise<InteractionRecord | undefined>;

  // Consents
  getConsent(userId: string, clientId: string, redirectUri: string): Promise<ConsentRecord | undefined>;
  /** Adds scopes to the consent for (user, client, redirect URI), creating it when absent. */
  grantConsent(consent: ConsentRecord): Promise<void>;
  revokeConsent(userId: string, clientId: string, redirectUri?: string): Promise<number>;
  listConsents(userId?: string): Promise<ConsentRecord[]>;

  // Authorization codes
  insertAuthorizationCode(code: AuthorizationCodeRecord): Promise<void>;
  /**
   * Atomic redemption. Marks the code consumed whatever happens next (any attempt consumes it),
   * runs `check` (client, redirect URI, PKCE, resource; pure and synchronous) and, when it passes,
   * creates the grant and writes `tokens` in the same transaction. A code seen again revokes the
   * grant of its first redemption.
   *
   * Optional `supersedes`: with a new grant that has a user and a session, the store offers it, in
   * one call, every active grant of that sign-in committed before this one (never the new grant),
   * oldest first, and revokes, in the same transaction, those it picks (`superseded` in the result).
   * If it throws, the redemption still issues and nothing is retired. A store may ignore it (then
   * `superseded` is absent).
   */
  redeemAuthorizationCode(
    codeHash: string,
    now: number,
    check: CodeRedemptionCheck,
    tokens: CodeRedemptionTokens,
    supersedes?: SupersedeDecision,
  ): Promise<RedeemCodeResult>;
  /**
   * Optional: the redemption of a sealed code, which was never inserted (the authorization server
   * sealed its whole record into the code it handed out; authorization-server/grants/sealed-code.ts).
   * The same atomic redemption as {@link redeemAuthorizationCode} on `code.codeHash`, except that
   * where no row exists the store judges `code` itself (never consumed) and, when the judgement
   * consumes it (refused or issued), inserts it as the consumed row in the same transaction: of
   * concurrent redemptions of one code exactly one inserts, the others find the row and replay. An
   * expired code, or a throw from `check` or `tokens`, writes nothing. Without this method the
   * server stores every code at issue.
   */
  redeemSealedAuthorizationCode?(
    code: AuthorizationCodeRecord,
    now: number,
    check: CodeRedemptionCheck,
    tokens: CodeRedemptionTokens,
    supersedes?: SupersedeDecision,
  ): Promise<RedeemCodeResult>;

  // Grants and tokens
  /**
   * For client_credentials (and grants made without a code): a grant plus its access token, no
   * refresh token. `grant.dpopJkt` is stored as given. Version 2 writes the grant only.
   */
  createGrantWithAccessToken(grant: GrantRecord, accessToken: IssuedTokens["accessToken"]): Promise<void>;
  getGrant(grantId: string): Promise<GrantRecord | undefined>;
  /**
   * Grants matching every given field, oldest first. `active: true` leaves out revoked grants. The
   * narrow form (user, client, resource, session, active) must not cost more than the handful of
   * rows it returns (a code redemption asks for those rows through listSupersedeCandidates).
   */
  listGrants(filter?: GrantFilter): Promise<GrantRecord[]>;
  /**
   * The active (not revoked) grants of `key`, oldest first (creation time, then id), with only the
   * fields the supersede decision reads: every code redemption of a signed-in user asks, so it
   * reads no more than the decision needs. Same rows as `listGrants({ ...key, active: true })`.
   * Optional: a store without it is asked through `listGrants` instead (every built-in backend has
   * it; a store written before it existed keeps retiring superseded grants).
   */
  listSupersedeCandidates?(key: SignInGrantKey): Promise<SupersedeCandidate[]>;
  /**
   * Revokes the grant, its refresh tokens and its access tokens, and deletes its upstream token
   * sets; and the same for every grant exchanged from it, down the chain (`exchangedFrom`, RFC
   * 7009 §2.1). An earlier revocation time is kept. True when the grant exists.
   */
  revokeGrant(grantId: string, now: number): Promise<boolean>;
  /**
   * Sets `stepUpRequestedAt = now` on the live (not revoked) grant of access token `jti`: a
   * co-hosted resource server refused that token for insufficient scope. Version 2: the grant the
   * `jti` names (`<grantId>.<unique>`), else that of the token's row (a token issued before the
   * change). False when there is no such grant or it is revoked. The caller verified the token.
   */
  requestStepUp(jti: string, now: number): Promise<boolean>;

  /**
   * Atomic rotation: `check` (client binding, scope narrowing, resource) runs on the live token;
   * when it passes the old token is marked rotated (its first rotation time is kept) and `tokens`
   * written, the new refresh token with `rotatedFrom` = `tokenHash`; and the token this one was
   * rotated from, if any, gets `successorUsedAt` (its first successor's first use).
   *
   * A token that was already rotated revokes the whole grant (`reused`), unless it was first
   * rotated less than `graceMs` ago and none of its successors has been used yet: then it is
   * rotated again, to a sibling of its first successor (refresh races of clients running several
   * processes; storage/rules.ts `isRefreshTokenReuse` decides).
   * When `tokens.refreshToken` is absent the old token is not marked rotated (it stays usable).
   */
  rotateRefreshToken(
    tokenHash: string,
    now: number,
    check: (token: RefreshTokenRecord, grant: GrantRecord) => { error?: OAuthError; scopes?: string[] },
    /** What to write; a function of the live token and its grant when lifetimes depend on them. */
    tokens:
      | Omit<IssuedTokens, "grantExpiresAt">
      | ((token: RefreshTokenRecord, grant: GrantRecord) => Omit<IssuedTokens, "grantExpiresAt">),
    graceMs?: number,
  ): Promise<RotateRefreshResult>;
  getRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined>;
  /**
   * The access token's row: in version 2 only a revoked one (the revoked list) or one written
   * before the change; the server reads it to refuse a revoked token (RFC 7009 §2.1).
   */
  getAccessToken(jti: string): Promise<AccessTokenRecord | undefined>;
  /**
   * Revokes one access token (RFC 7009 §2.1); an earlier revocation time is kept. Version 2: when
   * it has no row, `token` (the server read it from the verified JWT) is stored revoked, unless its
   * grant is no longer stored; the purge deletes it once `token.expiresAt` has passed. True when
   * the token is now on the list.
   */
  revokeAccessToken(jti: string, now: number, token?: Omit<AccessTokenRecord, "revokedAt">): Promise<boolean>;

  // Signing keys
  listSigningKeys(): Promise<SigningKeyRecord[]>;
  /** Adds `key` and retires the current signer atomically (older keys stay published until expiry). */
  addSigningKey(
    key: SigningKeyRecord,
    retireOthersAt?: { retiredAt: number; expiresAt: number },
  ): Promise<void>;
  /**
   * Compare-and-swap of a key's private part (`gatehouse keys rewrap` re-encrypting it under a
   * new key-encryption key): atomically replaces the private JWK of `kid` with `next` only if the
   * stored one still equals `expected`, so a change made meanwhile by another process is never
   * overwritten. Equal means the same JSON value: the stored JWK and `expected` serialise
   * (`JSON.stringify`, which drops `undefined` members) to the same text once every object's
   * members are put in one fixed order, at every depth (`canonicalJson` in ./rules.ts, the one
   * place this is decided). Member order is not compared (PostgreSQL's `jsonb` does not keep it);
   * names, array order and every value are. `kid`, `alg`, the public JWK and the dates never
   * change. False when no key has this `kid` or the stored JWK differs.
   */
  replaceSigningKeyPrivateJwk(
    kid: string,
    expected: Record<string, unknown>,
    next: Record<string, unknown>,
  ): Promise<boolean>;

  // Device authorizations (RFC 8628)
  /** Raises {@link StorageConflictError} when the device code hash or the user code hash is taken. */
  createDeviceAuthorization(record: DeviceAuthorizationRecord): Promise<void>;
  /** A pending, unexpired authorization by user code (for the verification page). */
  getDeviceAuthorizationByUserCode(
    userCodeHash: string,
    now: number,
  ): Promise<DeviceAuthorizationRecord | undefined>;
  /**
   * pending -> approved (with userId, approvedScopes, sessionHash, refreshAllowed) or -> denied.
   * False when not pending or expired. Atomic: of two concurrent decisions exactly one wins.
   */
  decideDeviceAuthorization(
    userCodeHash: string,
    decision: DeviceAuthorizationDecision,
    now: number,
  ): Promise<boolean>;
  /**
   * One poll of the token endpoint (RFC 8628 §3.4, §3.5) by client `clientId`, atomic: unknown, or
   * issued to another client -> not_found (whatever its state, and nothing changes: the device code
   * is bound to the client that asked for it, so another client may neither learn its state nor
   * slow it down nor spend it); expired ->
   * expired; denied -> denied; consumed -> consumed (a second redemption); pending and polled sooner
   * than `interval` seconds after the last poll -> slow_down (interval += 5, lastPolledAt = now);
   * pending -> pending (lastPolledAt = now); approved -> `tokens(record)` runs inside the
   * transaction: an OAuthError -> refused (the record is consumed, nothing issued); otherwise the
   * record becomes consumed and the grant (grantId, userId, clientId, approvedScopes, resource,
   * sessionHash, dpopJkt = `grantDpopJkt ?? record.dpopJkt`) is written with its access token, and
   * its refresh token when `refreshAllowed`, in the same transaction -> issued. A throw from
   * `tokens` changes nothing.
   */
  pollDeviceAuthorization(
    deviceCodeHash: string,
    clientId: string,
    now: number,
    tokens: (record: DeviceAuthorizationRecord) => IssuedTokens | OAuthError,
  ): Promise<PollDeviceAuthorizationResult>;

  // Single-use markers (RFC 9449 §11.1 DPoP proof `jti`, RFC 7523 §3 assertion `jti`)
  /**
   * Records `key` as used until `expiresAt`. True when the key was not recorded (or its record had
   * expired at `now`); false for a replay, which leaves the earlier record as it was. Atomic across
   * instances: of concurrent calls with one key exactly one gets true. The key is opaque (callers
   * namespace it, e.g. `dpop:as:<jkt>:<jti>`, hashed or not) but bounded: an empty key, one longer
   * than {@link MAX_MARKER_KEY_LENGTH} or one containing U+0000 is refused with a
   * `GatehouseTypeError` (`ERR_INVALID_OPTION`), so hash keys built from unbounded remote input.
   */
  useOnce(key: string, expiresAt: number, now: number): Promise<boolean>;

  // Sign-in through upstream identity providers
  createUpstreamLogin(login: UpstreamLoginRecord): Promise<void>;
  /**
   * Atomic: returns the record once and deletes it, whichever instance asks; undefined when unknown,
   * already consumed or expired at `now`.
   */
  consumeUpstreamLogin(stateHash: string, now: number): Promise<UpstreamLoginRecord | undefined>;
  getUpstreamIdentity(providerId: string, subject: string): Promise<UpstreamIdentityRecord | undefined>;
  /** Links an identity to an existing user; {@link StorageConflictError} when it is linked already. */
  linkUpstreamIdentity(identity: UpstreamIdentityRecord): Promise<void>;
  /**
   * Creates `user` and links `identity` to it in one transaction: {@link StorageConflictError}, and
   * nothing written, when the identity is linked already or the username is taken.
   */
  createUserWithUpstreamIdentity(user: UserRecord, identity: UpstreamIdentityRecord): Promise<void>;
  /** Updates a linked identity's profile fields and `lastSignInAt`. */
  recordUpstreamSignIn(
    identity: Pick<
      UpstreamIdentityRecord,
      "providerId" | "subject" | "email" | "emailVerified" | "displayName" | "lastSignInAt"
    >,
  ): Promise<void>;

  // Upstream tokens kept for resource servers (UpstreamTokenSetRecord)
  /** Keeps (or replaces) the set of `set.providerId` held by session `sessionHash`. */
  keepSessionUpstreamTokens(sessionHash: string, set: UpstreamTokenSetRecord): Promise<void>;
  /**
   * Copies the unexpired sets held by session `sessionHash` to grant `grantId` (version 1, no
   * expiry), only when that grant exists, is not revoked, was approved in that session and belongs
   * to the sets' user; a set the grant holds already is kept. Returns how many were copied.
   */
  bindUpstreamTokens(sessionHash: string, grantId: string, now: number): Promise<number>;
  getUpstreamTokens(grantId: string, providerId: string): Promise<UpstreamTokenSetRecord | undefined>;
  /**
   * Compare-and-swap: replaces the sealed set of (grant, provider) and raises its version, only if
   * its version is still `expectedVersion`. False when it changed meanwhile or is gone.
   */
  replaceUpstreamTokens(
    grantId: string,
    providerId: string,
    expectedVersion: number,
    next: Pick<UpstreamTokenSetRecord, "sealed" | "updatedAt">,
  ): Promise<boolean>;
  /** Deletes the set of (grant, provider) (the provider refused its refresh token); true when there was one. */
  deleteUpstreamTokens(grantId: string, providerId: string): Promise<boolean>;

  // Rate limits (shared across instances)
  /** Adds one hit to `key` in the fixed window starting at `windowStart`; returns the new count. */
  hitRateLimit(key: string, windowStart: number, windowMs: number): Promise<number>;

  // Cached Client ID Metadata Documents (shared across instances)
  getCachedDocument(url: string, now: number): Promise<{ body: string; expiresAt: number } | undefined>;
  putCachedDocument(url: string, body: string, expiresAt: number): Promise<void>;

  /**
   * Deletes expired codes, tokens (in version 2 the access-token rows are revoked ones and rows
   * written before the change), interactions, sessions, unused registrations, single-use markers,
   * device authorizations, upstream logins and session-held upstream token sets past their expiry,
   * and the upstream token sets of purged grants; live grants stay.
   */
  purgeExpired(now: number): Promise<PurgeResult>;
}
