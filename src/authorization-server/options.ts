import type { Logger } from "../shared/log.js";
import type { AuthorizationStore, ClientRecord } from "../storage/contract.js";

export type Revision = "2025-11-25" | "2026-07-28";

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
  };
  clientMetadataDocuments?: ClientMetadataDocumentOptions;
  dynamicRegistration?: DynamicRegistrationOptions;
  /** Clients known from configuration (`gatehouse clients add` writes them to storage instead). */
  clients?: ClientRecord[];
  /** Plain-http issuer on loopback for development; refused otherwise (spec: endpoints MUST be HTTPS). */
  allowInsecureLoopback?: boolean;
  logger?: Logger;
  /**
   * How often expired codes, tokens, sessions and unused registrations are purged (default 10 min;
   * 0 turns the timer off, e.g. when a separate job runs `store.purgeExpired`).
   */
  maintenanceIntervalMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}
