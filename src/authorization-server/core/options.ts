/**
 * The options of `createAuthorizationServer`, as the caller writes them (defaults and limits are
 * decided in ./resolve-options.ts).
 */
import type { Logger } from "../../shared/log.js";
import type { Revision } from "../../shared/revision.js";
import type { AuthorizationStore, ClientRecord } from "../../storage/contract.js";
import type { AuditEvent } from "./audit.js";
import type { UpstreamSignInOptions } from "./upstream-options.js";

export type { Revision };

/** A protected resource this server issues tokens for (RFC 8707 `resource`). */
export interface ResourceOptions {
  /** Canonical resource URI; `resource` in requests must equal it exactly. */
  uri: string;
  /** Display name on the consent page. */
  name?: string;
  /** Scopes valid for this resource. */
  scopes: string[];
}

/** Who may use a URL `client_id` (Client ID Metadata Documents; spec: "MAY apply a domain trust policy"). */
export type ClientDocumentTrustPolicy =
  | { kind: "any-https" }
  | { kind: "allow-list"; hosts: string[] }
  | { kind: "callback"; decide: (clientIdUrl: URL) => Promise<boolean> | boolean };

export interface ClientMetadataDocumentOptions {
  enabled?: boolean;
  trust?: ClientDocumentTrustPolicy;
  /** Byte cap on the decoded body (default 5120). */
  maxBytes?: number;
  /** Deadline for headers and body together (default 5000 ms). */
  timeoutMs?: number;
  /** Cache lifetime clamps for `Cache-Control: max-age` (defaults 60 s .. 24 h). */
  minCacheSeconds?: number;
  maxCacheSeconds?: number;
  /**
   * DANGEROUS, tests only: allow loopback destinations and trust these extra CA certificates (PEM).
   * Never set in production: it re-opens server-side request forgery to this machine.
   */
  dangerouslyAllowLoopbackForTesting?: { ca?: string[] };
}

export interface DynamicRegistrationOptions {
  enabled?: boolean;
  /** Registrations per client IP per hour (default 20). */
  ratePerHour?: number;
  /** Unused registrations expire after this many seconds (default 24 h). */
  unusedTtlSeconds?: number;
  /**
   * Initial access tokens (RFC 7591 §3): a registration that presents one as a Bearer token may ask
   * for `client_credentials`, within that token's scopes. Without one, a self-registered client gets
   * no grant without a user (docs/authorization-server.md "Grants without a user"). Empty by default.
   */
  initialAccessTokens?: InitialAccessTokenOptions[];
}

/** One initial access token for dynamic registration (RFC 7591 §3). */
export interface InitialAccessTokenOptions {
  /** SHA-256 of the token, base64url without padding: the token itself never sits in configuration. */
  sha256: string;
  /** The scopes a client registered with this token may be granted without a user; at least one. */
  scopes: string[];
}

/**
 * Token endpoint rate limits (docs/authorization-server.md "Rate limits"): sliding windows of one
 * minute, shared by every instance through the store. 0 turns a limit off.
 */
export interface TokenRateLimitOptions {
  /**
   * Requests per client that authenticated (a secret or a private key; default 3000). Public
   * clients are limited by address only: their id is known to anyone, so a per-client budget would
   * let anyone lock out every user of the application. A URL client id counts by its metadata
   * document's host, so minting new document URLs on one host does not buy a new budget.
   */
  perClientPerMinute?: number;
  /**
   * Requests per client address (default 6000), checked before client authentication. Higher than
   * the per-client budget: many users behind one NAT or proxy share an address.
   */
  perAddressPerMinute?: number;
}

/**
 * The device authorization grant (RFC 8628; docs/authorization-server.md "Device authorization"):
 * a device without a usable browser shows a code that its user enters at `/device`.
 */
export interface DeviceAuthorizationOptions {
  /**
   * Default true. Only clients that registered the `urn:ietf:params:oauth:grant-type:device_code`
   * grant type can use it; turn it off to refuse it to every client.
   */
  enabled?: boolean;
  /** Lifetime of a device code and its user code, in seconds (default 600). */
  ttlSeconds?: number;
  /** Seconds a device waits between polls (RFC 8628 §3.2 `interval`; default 5). */
  intervalSeconds?: number;
}

/**
 * A JWT issuer trusted for assertions at the token endpoint (docs/authorization-server.md
 * "Enterprise-managed authorization", "Workload identity"): its identifier, its public keys and the
 * signature algorithms it uses.
 */
export interface TrustedIssuerOptions {
  /** The `iss` its assertions carry, compared as a plain string. */
  issuer: string;
  /** HTTPS URL of its JWK Set, fetched through the guarded fetch (bounded size and time), cached. */
  jwksUri?: string;
  /** Its public keys inline, instead of `jwksUri`. */
  jwks?: { keys: Record<string, unknown>[] };
  /** Accepted signature algorithms (default ES256, ES384, PS256, RS256, EdDSA); never HS* or none. */
  algorithms?: string[];
}

/** An enterprise identity provider whose identity assertion grants (ID-JAG) this server accepts. */
export interface IdentityProviderOptions extends TrustedIssuerOptions {
  /** Client ids that may present its assertions; absent = any client the assertion names. */
  clients?: string[];
}

/** Enterprise-managed authorization (`jwt-bearer` with ID-JAG assertions); off unless configured. */
export interface EnterpriseAuthorizationOptions {
  identityProviders: IdentityProviderOptions[];
  /** Longest `exp - iat` accepted, in seconds (default 300). */
  maxAssertionLifetimeSeconds?: number;
  /** DANGEROUS, tests only: fetch JWKS from loopback and trust these CAs (see clientMetadataDocuments). */
  dangerouslyAllowLoopbackForTesting?: { ca?: string[] };
}

/** Which workload (`sub` of a workload identity issuer) acts as which client, with which scopes. */
export interface WorkloadSubjectOptions {
  /** The assertion's `sub`, compared exactly. */
  subject: string;
  /** The client the workload acts as; it must be registered and send this `client_id`. */
  clientId: string;
  /** Scopes at most (absent: the client's own ceiling and the resource's scopes). */
  scopes?: string[];
}

/** A workload identity issuer (a Kubernetes service-account issuer, a CI OIDC issuer, ...). */
export interface WorkloadIssuerOptions extends TrustedIssuerOptions {
  /** The `aud` its assertions must carry (default: this server's issuer). */
  audience?: string;
  subjects: WorkloadSubjectOptions[];
  /**
   * Refuse a `jti` seen before (RFC 7523 §3 "MAY"); assertions without `jti` are then refused.
   * Default true. Turn off for issuers whose tokens are presented many times (projected
   * service-account tokens), relying on their short lifetime instead.
   */
  singleUse?: boolean;
}

/** Workload identity federation (`jwt-bearer` with a workload's own JWT); off unless configured. */
export interface WorkloadIdentityOptions {
  issuers: WorkloadIssuerOptions[];
  /** Longest `exp - iat` accepted, in seconds (default 3600). */
  maxAssertionLifetimeSeconds?: number;
  /** DANGEROUS, tests only: fetch JWKS from loopback and trust these CAs. */
  dangerouslyAllowLoopbackForTesting?: { ca?: string[] };
}

/**
 * One token exchange rule (RFC 8693): client `clientId` serves `fromResource`, and may exchange an
 * access token issued for `fromResource` for one issued for any of `toResources`.
 */
export interface TokenExchangePolicy {
  clientId: string;
  fromResource: string;
  toResources: string[];
  /** Scopes the exchanged tokens may carry at most (absent: the target resource's scopes). */
  scopes?: string[];
}

/** Token exchange for downstream calls (RFC 8693); off unless a policy is configured. */
export interface TokenExchangeOptions {
  policies: TokenExchangePolicy[];
}

/**
 * DPoP at the token endpoint (RFC 9449; docs/authorization-server.md "DPoP"): a request with a
 * valid `DPoP` proof gets tokens bound to the proof's key.
 */
export interface DPoPOptions {
  /** Bind tokens to DPoP proofs and advertise it in the metadata (default true). */
  enabled?: boolean;
  /**
   * JWS algorithms accepted for proofs, as `dpop_signing_alg_values_supported` lists them (RFC 9449
   * §5.1; default ES256, EdDSA, RS256, PS256; ES384 and Ed25519 may be added). Asymmetric only:
   * `none` and the HMAC algorithms are refused at start-up.
   */
  signingAlgorithms?: string[];
  /**
   * How far a proof's `iat` may be from the server's clock, either way, in seconds (RFC 9449
   * §11.1: proofs are accepted only briefly; default 60).
   */
  iatWindowSeconds?: number;
  /**
   * Require a server-provided nonce in every proof (RFC 9449 §8; default false). Several instances
   * agree on nonces only when they share `keyEncryptionKeys` (the nonce key is derived from the first).
   */
  requireNonce?: boolean;
  /** A nonce is accepted for between one and two of these (default 300 s). */
  nonceLifetimeSeconds?: number;
}

export interface AuthorizationServerOptions {
  /** Issuer identifier, exactly as it appears in metadata and `iss` (RFC 8414 §2). HTTPS. */
  issuer: string;
  store: AuthorizationStore;
  resources: ResourceOptions[];
  /** Words for each scope, shown on the consent page. `offline_access` is added when refresh is on. */
  scopeDescriptions?: Record<string, string>;
  /** Scope hierarchy (`broad → narrower[]`) applied when judging requests and tokens. */
  scopeHierarchy?: Record<string, string[]>;
  revision?: Revision;
  accessTokenTtlSeconds?: number; // default 300
  codeTtlSeconds?: number; // default 60, at most 60
  refreshTokens?: {
    enabled?: boolean; // default true
    idleTtlSeconds?: number; // default 14 days
    absoluteTtlSeconds?: number; // default 90 days
    /**
     * The refresh race window (default 30, at most 300; 0 = strict reuse detection): a rotated
     * refresh token presented again within this many seconds of its rotation, while none of its
     * successors has been used, gets a sibling successor instead of revoking the grant
     * (docs/authorization-server.md "Refresh races").
     */
    reuseGraceSeconds?: number;
    /**
     * Lifetimes of a refresh token issued without `offline_access`, to a client that declared the
     * `refresh_token` grant (docs/authorization-server.md "Refresh policy"). Defaults: idle 1 day,
     * absolute 7 days; never longer than the limits above.
     */
    withoutOfflineAccess?: { idleTtlSeconds?: number; absoluteTtlSeconds?: number };
  };
  clientMetadataDocuments?: ClientMetadataDocumentOptions;
  dynamicRegistration?: DynamicRegistrationOptions;
  tokenRateLimit?: TokenRateLimitOptions;
  deviceAuthorization?: DeviceAuthorizationOptions;
  dpop?: DPoPOptions;
  /** Token exchange for downstream calls (RFC 8693); docs/authorization-server.md "Token exchange". */
  tokenExchange?: TokenExchangeOptions;
  /** ID-JAG assertions from enterprise identity providers; docs "Enterprise-managed authorization". */
  enterpriseAuthorization?: EnterpriseAuthorizationOptions;
  /** Workload JWTs from trusted issuers (RFC 7523); docs/authorization-server.md "Workload identity". */
  workloadIdentity?: WorkloadIdentityOptions;
  /**
   * Sign-in through upstream identity providers (OpenID Connect or GitHub-style OAuth 2) on the
   * login page; docs/authorization-server.md "Sign-in through an upstream provider".
   */
  upstreamSignIn?: UpstreamSignInOptions;
  /** Clients known from configuration (`gatehouse clients add` writes them to storage instead). */
  clients?: ClientRecord[];
  /**
   * Key-encryption keys (KEKs) for secrets at rest (docs/authorization-server.md "Signing keys at
   * rest"): each 32 random bytes, raw or base64url. The first encrypts every new signing private
   * key (AES-256-GCM); all of them decrypt, so a KEK is rotated by putting the new one first and
   * re-encrypting (`gatehouse keys rewrap`). Without any, private keys are stored unencrypted and a
   * warning is logged at start-up.
   */
  keyEncryptionKeys?: readonly (string | Uint8Array)[];
  /** Plain-http issuer on loopback for development; refused otherwise (spec: endpoints MUST be HTTPS). */
  allowInsecureLoopback?: boolean;
  logger?: Logger;
  /**
   * Called with every audit event (docs/authorization-server.md "Audit events"): the same value
   * that is written to the log. Called synchronously; a thrown error or rejected promise is logged
   * (`audit_hook_failed`) and never fails the request.
   */
  onAuditEvent?: (event: AuditEvent) => void | Promise<void>;
  /**
   * How often expired codes, tokens, sessions and unused registrations are purged (default 10 min;
   * 0 turns the timer off, e.g. when a separate job runs `store.purgeExpired`).
   */
  maintenanceIntervalMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}
