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

import { GatehouseError, type OAuthError } from "../shared/errors.js";

export type ClientSource = "preregistered" | "dynamic" | "metadata-document";

export type TokenEndpointAuthMethod =
  | "none"
  | "client_secret_basic"
  | "client_secret_post"
  | "private_key_jwt";

export interface ClientRecord {
  clientId: string;
  source: ClientSource;
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  redirectUris: string[];
  grantTypes: string[];
  responseTypes: string[];
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /** SHA-256 (base64url) of the client secret, for the `client_secret_*` methods. */
  clientSecretHash?: string;
  /** Seconds since epoch when the secret expires (RFC 7591 `client_secret_expires_at`), 0 = never. */
  clientSecretExpiresAt?: number;
  jwksUri?: string;
  jwks?: { keys: Record<string, unknown>[] };
  /** Scopes the client may ask for; undefined = any scope the server offers. */
  scope?: string;
  /** The registration metadata as accepted, for RFC 7591 responses and the admin page. */
  metadata: Record<string, unknown>;
  createdAt: number;
  lastUsedAt?: number;
  /** Dynamic registrations that are never used expire (SECURITY.md "Dynamic registration"). */
  expiresAt?: number;
}

export interface UserRecord {
  id: string;
  username: string;
  /**
   * Memory-hard hash (scrypt) in a self-describing string. A user created from an upstream
   * identity has no password: `NO_PASSWORD` (../authorization-server/upstream/accounts.ts), which no
   * password verifies, so the column stays required and no code path has to remember a null.
   */
  passwordHash: string;
  isAdmin: boolean;
  createdAt: number;
  /**
   * When an operator disabled the account ({@link AuthorizationStore.changeUser}): it cannot sign
   * in, and no grant is issued for it; absent for an account in use.
   */
  disabledAt?: number;
}

/**
 * An operator's change to an account ({@link AuthorizationStore.changeUser}). `remove` deletes the
 * user with its consents and upstream identity links; grants keep the id (revoked by
 * {@link AuthorizationStore.endUserAccess}).
 */
export type UserChange = "disable" | "enable" | "make-admin" | "remove-admin" | "remove";

export type UserChangeResult =
  /** `user` as it is now (for `remove`: as it was). */
  | { status: "changed"; user: UserRecord }
  | { status: "not_found" }
  /**
   * Refused: the user is the last enabled administrator, and `disable`, `remove` or `remove-admin`
   * would leave the server with none (nobody could use the admin page). Nothing changed.
   */
  | { status: "last_admin" };

/** What {@link AuthorizationStore.endUserAccess} ended. */
export interface EndedUserAccess {
  /** Grants revoked (with every token of them, and the grants exchanged from them). */
  grants: number;
  /** Browser sessions deleted. */
  sessions: number;
}

/**
 * A local account's link to a user of an upstream identity provider. The key is (provider,
 * subject), the provider's stable user id; an account is never found by e-mail.
 */
export interface UpstreamIdentityRecord {
  providerId: string;
  /** `sub` of the ID token, GitHub's numeric `id`. */
  subject: string;
  userId: string;
  /** Profile fields as last seen at sign-in, for display only. */
  email?: string;
  emailVerified: boolean;
  displayName?: string;
  createdAt: number;
  lastSignInAt: number;
}

/**
 * An upstream sign-in waiting for its callback: single use, minutes long, bound to the browser.
 * The `state` sent to the provider is stored only as its hash; the PKCE verifier and the nonce are
 * derived from the browser's binding cookie and never stored.
 */
export interface UpstreamLoginRecord {
  stateHash: string;
  providerId: string;
  /** SHA-256 of the browser's binding cookie (as {@link InteractionRecord.browserBindingHash}). */
  browserBindingHash: string;
  /** The authorization request it is a step of; absent for a plain account sign-in. */
  interactionId?: string;
  /** For an account sign-in: the path under the issuer to return to. */
  returnTo?: string;
  createdAt: number;
  expiresAt: number;
}

/**
 * An upstream provider's tokens for one user, kept when the operator asks (`keepTokens` on the
 * provider): access token, refresh token, expiry and scope, sealed together under the server's
 * key-encryption key (../authorization-server/upstream/tokens.ts), so the store holds only
 * ciphertext. A set is held first by the browser session that signed in, then copied to every grant
 * that session approves ({@link AuthorizationStore.bindUpstreamTokens}), and dies with its holder:
 * the session's logout or expiry, the grant's revocation or purge.
 */
export interface UpstreamTokenSetRecord {
  providerId: string;
  userId: string;
  /** The sealed token set: the JSON text of a secret envelope, opaque to the store. */
  sealed: string;
  /** Raised by each replacement: refreshes racing across instances compare and swap on it. */
  version: number;
  createdAt: number;
  updatedAt: number;
  /** A session-held set lapses with its session; a grant's set lives as long as the grant. */
  expiresAt?: number;
}

/** A signed-in browser. The cookie value is random; only its hash is stored. */
export interface SessionRecord {
  idHash: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
}

/**
 * A validated authorization request waiting for login and consent. Bound to the browser that
 * started it through `browserBindingHash` (hash of a cookie set at `/authorize`).
 */
export interface InteractionRecord {
  id: string;
  browserBindingHash: string;
  clientId: string;
  redirectUri: string;
  /** Whether the authorization request carried `redirect_uri` (handed on to the code). */
  redirectUriSent: boolean;
  scopes: string[];
  resource: string;
  state?: string;
  codeChallenge: string;
  codeChallengeMethod: "S256";
  /** Hash of the CSRF token the forms of this interaction carry. */
  csrfHash: string;
  userId?: string;
  /**
   * RFC 9449 §10: the JWK SHA-256 thumbprint (base64url) the authorization request named in
   * `dpop_jkt`, handed on to the code ({@link AuthorizationCodeRecord.dpopJkt}) when the interaction
   * completes, so a request that needs the login or consent page is bound like a silent one.
   */
  dpopJkt?: string;
  /**
   * What the request's `prompt` demands (OpenID Connect Core §3.1.2.1): `login`, a sign-in newer
   * than the request; `consent`, the consent page even where a remembered consent covers it.
   */
  prompt?: Array<"login" | "consent">;
  createdAt: number;
  expiresAt: number;
}

/** Consent is per user, client and redirect URI (SECURITY.md "Consent"). */
export interface ConsentRecord {
  userId: string;
  clientId: string;
  redirectUri: string;
  scopes: string[];
  createdAt: number;
  updatedAt: number;
}

export interface AuthorizationCodeRecord {
  codeHash: string;
  /** The grant this code creates on redemption (known in advance so a replay can revoke it). */
  grantId: string;
  clientId: string;
  userId: string;
  redirectUri: string;
  /**
   * Whether the authorization request carried `redirect_uri`: then the token request must repeat
   * it (OAuth 2.1 §4.1.3, RFC 6749 §4.1.3 "required, if included in the authorization request").
   */
  redirectUriSent: boolean;
  scopes: string[];
  resource: string;
  codeChallenge: string;
  codeChallengeMethod: "S256";
  /** Whether redemption may issue a refresh token (offline_access / refresh_token grant type). */
  refreshAllowed: boolean;
  /** Hash of the browser session that approved the request; copied to the grant (see GrantRecord). */
  sessionHash?: string;
  /**
   * RFC 9449 §10: the JWK SHA-256 thumbprint (base64url) the authorization request named in
   * `dpop_jkt`; the token request must then prove possession of that key. Stored for the token
   * endpoint to compare; the grant's binding is what {@link IssuedTokens.grantDpopJkt} says.
   */
  dpopJkt?: string;
  createdAt: number;
  expiresAt: number;
  consumedAt?: number;
}

export interface GrantRecord {
  grantId: string;
  clientId: string;
  /** Undefined for client_credentials grants. */
  userId?: string;
  scopes: string[];
  resource: string;
  createdAt: number;
  /** Absolute lifetime of the grant (refresh tokens cannot outlive it). */
  expiresAt: number;
  revokedAt?: number;
  /**
   * Hash of the browser session that approved the grant. A later grant of the same user, client
   * and resource approved in the same session, covering these scopes, supersedes this one.
   */
  sessionHash?: string;
  /**
   * When a co-hosted resource server last refused one of this grant's access tokens for
   * insufficient scope ({@link AuthorizationStore.requestStepUp}).
   */
  stepUpRequestedAt?: number;
  /**
   * RFC 9449 §5: the JWK SHA-256 thumbprint (base64url) of the DPoP key the grant's refresh tokens
   * are bound to (public clients); a refresh must prove possession of this key.
   */
  dpopJkt?: string;
  /**
   * RFC 8693: the grant whose access token this grant was exchanged from. Revoking a grant revokes
   * every grant exchanged from it, down the chain ({@link AuthorizationStore.revokeGrant}).
   */
  exchangedFrom?: string;
}

/**
 * An RFC 8628 device authorization: the device polls with the device code, the user approves at
 * the verification page with the user code. Only hashes of both codes are stored.
 */
export interface DeviceAuthorizationRecord {
  /** SHA-256 (base64url) of the device code. */
  deviceCodeHash: string;
  /** SHA-256 (base64url) of the normalized user code. */
  userCodeHash: string;
  clientId: string;
  scopes: string[];
  resource: string;
  /** Seconds the client must wait between polls (RFC 8628 §3.5; raised by 5 on each slow_down). */
  interval: number;
  createdAt: number;
  expiresAt: number;
  lastPolledAt?: number;
  status: "pending" | "approved" | "denied" | "consumed";
  /** Set on approval. */
  userId?: string;
  /** Scopes the user approved (may be fewer than requested). */
  approvedScopes?: string[];
  /** Hash of the browser session that approved (copied to the grant like codes do). */
  sessionHash?: string;
  /** Set on approval: whether the grant may have a refresh token. */
  refreshAllowed?: boolean;
  /** The grant the approval will create, known in advance (like AuthorizationCodeRecord.grantId). */
  grantId: string;
  /** RFC 9449: the DPoP key thumbprint the device request was bound to, if any. */
  dpopJkt?: string;
}

/** The user's answer at the verification page (RFC 8628 §3.3). */
export type DeviceAuthorizationDecision =
  | {
      approved: true;
      userId: string;
      approvedScopes: string[];
      sessionHash?: string;
      refreshAllowed: boolean;
    }
  | { approved: false };

export type PollDeviceAuthorizationResult =
  | { status: "issued"; record: DeviceAuthorizationRecord; grant: GrantRecord; refreshIssued: boolean }
  /** `tokens` refused: the authorization is now consumed, nothing was issued. */
  | { status: "refused"; error: OAuthError }
  | { status: "pending" | "slow_down" | "denied" | "expired" | "consumed" | "not_found" };

export interface RefreshTokenRecord {
  tokenHash: string;
  grantId: string;
  clientId: string;
  /** Scopes this token may refresh to (narrowed by earlier refreshes, never widened). */
  scopes: string[];
  createdAt: number;
  /** Idle expiry: the token must be used before this. */
  expiresAt: number;
  rotatedAt?: number;
  /** Set by `revokeGrant` (the token is dead with its grant); ignored on input. */
  revokedAt?: number;
  /**
   * The hash of the token this one was rotated from; set by `rotateRefreshToken` on the successor it
   * writes (absent for a code's or a device poll's first token). Ignored on input.
   */
  rotatedFrom?: string;
  /**
   * When one of this token's successors was first used: from then on this rotated token is only a
   * stolen copy (RFC 9700 §4.14.2) and no grace window honours it. Set by `rotateRefreshToken`.
   */
  successorUsedAt?: number;
}

/** A record of every access token issued, so revocation and introspection can see it. */
export interface AccessTokenRecord {
  jti: string;
  grantId: string;
  clientId: string;
  userId?: string;
  scopes: string[];
  resource: string;
  createdAt: number;
  expiresAt: number;
  revokedAt?: number;
}

export interface SigningKeyRecord {
  kid: string;
  alg: "ES256" | "EdDSA";
  publicJwk: Record<string, unknown>;
  privateJwk: Record<string, unknown>;
  createdAt: number;
  /** Set when a newer key takes over signing; the key stays published until `expiresAt`. */
  retiredAt?: number;
  expiresAt?: number;
}

/** New tokens to write in the same transaction as a code redemption or a refresh rotation. */
export interface IssuedTokens {
  accessToken: Omit<
    AccessTokenRecord,
    "grantId" | "clientId" | "userId" | "scopes" | "resource" | "revokedAt"
  >;
  /** Written only when the code allows refresh (or, on rotation, always). */
  refreshToken?: Omit<
    RefreshTokenRecord,
    "grantId" | "clientId" | "scopes" | "rotatedAt" | "rotatedFrom" | "successorUsedAt"
  >;
  /** Absolute expiry of a grant created by a code redemption. */
  grantExpiresAt: number;
  /**
   * RFC 9449 §5: the DPoP key thumbprint a grant created by this issuance is bound to (the token
   * endpoint decides it from the proof it verified). Ignored by a refresh rotation: the grant exists.
   */
  grantDpopJkt?: string;
}

export type RedeemCodeResult =
  | {
      status: "issued";
      code: AuthorizationCodeRecord;
      grant: GrantRecord;
      refreshIssued: boolean;
      /**
       * The grants this redemption revoked in its own transaction because `supersedes` picked them
       * (empty when none, or when the new grant has no user or session). Absent when the store did
       * not decide: it has no such support, no `supersedes` was given, or `supersedes` threw; the
       * caller then retires superseded grants itself after the commit.
       */
      superseded?: string[];
    }
  /** The code was valid but `check` refused it: the code is now consumed, nothing was issued. */
  | { status: "refused"; error: OAuthError }
  /** Second use: the grant of the first redemption (and every token of it) is now revoked. */
  | { status: "replayed" }
  | { status: "not_found" }
  | { status: "expired" };

export type RotateRefreshResult =
  | { status: "issued"; old: RefreshTokenRecord; grant: GrantRecord; scopes: string[] }
  /** `check` refused: nothing changed, the old token is still usable. */
  | { status: "refused"; error: OAuthError }
  /** A rotated token came back: the whole grant is now revoked. */
  | { status: "reused" }
  | { status: "not_found" }
  | { status: "expired" }
  | { status: "revoked" };

export interface PurgeResult {
  codes: number;
  refreshTokens: number;
  accessTokens: number;
  interactions: number;
  sessions: number;
  clients: number;
  grants: number;
  /** Single-use markers past their expiry ({@link AuthorizationStore.useOnce}). */
  markers: number;
  deviceAuthorizations: number;
}

/** The longest key {@link AuthorizationStore.useOnce} accepts, in UTF-16 code units. */
export const MAX_MARKER_KEY_LENGTH = 512;

/**
 * Raised by a backend when the database cannot be reached or written (down, locked past the busy
 * timeout, read-only, disk full). Endpoints turn it into a 503 `temporarily_unavailable`.
 */
export class StorageUnavailableError extends GatehouseError<"ERR_STORAGE_UNAVAILABLE"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORAGE_UNAVAILABLE", message, options);
    this.name = "StorageUnavailableError";
  }
}

/**
 * Raised when a create would overwrite an existing record (same client id, username, code hash,
 * session, interaction id or key id). `upsertClient` never raises it.
 */
export class StorageConflictError extends GatehouseError<"ERR_STORAGE_CONFLICT"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORAGE_CONFLICT", message, options);
    this.name = "StorageConflictError";
  }
}

/** What {@link AuthorizationStore.listGrants} may filter on. */
export interface GrantFilter {
  userId?: string;
  clientId?: string;
  resource?: string;
  sessionHash?: string;
  /** Only grants that are not revoked. */
  active?: boolean;
}

/**
 * One sign-in's grants for a client and resource: what a code redemption looks up to retire the
 * grants its new one supersedes ({@link AuthorizationStore.listSupersedeCandidates}).
 */
/** A code redemption's checks (client, redirect URI, PKCE, resource): pure and synchronous. */
export type CodeRedemptionCheck = (code: AuthorizationCodeRecord) => OAuthError | undefined;

/** What a code redemption writes; a function of the code when lifetimes depend on what was granted. */
export type CodeRedemptionTokens = IssuedTokens | ((code: AuthorizationCodeRecord) => IssuedTokens);

export interface SignInGrantKey {
  userId: string;
  clientId: string;
  resource: string;
  sessionHash: string;
}

/**
 * The parts of an active grant the supersede decision reads: its scopes, creation time and id for
 * the order, and what tells one instance of a client from another (its DPoP key, the step-up a
 * resource asked of it). Resource and session are the key's (repeated so the decision can check
 * them). `dpopJkt` and `stepUpRequestedAt` are present when the grant has them.
 */
export type SupersedeCandidate = Pick<
  GrantRecord,
  "grantId" | "scopes" | "resource" | "sessionHash" | "createdAt" | "dpopJkt" | "stepUpRequestedAt"
>;

/**
 * Which of `candidates` a new grant retires: `candidates` are the active grants of its sign-in
 * (same user, client, resource and session) that the store has committed before it, oldest first
 * (creation time, then id); the answer is the ids of those to revoke (an id that is not a
 * candidate is ignored). Offered all at once because the rule bounds how many grants one sign-in
 * keeps. Pure and synchronous: the store calls it inside the redemption's transaction
 * (authorization-server/grants/superseded-grants.ts decides; the store only applies it).
 */
export type SupersedeDecision = (grant: GrantRecord, candidates: readonly SupersedeCandidate[]) => string[];

export interface AuthorizationStore {
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
   * refresh token. `grant.dpopJkt` is stored as given.
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
   * co-hosted resource server refused that token for insufficient scope. False when there is no
   * such access token or its grant is revoked.
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
  getAccessToken(jti: string): Promise<AccessTokenRecord | undefined>;
  revokeAccessToken(jti: string, now: number): Promise<boolean>;

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
   * Deletes expired codes, tokens, interactions, sessions, unused registrations, single-use markers,
   * device authorizations, upstream logins and session-held upstream token sets past their expiry,
   * and the upstream token sets of purged grants; live grants stay.
   */
  purgeExpired(now: number): Promise<PurgeResult>;
}
