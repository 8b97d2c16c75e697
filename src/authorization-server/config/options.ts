/**
 * The options of `createAuthorizationServer`, as the caller writes them (defaults and limits are
 * decided in ./resolve-options.ts).
 */
import type { Logger } from "../../shared/log.js";
import type { Revision } from "../../shared/revision.js";
import type { AuthorizationStore, ClientRecord } from "../../storage/contract.js";
import type { AuditEvent } from "../audit.js";

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
    /** Off by default: a rotated token presented within this window does not revoke the grant. */
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
