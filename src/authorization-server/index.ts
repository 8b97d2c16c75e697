/**
 * The authorization server: `createAuthorizationServer(options)` gives a web-standard `fetch`
 * handler serving OAuth 2.1 with PKCE, refresh rotation, Client ID Metadata Documents, dynamic
 * registration (RFC 7591), revocation (RFC 7009), introspection (RFC 7662), JWKS and metadata
 * (RFC 8414 / OpenID Connect Discovery). Mount it with `toNodeListener`/`listen` from
 * `gatehouse/node`, or any framework adapter.
 */
import { attachContext } from "./context-of.js";
import type { FetchInfo } from "./core/context.js";
import { DEFAULT_MAINTENANCE_INTERVAL_MS, startMaintenance } from "./core/maintenance.js";
import type { AuthorizationServerOptions } from "./core/options.js";
import { createHandler } from "./endpoints/handler.js";
import { buildMetadata } from "./endpoints/metadata.js";
import { createServerContext } from "./server.js";

export interface AuthorizationServer {
  /**
   * Handles one request (any path; unknown paths get 404). `info.clientAddress` is the client's
   * address as the host knows it, the key of the registration and login rate limits: the node
   * adapter passes it; other hosts pass it themselves (without it, callers share one bucket).
   */
  fetch(request: Request, info?: FetchInfo): Promise<Response>;
  /** The RFC 8414 metadata document served at the well-known paths. */
  metadata: Record<string, unknown>;
  /** Creates a new signing key, retiring the current one (still published until its tokens expire). */
  rotateKeys(): Promise<string>;
  /**
   * For a resource server that shares this server's store: call it from the gate's
   * `onInsufficientScope` with the refused token's id (`auth.tokenId`, the JWT `jti`). The next
   * refresh of that token's grant, within a minute, answers `invalid_grant`, which sends a client
   * that tries to step up by refreshing into a fresh authorization (docs/authorization-server.md
   * "Refresh policy"). Resolves false when the token is unknown or its grant is revoked.
   */
  requestStepUp(tokenId: string | undefined): Promise<boolean>;
  /**
   * Deletes expired codes, tokens, interactions, sessions, one-time markers and unused
   * registrations from the store now: what the timer does every `maintenanceIntervalMs`; with
   * `maintenanceIntervalMs: 0` the host schedules it. A failed purge is logged, not thrown.
   */
  purgeExpired(): Promise<void>;
  /** Stops background work. The store belongs to the caller and is not closed. */
  close(): Promise<void>;
}

/**
 * Validates `options` (a `GatehouseTypeError` with code `ERR_INVALID_OPTION` on any problem),
 * migrates the store, writes configured clients, makes sure a signing key exists and starts the
 * purge timer.
 */
export async function createAuthorizationServer(
  options: AuthorizationServerOptions,
): Promise<AuthorizationServer> {
  const context = await createServerContext(options);
  const pendingStepUps = new Set<Promise<unknown>>();
  context.pendingStepUps = pendingStepUps;
  const metadata = buildMetadata(context);
  const handler = createHandler(context, metadata);
  const maintenance = startMaintenance(
    context,
    options.maintenanceIntervalMs ?? DEFAULT_MAINTENANCE_INTERVAL_MS,
  );
  const server: AuthorizationServer = {
    fetch: handler,
    metadata,
    rotateKeys: () => context.keys.rotate(),
    requestStepUp(tokenId) {
      if (typeof tokenId !== "string" || tokenId === "") return Promise.resolve(false);
      // Registered synchronously: the gate does not await its hook, and the client's refresh may
      // arrive before the write commits (refresh-token.ts waits for these).
      const pending = context.store.requestStepUp(tokenId, context.now());
      const settled = pending.catch(() => false);
      pendingStepUps.add(settled);
      void settled.finally(() => pendingStepUps.delete(settled));
      return pending;
    },
    purgeExpired: () => maintenance.runOnce(),
    async close() {
      maintenance.stop();
    },
  };
  attachContext(server, context);
  return server;
}

export { isLocalhostOnly, matchRedirectUri, redirectUriProblem } from "./clients/redirect-uri.js";
// The public surface. The composition root (createServerContext), the option resolver
// (resolveOptions, ResolvedOptions), the router and its error mapping, the metadata builder and
// the context's parts (ClientResolver, KeyManager, Endpoint) are internals: tests import them by
// path. So is the ServerContext itself: a server's context is reached inside the package through
// context-of.ts, and the purge a host schedules is `purgeExpired()`.
export type { AuditEvent, AuditEventType, RateLimitKeyKind, RateLimitName } from "./core/audit.js";
export type { FetchInfo } from "./core/context.js";
export type {
  AuthorizationServerOptions,
  ClientDocumentTrustPolicy,
  ClientMetadataDocumentOptions,
  DeviceAuthorizationOptions,
  DynamicRegistrationOptions,
  EnterpriseAuthorizationOptions,
  IdentityProviderOptions,
  ResourceOptions,
  Revision,
  TokenExchangeOptions,
  TokenExchangePolicy,
  TrustedIssuerOptions,
  WorkloadIdentityOptions,
  WorkloadIssuerOptions,
  WorkloadSubjectOptions,
} from "./core/options.js";
export { hashPassword, verifyPassword } from "./core/password.js";
export { ENDPOINT_PATHS, type EndpointName, endpointUrl } from "./core/paths.js";
export type {
  UpstreamAdmissionOptions,
  UpstreamKeepTokensOptions,
  UpstreamPresetName,
  UpstreamProfile,
  UpstreamProviderOptions,
  UpstreamSignInOptions,
} from "./core/upstream-options.js";
export {
  SigningKeyDecryptionError,
  type SigningKeyDecryptionErrorCode,
} from "./keys/signing-key-envelope.js";
export { OFFLINE_ACCESS } from "./policy/scopes.js";
