/**
 * The authorization server: `createAuthorizationServer(options)` gives a web-standard `fetch`
 * handler serving OAuth 2.1 with PKCE, refresh rotation, Client ID Metadata Documents, dynamic
 * registration (RFC 7591), revocation (RFC 7009), introspection (RFC 7662), JWKS and metadata
 * (RFC 8414 / OpenID Connect Discovery). Mount it with `toNodeListener`/`listen` from
 * `gatehouse/node`, or any framework adapter.
 */
import type { ServerContext } from "./context.js";
import { createHandler } from "./handler.js";
import { DEFAULT_MAINTENANCE_INTERVAL_MS, startMaintenance } from "./maintenance.js";
import { buildMetadata } from "./metadata.js";
import type { AuthorizationServerOptions } from "./options.js";
import { createServerContext } from "./resolve-options.js";

export interface AuthorizationServer {
  /** Handles one request (any path; unknown paths get 404). */
  fetch(request: Request): Promise<Response>;
  context: ServerContext;
  /** The RFC 8414 metadata document served at the well-known paths. */
  metadata: Record<string, unknown>;
  /** Creates a new signing key, retiring the current one (still published until its tokens expire). */
  rotateKeys(): Promise<string>;
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
  const metadata = buildMetadata(context);
  const handler = createHandler(context, metadata);
  const maintenance = startMaintenance(
    context,
    options.maintenanceIntervalMs ?? DEFAULT_MAINTENANCE_INTERVAL_MS,
  );
  return {
    fetch: handler,
    context,
    metadata,
    rotateKeys: () => context.keys.rotate(),
    async close() {
      maintenance.stop();
    },
  };
}

export type {
  AccessTokenClaims,
  ClientResolver,
  Endpoint,
  KeyManager,
  ResolvedOptions,
  ServerContext,
} from "./context.js";
export { errorToResponse, issuerPath, metadataPaths } from "./handler.js";
export { type Maintenance, startMaintenance } from "./maintenance.js";
export { buildMetadata } from "./metadata.js";
export type {
  AuthorizationServerOptions,
  ClientDocumentTrustPolicy,
  ClientMetadataDocumentOptions,
  DynamicRegistrationOptions,
  ResourceOptions,
  Revision,
} from "./options.js";
export { hashPassword, verifyPassword } from "./password.js";
export { ENDPOINT_PATHS, type EndpointName, endpointUrl } from "./paths.js";
export { isLocalhostOnly, matchRedirectUri, redirectUriProblem } from "./redirect-uri.js";
export { createServerContext, OFFLINE_ACCESS, resolveOptions } from "./resolve-options.js";
