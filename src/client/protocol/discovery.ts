/**
 * Discovery: protected resource metadata (RFC 9728) and authorization server metadata (RFC 8414,
 * OpenID Connect Discovery 1.0), in the exact orders the spec gives, with the checks it requires.
 */
import type { z } from "zod";
import {
  type AuthorizationServerMetadata,
  AuthorizationServerMetadataSchema,
  type ProtectedResourceMetadata,
  ProtectedResourceMetadataSchema,
} from "../../shared/metadata.js";
import {
  type MetadataWellKnown,
  authorizationServerMetadataUrls as metadataCandidates,
  PROTECTED_RESOURCE_WELL_KNOWN,
} from "../../shared/well-known.js";
import { AuthorizationFlowError } from "../errors.js";
import { assertSecureUrl, discard, type FetchLike, readJsonObject, send } from "./http.js";
import { acceptedIssuer, type CompatibilityReporter, type IssuerCompatibility } from "./issuer-compat.js";

export interface DiscoveredResource {
  /** The validated document. Its `resource` is what goes, byte for byte, into `resource=`. */
  metadata: ProtectedResourceMetadata;
  /** Where it was read from. */
  url: string;
}

function parseDocument<T>(schema: z.ZodType<T>, body: unknown, step: string, status: number): T {
  const result = schema.safeParse(body);
  if (!result.success) {
    const fields = [...new Set(result.error.issues.map((i) => i.path.join(".") || "(root)"))].join(", ");
    throw new AuthorizationFlowError("invalid_document", `document does not conform (fields: ${fields})`, {
      kind: "nonconforming",
      step,
      status,
      cause: result.error,
    });
  }
  return result.data;
}

/**
 * The well-known PRM URLs for a resource, in the spec's order (RFC 9728 §3.1): the path-specific
 * form, then the root. The path-specific form is not applicable when the resource is at the root.
 */
export function protectedResourceMetadataUrls(resourceUrl: string | URL): string[] {
  const url = new URL(resourceUrl);
  const path = url.pathname.replace(/\/+$/, "");
  const root = `${url.origin}${PROTECTED_RESOURCE_WELL_KNOWN}`;
  return path ? [`${root}${path}`, root] : [root];
}

/**
 * True when the PRM `resource` identifies the server being called (RFC 9728 §3.3, §7.3): same
 * scheme, host and port (these are case-insensitive), and a path that is the called URL's path or
 * a parent of it on a segment boundary. The value itself is never rewritten: it is sent as given.
 */
export function resourceMatchesServer(prmResource: string, serverUrl: string | URL): boolean {
  let resource: URL;
  let server: URL;
  try {
    resource = new URL(prmResource);
    server = new URL(serverUrl);
  } catch {
    return false;
  }
  // URL parsing silently drops tabs and newlines (WHATWG URL); a URI has none (RFC 3986 §2), and
  // this value is printed to the user, so any control character or space refuses it.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are the point.
  if (/[\u0000-\u0020\u007f-\u009f]/.test(prmResource)) return false;
  if (resource.hash || prmResource.includes("#")) return false;
  if (resource.origin !== server.origin) return false;
  const base = resource.pathname.replace(/\/+$/, "");
  const path = server.pathname.replace(/\/+$/, "");
  return path === base || path.startsWith(`${base}/`);
}

/**
 * Protected resource metadata discovery (spec "Protected resource metadata discovery"; RFC 9728
 * §3, §5.1). A `resource_metadata` URL from the challenge is used when present (MUST); otherwise the
 * well-known URLs are tried in order. The document's `resource` must match the server being called
 * (RFC 9728 §3.3): a mismatch aborts here, before any authorization request.
 */
export async function discoverProtectedResource(options: {
  serverUrl: string | URL;
  resourceMetadataUrl?: string | undefined;
  fetch: FetchLike;
}): Promise<DiscoveredResource> {
  const candidates = options.resourceMetadataUrl
    ? [options.resourceMetadataUrl]
    : protectedResourceMetadataUrls(options.serverUrl);
  const tried: string[] = [];
  for (const candidate of candidates) {
    const step = `protected resource metadata (${candidate})`;
    const url = assertSecureUrl(candidate, step);
    const response = await send(options.fetch, url.href, { headers: { accept: "application/json" } }, step);
    tried.push(`${candidate} → ${response.status}`);
    if (response.status !== 200) {
      await discard(response);
      continue;
    }
    const body = await readJsonObject(response, step, "protected resource metadata", url.href);
    const metadata = parseDocument(ProtectedResourceMetadataSchema, body, step, response.status);
    if (!resourceMatchesServer(metadata.resource, options.serverUrl)) {
      throw new AuthorizationFlowError(
        "prm_resource_mismatch",
        `resource ${JSON.stringify(metadata.resource)} does not identify the server being called (${new URL(options.serverUrl).origin}); RFC 9728 §3.3 — not proceeding`,
        { kind: "refused", step },
      );
    }
    return { metadata, url: url.href };
  }
  throw new AuthorizationFlowError(
    "prm_not_found",
    `no protected resource metadata found (tried ${tried.join("; ")})`,
    { kind: "nonconforming", step: "protected resource metadata discovery (RFC 9728 §3)" },
  );
}

/**
 * Which well-known form an authorization server's metadata was read from: RFC 8414
 * (`oauth-authorization-server`), OpenID Connect Discovery 1.0 (`openid-configuration`), or none,
 * the 2025-03-26 default endpoints. Request rules that belong to OpenID Connect alone (see
 * `createAuthorizationRequest`) follow it.
 */
export type MetadataDiscovery = MetadataWellKnown | "default-endpoints";

/** The metadata and the form it was discovered through. */
export interface DiscoveredAuthorizationServer {
  metadata: AuthorizationServerMetadata;
  discoveredVia: MetadataDiscovery;
}

/**
 * The authorization server metadata URLs for an issuer, in the spec's order ("Authorization server
 * metadata discovery"): for an issuer with a path, RFC 8414 path-inserted, OpenID Connect
 * path-inserted, OpenID Connect path-appended; without a path, RFC 8414 then OpenID Connect.
 */
export function authorizationServerMetadataUrls(issuer: string): string[] {
  return metadataCandidates(issuer).map((candidate) => candidate.url);
}

/**
 * Spec "PKCE" 1 and 3: the client MUST verify PKCE support before proceeding and MUST refuse when
 * `code_challenge_methods_supported` is absent; S256 MUST be used, so a list without it is refused.
 * The one exception is an issuer an operator named with `assumeS256` (issuer-compat.ts): an absent
 * list is then taken to mean S256, and the use is reported.
 */
export function assertPkceSupported(
  metadata: AuthorizationServerMetadata,
  step: string,
  compatibility?: { settings: IssuerCompatibility | undefined; onUse: CompatibilityReporter | undefined },
): void {
  const methods = metadata.code_challenge_methods_supported;
  if (!methods && compatibility?.settings?.assumeS256 === true) {
    compatibility.onUse?.({
      issuer: metadata.issuer,
      setting: "assume_s256",
      detail: "metadata omits code_challenge_methods_supported; proceeding with S256",
    });
    return;
  }
  if (!methods) {
    throw new AuthorizationFlowError(
      "pkce_not_supported",
      `authorization server ${metadata.issuer} does not advertise code_challenge_methods_supported; the spec requires the client to refuse to proceed`,
      { kind: "refused", step },
    );
  }
  if (!methods.includes("S256")) {
    throw new AuthorizationFlowError(
      "pkce_not_supported",
      `authorization server ${metadata.issuer} does not support PKCE S256 (offers: ${methods.join(", ") || "none"})`,
      { kind: "refused", step },
    );
  }
}

/**
 * Authorization server metadata discovery: the first URL that answers 200 wins. RFC 8414 §3.3 (and
 * OpenID Connect Discovery §4.3): the `issuer` in the document MUST be identical to the issuer the
 * URL was built from, compared as strings; a mismatch refuses the document (mix-up defence). PKCE
 * support is checked here as well (`checkPkce`, default true).
 */
export async function discoverAuthorizationServer(options: {
  issuer: string;
  fetch: FetchLike;
  checkPkce?: boolean;
}): Promise<AuthorizationServerMetadata> {
  return (await discoverAuthorizationServerVia(options)).metadata;
}

/**
 * {@link discoverAuthorizationServer}, also saying which well-known form answered. With
 * `compatibility` (the operator's settings for this one issuer, issuer-compat.ts), a document
 * whose issuer is the configured alias or tenant template is accepted, and returned with the
 * issuer every later check must compare with; an absent PKCE list passes under `assumeS256`.
 * Each such use is reported to `onCompatibility`.
 */
export async function discoverAuthorizationServerVia(options: {
  issuer: string;
  fetch: FetchLike;
  checkPkce?: boolean;
  compatibility?: IssuerCompatibility | undefined;
  onCompatibility?: CompatibilityReporter | undefined;
}): Promise<DiscoveredAuthorizationServer> {
  const issuerStep = `authorization server ${options.issuer}`;
  assertSecureUrl(options.issuer, issuerStep);
  const tried: string[] = [];
  for (const { url: candidate, via } of metadataCandidates(options.issuer)) {
    const step = `authorization server metadata (${candidate})`;
    const response = await send(options.fetch, candidate, { headers: { accept: "application/json" } }, step);
    tried.push(`${candidate} → ${response.status}`);
    if (response.status !== 200) {
      await discard(response);
      continue;
    }
    const body = await readJsonObject(response, step, "authorization server metadata", candidate);
    const document = parseDocument(AuthorizationServerMetadataSchema, body, step, response.status);
    // RFC 8414 §3.3: exact string comparison, no normalisation (DESIGN.md principle 4); the
    // configured alias or tenant template of this issuer alone are the other strings accepted.
    const issuer = acceptedIssuer(
      options.issuer,
      document.issuer,
      options.compatibility,
      options.onCompatibility,
    );
    if (issuer === undefined) {
      throw new AuthorizationFlowError(
        "issuer_mismatch",
        `issuer "${document.issuer}" differs from "${options.issuer}" (RFC 8414 §3.3) — refusing the document`,
        { kind: "refused", step },
      );
    }
    const metadata = issuer === document.issuer ? document : { ...document, issuer };
    for (const field of ["authorization_endpoint", "token_endpoint", "registration_endpoint"] as const) {
      const value = metadata[field];
      if (value !== undefined) assertSecureUrl(value, `${step}: ${field}`);
    }
    if (metadata.device_authorization_endpoint !== undefined) deviceAuthorizationEndpoint(metadata, step);
    if (options.checkPkce !== false) {
      assertPkceSupported(metadata, `${step} (PKCE check)`, {
        settings: options.compatibility,
        onUse: options.onCompatibility,
      });
    }
    return { metadata, discoveredVia: via };
  }
  throw new AuthorizationFlowError(
    "as_metadata_not_found",
    `no authorization server metadata found (tried ${tried.join("; ")})`,
    { kind: "nonconforming", step: `${issuerStep} metadata discovery (RFC 8414 §3)` },
  );
}

/**
 * The `device_authorization_endpoint` of an authorization server (RFC 8628 §4), checked like the
 * other endpoints: a string, https or loopback http. Discovery checks it when present; the device
 * flow asks for it here and is refused, with a hint to use the browser, when the server has none.
 */
export function deviceAuthorizationEndpoint(metadata: AuthorizationServerMetadata, step: string): string {
  const value = metadata.device_authorization_endpoint;
  if (value === undefined) {
    throw new AuthorizationFlowError(
      "no_interactive_authorization",
      `authorization server ${metadata.issuer} publishes no device_authorization_endpoint (RFC 8628 §4): it does not offer the device flow; log in with a browser instead`,
      { kind: "action", step },
    );
  }
  if (typeof value !== "string") {
    throw new AuthorizationFlowError("invalid_document", "device_authorization_endpoint is not a string", {
      kind: "nonconforming",
      step,
    });
  }
  assertSecureUrl(value, `${step}: device_authorization_endpoint`);
  return value;
}

/**
 * 2025-03-26 fallbacks, used only when the caller opts into that revision and no protected
 * resource metadata exists: the authorization server is the server's origin; its RFC 8414 metadata
 * is read from the root, and without it the default endpoints `/authorize`, `/token` and
 * `/register` are assumed (that revision's "fallbacks for servers without metadata discovery").
 */
export async function legacyAuthorizationServer(options: {
  serverUrl: string | URL;
  fetch: FetchLike;
}): Promise<AuthorizationServerMetadata> {
  return (await legacyAuthorizationServerVia(options)).metadata;
}

/** {@link legacyAuthorizationServer}, also saying whether a document or the defaults were used. */
export async function legacyAuthorizationServerVia(options: {
  serverUrl: string | URL;
  fetch: FetchLike;
}): Promise<DiscoveredAuthorizationServer> {
  const origin = new URL(options.serverUrl).origin;
  const step = `authorization server metadata, 2025-03-26 fallback (${origin})`;
  assertSecureUrl(origin, step);
  const url = `${origin}/.well-known/oauth-authorization-server`;
  const response = await send(options.fetch, url, { headers: { accept: "application/json" } }, step);
  if (response.status === 200) {
    const body = await readJsonObject(response, step, "authorization server metadata", url);
    const metadata = parseDocument(AuthorizationServerMetadataSchema, body, step, response.status);
    if (metadata.issuer !== origin && metadata.issuer !== `${origin}/`) {
      throw new AuthorizationFlowError("issuer_mismatch", `issuer "${metadata.issuer}" is not ${origin}`, {
        kind: "refused",
        step,
      });
    }
    assertPkceSupported(metadata, `${step} (PKCE check)`);
    return { metadata, discoveredVia: "oauth-authorization-server" };
  }
  await discard(response);
  return {
    metadata: {
      issuer: origin,
      authorization_endpoint: `${origin}/authorize`,
      token_endpoint: `${origin}/token`,
      registration_endpoint: `${origin}/register`,
      // That revision made PKCE mandatory for every client and server; there is no document to check.
      code_challenge_methods_supported: ["S256"],
    },
    discoveredVia: "default-endpoints",
  };
}
