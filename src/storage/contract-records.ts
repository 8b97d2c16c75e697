/**
 * The records of the storage contract (./contract.ts): the shapes a backend stores and hands
 * back, one per kind of row (clients, users, sessions, interactions, consents, codes, grants,
 * tokens, keys, device authorizations, upstream identities and token sets). Moved out of
 * contract.ts so the store interface reads on its own; credentials appear only as `*Hash` fields.
 */

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
 * key-encryption key (../authorization-server/vault/upstream-tokens.ts), so the store holds only
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
