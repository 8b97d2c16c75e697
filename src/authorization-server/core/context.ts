/**
 * The types every endpoint is given: the resolved options, the client resolver, the key manager
 * and the {@link ServerContext} that carries them.
 */
import type { Logger } from "../../shared/log.js";
import type { ScopeHierarchy } from "../../shared/scopes.js";
import type { KeyEncryptionKeyring } from "../../shared/secret-envelope.js";
import type { AuthorizationCodeRecord, AuthorizationStore, ClientRecord } from "../../storage/contract.js";
import type { AuditEventInput, AuditTrail } from "./audit.js";
import type {
  AuthorizationServerOptions,
  EnterpriseAuthorizationOptions,
  IdentityProviderOptions,
  InitialAccessTokenOptions,
  ResourceOptions,
  Revision,
  TokenExchangeOptions,
  WorkloadIdentityOptions,
  WorkloadIssuerOptions,
} from "./options.js";
import type { ResolvedUpstreamSignIn } from "./upstream-options.js";

/** Options with every default applied and checked (factories validate at start-up). */
export interface ResolvedOptions {
  issuer: string;
  revision: Revision;
  accessTokenTtlSeconds: number;
  codeTtlSeconds: number;
  refresh: {
    enabled: boolean;
    idleTtlSeconds: number;
    absoluteTtlSeconds: number;
    reuseGraceSeconds: number;
    /** Lifetimes of a grant whose refresh token was issued without `offline_access`. */
    withoutOfflineAccess: { idleTtlSeconds: number; absoluteTtlSeconds: number };
  };
  dynamicRegistration: {
    enabled: boolean;
    ratePerHour: number;
    unusedTtlSeconds: number;
    /** RFC 7591 §3 initial access tokens (policy/grants-without-user.ts); absent = none. */
    initialAccessTokens?: readonly InitialAccessTokenOptions[];
  };
  /**
   * Requests per minute at the token endpoint; 0 = off. resolveOptions always sets it; optional
   * only so that options built by hand (page tests) need not, and then there is no limit.
   */
  tokenRateLimit?: { perClientPerMinute: number; perAddressPerMinute: number };
  /**
   * The device authorization grant (RFC 8628). resolveOptions always sets it; optional only so that
   * options built by hand (page tests) need not, and then the grant is off.
   */
  deviceAuthorization?: { enabled: boolean; ttlSeconds: number; intervalSeconds: number };
  clientMetadataDocuments: Required<
    Pick<NonNullable<AuthorizationServerOptions["clientMetadataDocuments"]>, "enabled">
  > &
    NonNullable<AuthorizationServerOptions["clientMetadataDocuments"]>;
  scopeDescriptions: Record<string, string>;
  allowInsecureLoopback: boolean;
  /**
   * DPoP at the token endpoint (RFC 9449). resolveOptions always sets it; optional only so that
   * options built by hand (page tests) need not, and then DPoP is off.
   */
  dpop?: ResolvedDPoPOptions;
  /** Sign-in through upstream identity providers; present only when configured. */
  upstreamSignIn?: ResolvedUpstreamSignIn;
  /** Present only when configured; each one enables its grant type (grants/grant-types.ts). */
  tokenExchange?: TokenExchangeOptions;
  enterpriseAuthorization?: Omit<EnterpriseAuthorizationOptions, "identityProviders"> & {
    identityProviders: (IdentityProviderOptions & { algorithms: string[] })[];
    maxAssertionLifetimeSeconds: number;
  };
  workloadIdentity?: Omit<WorkloadIdentityOptions, "issuers"> & {
    issuers: (WorkloadIssuerOptions & { algorithms: string[]; singleUse: boolean })[];
    maxAssertionLifetimeSeconds: number;
  };
}

/** {@link AuthorizationServerOptions.dpop} with defaults applied. */
export interface ResolvedDPoPOptions {
  enabled: boolean;
  signingAlgorithms: string[];
  iatWindowSeconds: number;
  requireNonce: boolean;
  nonceLifetimeSeconds: number;
  /** Secret of the server nonces (grants/dpop-binding.ts); never logged, never sent. */
  nonceSecret: Uint8Array;
}

/**
 * Finds the client for a `client_id`: storage for registered clients, a fetched and validated
 * Client ID Metadata Document for URL ids. Throws `OAuthError` (`invalid_client` or
 * `invalid_request`) when a document fails validation or the trust policy refuses its host.
 */
export interface ClientResolver {
  resolve(clientId: string): Promise<ClientRecord | undefined>;
}

/** Access-token claims the token endpoint asks the key manager to sign (RFC 9068 §2.2). */
export interface AccessTokenClaims {
  sub: string;
  client_id: string;
  aud: string;
  scope: string;
  jti: string;
  iat: number;
  exp: number;
  /** RFC 9449 §6.1: the thumbprint of the DPoP key a bound token is bound to. */
  cnf?: { jkt: string };
  /** RFC 8693 §4.1: the actor chain of an exchanged token (the current actor outermost). */
  act?: ActorClaim;
}

/** RFC 8693 §4.1 `act`: who acts, and (nested) who acted before it. */
export interface ActorClaim {
  sub: string;
  act?: ActorClaim;
}

export interface KeyManager {
  /** Signs an RFC 9068 access token (`typ: at+jwt`) with the current key; `iss` is added. */
  signAccessToken(claims: AccessTokenClaims): Promise<string>;
  /** Public keys for `/jwks.json`: the signer and retired keys not yet expired. */
  publicJwks(): Promise<{ keys: Record<string, unknown>[] }>;
  /** Creates a new signing key and retires the current one; returns the new `kid`. */
  rotate(): Promise<string>;
  /**
   * Verifies an access token this server signed (signature with a published key, `typ`, `iss`,
   * `exp`); the claims, or undefined when it is not a valid token of ours. For revocation and
   * introspection.
   */
  verifyAccessToken(token: string): Promise<(AccessTokenClaims & { iss: string }) | undefined>;
  /**
   * Whether this instance can sign (for `/health`): "ok" with the current key, "degraded" with an
   * older published key because the current one cannot be opened, "unavailable" with none.
   */
  signingStatus?(): Promise<"ok" | "degraded" | "unavailable">;
}

/** What every endpoint receives besides the request. */
export interface ServerContext {
  options: ResolvedOptions;
  store: AuthorizationStore;
  log: Logger;
  /**
   * Records an audit event: the JSON log, the `onAuditEvent` hook and the admin page's trail.
   * createServerContext always sets both; they are optional only so that contexts built by hand
   * (page tests) need not.
   */
  audit?(event: AuditEventInput): void;
  /** This instance's recent audit events (bounded, in memory). */
  auditTrail?: AuditTrail;
  now(): number;
  hierarchy: ScopeHierarchy;
  /** Served resources by canonical URI. */
  resources: ReadonlyMap<string, ResourceOptions>;
  /** Every scope this server knows (union of resource scopes, plus offline_access when refresh is on). */
  scopes: ReadonlySet<string>;
  clients: ClientResolver;
  keys: KeyManager;
  /**
   * The key-encryption keys (`keyEncryptionKeys`), when configured: what seals secrets at rest
   * (signing keys through the key manager, kept upstream tokens: vault/upstream-tokens.ts).
   */
  keyring?: KeyEncryptionKeyring;
  /**
   * Seals each authorization code's record into the code (grants/sealed-code.ts), when the server
   * has key-encryption keys and the store redeems codes it never stored; otherwise absent and codes
   * are stored at issue.
   */
  codeSealer?: CodeSealer;
  /** False only for plain-http loopback development: cookies then lose `Secure` and `__Host-`. */
  secureCookies: boolean;
  /**
   * Step-up marks being written (`AuthorizationServer.requestStepUp`): a refresh waits for them, so
   * a client that refreshes right after its 403 cannot overtake the mark in this process.
   */
  pendingStepUps?: Set<Promise<unknown>>;
}

/**
 * What the host knows about a request beyond the request itself, passed to
 * `AuthorizationServer.fetch`. The node adapter (`toNodeListener`, `listen`) passes it on its own;
 * any other host passes it by hand (docs/authorization-server.md "Hosting").
 */
export interface FetchInfo {
  /**
   * The client's network address, as the host determined it (the socket, or a header only a
   * trusted proxy sets). The rate limits of registration and login are kept per address; requests
   * without one share a single bucket.
   */
  clientAddress?: string;
}

/** An endpoint: a web-standard request in, a response out. */
export type Endpoint = (request: Request, context: ServerContext, info: FetchInfo) => Promise<Response>;

/** What a sealed code carries: the stored record but its hash (the code's own) and consumption. */
export type SealedCodeRecord = Omit<AuthorizationCodeRecord, "codeHash" | "consumedAt">;

/** The sealing of authorization codes (grants/sealed-code.ts makes it from the key-encryption key). */
export interface CodeSealer {
  /**
   * The code for `record`, sealed under the key of the hour of `record.createdAt` (format 2):
   * `base64url(2 ‖ KEK id ‖ hour ‖ nonce ‖ ciphertext ‖ tag)`. Throws a RangeError for a record
   * whose times are not whole milliseconds or whose lifetime is negative.
   */
  seal(record: SealedCodeRecord): string;
  /**
   * The record sealed in `code` (format 2, or format 1 of the release before:
   * `<kek id>.<hour, base 36>.<base64url(nonce ‖ ciphertext ‖ tag)>`), or undefined for anything
   * this server did not seal, for any other spelling of a code, and for a code of an hour more than
   * one away from `now` (ms).
   */
  open(code: string, now: number): SealedCodeRecord | undefined;
}
