/**
 * What the client persists, behind one small interface so that the in-memory store (library use)
 * and the encrypted file store (the CLI) are interchangeable. Spec "Token theft" 1 and "Refresh
 * tokens": tokens MUST be stored securely and kept confidential in storage.
 */
import type { JWK } from "jose";
import type { AuthorizationServerMetadata, ProtectedResourceMetadata } from "../../shared/metadata.js";
import type { MetadataDiscovery } from "../protocol/discovery.js";
import type { CompatibilitySettingName } from "../protocol/issuer-compat.js";

/** A client registration, bound to the issuer that issued it (never sent to another). */
export interface StoredClient {
  issuer: string;
  client_id: string;
  client_secret?: string;
  token_endpoint_auth_method: string;
  /** How the client id was obtained. */
  source: "preregistered" | "metadata-document" | "dynamic";
  redirect_uris?: string[];
  registered_at: number;
}

/** Tokens for one resource, from one issuer, for one client. */
export interface StoredTokens {
  issuer: string;
  client_id: string;
  /** The PRM `resource`, exactly as published. */
  resource: string;
  access_token: string;
  token_type: string;
  refresh_token?: string;
  /** Milliseconds since the epoch; absent when the server did not say. */
  expires_at?: number;
  /** Scopes the token is known to carry (the response `scope`, else what was requested). */
  scope?: string;
  /** For a DPoP-bound token (`token_type` DPoP): the RFC 7638 thumbprint of the key it is bound to. */
  dpop_jkt?: string;
  obtained_at: number;
}

/**
 * A DPoP key (RFC 9449), one per client registration at one issuer. The private key is a JWK so
 * that the encrypted file store keeps it encrypted like the tokens it binds.
 */
export interface StoredDPoPKey {
  issuer: string;
  client_id: string;
  alg: "ES256";
  private_jwk: JWK;
  public_jwk: JWK;
  created_at: number;
}

/** Cached protected resource metadata plus the authorization server chosen for it. */
export interface StoredResource {
  metadata: ProtectedResourceMetadata;
  url: string;
  issuer: string;
  fetched_at: number;
}

export interface StoredServer {
  metadata: AuthorizationServerMetadata;
  /**
   * The well-known form the metadata came from; with the metadata itself it decides whether the
   * server is an OpenID provider (`isOpenIdProvider`), whose rules differ (`prompt=consent` with
   * `offline_access`). Absent in records written before it was kept; the metadata then decides.
   */
  discovered_via?: MetadataDiscovery;
  fetched_at: number;
  /**
   * The issuer compatibility settings (protocol/issuer-compat.ts) applied when this metadata was
   * accepted (`assume_s256`, `issuer_alias`, `tenant_issuer`); absent when none was.
   */
  compatibility?: CompatibilitySettingName[];
}

export interface StoreRecords {
  client: StoredClient;
  tokens: StoredTokens;
  resource: StoredResource;
  server: StoredServer;
  /** Keyed by issuer, like `client`. */
  dpop: StoredDPoPKey;
}

export type StoreKind = keyof StoreRecords;

/** Key/value by kind. Implementations must make `set` durable before it resolves. */
export interface TokenStore {
  get<K extends StoreKind>(kind: K, key: string): Promise<StoreRecords[K] | undefined>;
  set<K extends StoreKind>(kind: K, key: string, value: StoreRecords[K]): Promise<void>;
  delete(kind: StoreKind, key: string): Promise<void>;
  list<K extends StoreKind>(kind: K): Promise<Array<[string, StoreRecords[K]]>>;
  /** Removes everything (logout). */
  clear(): Promise<void>;
  /**
   * Runs `task` while holding the exclusive lock `name`, shared with every process and
   * `TokenStore` instance that opens the same storage; released when `task` settles. The client
   * holds `refresh <tokens key>` around a refresh so that only one holder of a rotating refresh
   * token presents it (RFC 9700 §4.14.2: a rotated token presented twice revokes the grant).
   * Optional: a store without it is refreshed under the in-process single flight only.
   * Not re-entrant: `task` must not take the same lock again.
   */
  withLock?<T>(name: string, task: () => Promise<T>): Promise<T>;
}

/** Key of a client registration: one per issuer (credentials never cross issuers). */
export function clientKey(issuer: string): string {
  return issuer;
}

/** Key of a token set: the issuer, the client and the resource together. */
export function tokensKey(issuer: string, clientId: string, resource: string): string {
  return JSON.stringify([issuer, clientId, resource]);
}
