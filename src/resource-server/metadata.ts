/**
 * Protected resource metadata (RFC 9728): building the document from validated options and serving
 * it at the well-known URIs with CORS for browser clients.
 */
import { GatehouseTypeError } from "../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";
import { isScopeToken } from "../shared/scopes.js";
import { PROTECTED_RESOURCE_WELL_KNOWN } from "../shared/well-known.js";

/** RFC 9728 §3: the well-known URI suffix. */
export const PRM_WELL_KNOWN = PROTECTED_RESOURCE_WELL_KNOWN;

/** Optional RFC 9728 §2 fields Gatehouse lets you publish. */
export interface ProtectedResourceMetadataOptions {
  /** RFC 9728 `resource`: this server's canonical URI. */
  resource: string;
  /** RFC 9728 `authorization_servers`: issuer identifiers, at least one (spec: required). */
  authorizationServers: readonly string[];
  /** RFC 9728 `scopes_supported`. Never `offline_access` (spec, Refresh tokens: SHOULD NOT). */
  scopesSupported?: readonly string[];
  /** RFC 9728 `resource_name` (human-readable). */
  resourceName?: string;
  /** RFC 9728 `resource_documentation` (URL). */
  resourceDocumentation?: string;
  /** RFC 9728 `resource_policy_uri` (URL). */
  resourcePolicyUri?: string;
  /** RFC 9728 `resource_tos_uri` (URL). */
  resourceTosUri?: string;
  /** RFC 9728 `jwks_uri` of the resource itself (for signed responses; rarely needed). */
  jwksUri?: string;
}

/** The RFC 9728 §2 document, as served. */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  scopes_supported?: string[];
  bearer_methods_supported: ["header"];
  resource_name?: string;
  resource_documentation?: string;
  resource_policy_uri?: string;
  resource_tos_uri?: string;
  jwks_uri?: string;
  /** RFC 9728 §2 (from RFC 9449): the proof algorithms accepted, when the resource accepts DPoP. */
  dpop_signing_alg_values_supported?: string[];
  /** RFC 9728 §2 (from RFC 9449): present (true) when only DPoP-bound tokens are accepted. */
  dpop_bound_access_tokens_required?: boolean;
}

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

/** An absolute http(s) URL; plain http only for loopback hosts (development). */
function checkUrl(name: string, value: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidOption(`${name} must be an absolute URL`);
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
    throw invalidOption(`${name} must be an https URL (http is allowed for loopback hosts only)`);
  }
  if (url.hash !== "" || value.includes("#")) throw invalidOption(`${name} must not contain a fragment`);
}

/**
 * Validates the options (at start-up) and returns the document. Throws a
 * {@link GatehouseTypeError} (`ERR_INVALID_RESOURCE_URI`, `ERR_INVALID_OPTION`, `ERR_INVALID_SCOPE`).
 */
export function buildProtectedResourceMetadata(
  options: ProtectedResourceMetadataOptions,
): ProtectedResourceMetadata {
  if (typeof options.resource !== "string") throw invalidOption("resource must be a string");
  const resource = canonicalResourceUri(options.resource);
  const servers = options.authorizationServers;
  // Spec, Protected resource metadata: authorization_servers has at least one entry.
  if (!Array.isArray(servers) || servers.length === 0) {
    throw invalidOption("authorizationServers must list at least one issuer");
  }
  for (const issuer of servers) {
    if (typeof issuer !== "string") throw invalidOption("authorizationServers entries must be strings");
    checkUrl("authorizationServers entry", issuer);
    // RFC 8414 §2: an issuer has no query or fragment.
    if (issuer.includes("?")) throw invalidOption("an issuer identifier must not contain a query");
  }
  const doc: ProtectedResourceMetadata = {
    resource,
    authorization_servers: [...new Set(servers)],
    bearer_methods_supported: ["header"],
  };
  if (options.scopesSupported !== undefined) {
    if (!Array.isArray(options.scopesSupported)) throw invalidOption("scopesSupported must be an array");
    for (const scope of options.scopesSupported) {
      if (typeof scope !== "string" || !isScopeToken(scope)) {
        throw new GatehouseTypeError("ERR_INVALID_SCOPE", "scopesSupported contains an invalid scope token");
      }
      // Spec, Refresh tokens (2026-07-28): the resource server SHOULD NOT list offline_access;
      // Gatehouse refuses it outright so the mistake is caught at start-up.
      if (scope === "offline_access") {
        throw new GatehouseTypeError(
          "ERR_INVALID_SCOPE",
          "scopesSupported must not contain offline_access: it is the authorization server's concern",
        );
      }
    }
    doc.scopes_supported = [...new Set(options.scopesSupported)];
  }
  if (options.resourceName !== undefined) {
    if (typeof options.resourceName !== "string" || options.resourceName === "") {
      throw invalidOption("resourceName must be a non-empty string");
    }
    doc.resource_name = options.resourceName;
  }
  const urls = [
    ["resourceDocumentation", "resource_documentation"],
    ["resourcePolicyUri", "resource_policy_uri"],
    ["resourceTosUri", "resource_tos_uri"],
    ["jwksUri", "jwks_uri"],
  ] as const;
  for (const [option, field] of urls) {
    const value = options[option];
    if (value === undefined) continue;
    if (typeof value !== "string") throw invalidOption(`${option} must be a string`);
    checkUrl(option, value);
    doc[field] = value;
  }
  return doc;
}

/**
 * RFC 9728 §3.1: the metadata URL for a resource: the well-known suffix inserted between the
 * authority and the path (`https://h/a/b` → `https://h/.well-known/oauth-protected-resource/a/b`).
 * A query in the resource is kept after the path.
 */
export function protectedResourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === "/" ? "" : url.pathname;
  return `${url.origin}${PRM_WELL_KNOWN}${path}${url.search}`;
}

/** The request paths (path-specific and root form) at which the document is served. */
export function protectedResourceMetadataPaths(resource: string): string[] {
  const path = new URL(protectedResourceMetadataUrl(resource)).pathname;
  return path === PRM_WELL_KNOWN ? [PRM_WELL_KNOWN] : [path, PRM_WELL_KNOWN];
}

const CORS_HEADERS: Readonly<Record<string, string>> = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, HEAD, OPTIONS",
  "access-control-allow-headers": "*",
  "access-control-max-age": "86400",
};

/**
 * Serves a metadata document: GET and HEAD → 200 JSON; OPTIONS → 204 CORS preflight; other
 * methods → 405. `Access-Control-Allow-Origin: *` so browser-based clients can discover the
 * authorization server (the document is public and carries no credentials).
 */
export function metadataDocumentResponse(request: Request, body: string): Response {
  const method = request.method;
  if (method === "OPTIONS") return new Response(null, { status: 204, headers: CORS_HEADERS });
  if (method !== "GET" && method !== "HEAD") {
    return new Response(null, { status: 405, headers: { ...CORS_HEADERS, allow: "GET, HEAD, OPTIONS" } });
  }
  return new Response(method === "HEAD" ? null : body, {
    status: 200,
    headers: {
      ...CORS_HEADERS,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
      // Short public caching: clients re-discover often enough to follow changes.
      "cache-control": "public, max-age=300",
    },
  });
}
