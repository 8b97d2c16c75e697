/**
 * Client ID Metadata Documents, authorization server side: the rules for a URL `client_id` and the
 * schema of the document fetched from it (draft-ietf-oauth-client-id-metadata-document-00 §3-§4;
 * spec "Client ID Metadata Documents, authorization server rules").
 *
 * Error codes (spec: "On validation failure it responds with error invalid_client or
 * invalid_request"):
 * - `invalid_request` when the `client_id` parameter itself is malformed as a metadata document URL
 *   (RFC 6749 §5.2: "malformed" parameter); nothing is fetched;
 * - `invalid_client` for everything about the client: the document could not be fetched, is not
 *   JSON, or fails validation, or the trust policy refuses its host.
 *
 * Public descriptions name the rule, never the document's content; the private `detail` says more.
 */

import { z } from "zod";
import { OAuthError } from "../../shared/errors.js";
import { fetchUrlProblem } from "../../shared/guarded-fetch.js";
import type { ClientRecord, TokenEndpointAuthMethod } from "../../storage/contract.js";
import { DEVICE_CODE_GRANT_TYPE } from "../grants/device-code.js";
import { redirectUriProblem } from "./redirect-uri.js";

/** True when `clientId` is meant as a metadata document URL (any case of the scheme). */
export function isUrlClientId(clientId: string): boolean {
  return /^https:\/\//i.test(clientId);
}

/**
 * Why `clientId` cannot be a Client ID Metadata Document URL, or undefined.
 *
 * Draft §3: an https URL with a path, no fragment; SHOULD NOT have a query (refused here: a query
 * gives one document many identities); no dot segments; no userinfo (credentials in a client id
 * would be shown on consent pages). The scheme and host must be written as the URL parser writes
 * them (lowercase, no default port, canonical IP spelling): the id is compared as a plain string,
 * so one document has exactly one accepted spelling.
 */
export function clientIdUrlProblem(clientId: string): string | undefined {
  const urlProblem = fetchUrlProblem(clientId);
  if (urlProblem) return urlProblem.replace(/^URL/, "client_id URL");
  const url = new URL(clientId);
  if (url.search !== "" || clientId.includes("?")) return "client_id URL must not contain a query";
  if (url.pathname === "/" || url.pathname === "") return "client_id URL must have a path";
  if (!clientId.startsWith(`${url.origin}/`)) {
    return "client_id URL scheme and host must be lowercase, without the default port";
  }
  return undefined;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: names are shown on consent pages
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/;

const MAX_URL = 2000;

const displayText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => s.trim().length > 0, "must not be blank")
    .refine((s) => !UNSAFE_TEXT.test(s), "must not contain control or bidirectional-override characters");

/** A URL the server may show or fetch later; logo and client URIs are never fetched by the server. */
const httpsUrl = z
  .string()
  .max(MAX_URL)
  .refine((s) => fetchUrlProblem(s) === undefined, "must be an https URL without userinfo or fragment");

const SHARED_SECRET_METHODS = new Set(["client_secret_basic", "client_secret_post", "client_secret_jwt"]);

const documentSchema = z.object({
  client_id: z.string().max(MAX_URL),
  client_name: displayText(200),
  redirect_uris: z
    .array(z.string().max(MAX_URL))
    .min(1)
    .max(20)
    .superRefine((uris, ctx) => {
      for (const [i, uri] of uris.entries()) {
        const problem = redirectUriProblem(uri);
        if (problem) ctx.addIssue({ code: "custom", path: [i], message: problem });
      }
    }),
  client_uri: httpsUrl.optional(),
  logo_uri: httpsUrl.optional(),
  // A document may add the device grant (RFC 8628) for a client that also runs the code flow.
  grant_types: z
    .array(z.enum(["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE]))
    .min(1)
    .max(3)
    .refine((g) => g.includes("authorization_code"), "must include authorization_code")
    .optional(),
  response_types: z.array(z.literal("code")).min(1).max(1).optional(),
  token_endpoint_auth_method: z.string().max(100).optional(),
  jwks_uri: httpsUrl.optional(),
  jwks: z
    .object({
      keys: z
        .array(z.record(z.string(), z.unknown()))
        .min(1)
        .max(10)
        .refine((keys) => keys.every((k) => !("d" in k)), "must hold public keys only"),
    })
    .optional(),
  scope: z
    .string()
    .max(1000)
    .regex(/^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/, "must be space-separated scope tokens")
    .optional(),
  // RFC 9449 §5.2: the client always uses DPoP; the token endpoint then refuses requests without a
  // proof (grants/dpop-binding.ts reads it from the stored metadata). A boolean, as in register.ts.
  dpop_bound_access_tokens: z.boolean().optional(),
});

function invalidClient(reason: string, detail?: string): OAuthError {
  return new OAuthError("invalid_client", {
    description: `client metadata document: ${reason}`,
    detail: detail ?? reason,
  });
}

/**
 * Validates a fetched Client ID Metadata Document (already JSON-parsed) for `url`, the exact
 * `client_id` string it was fetched for, and returns the client it describes.
 *
 * Checks (draft §4.1 and SECURITY.md): `client_id` equals `url` as a plain string (MUST); required
 * `client_name` and a non-empty `redirect_uris` (MUST), each acceptable as a redirect URI; no
 * `client_secret` and no shared-secret `token_endpoint_auth_method` (draft §4.1: MUST NOT); with
 * `private_key_jwt`, exactly one of `jwks` / `jwks_uri`; grant and response types limited to the
 * code flow; lengths capped; `dpop_bound_access_tokens`, when present, a boolean (RFC 9449 §5.2).
 * Does NOT check the redirect URI of a particular request.
 *
 * Throws `OAuthError("invalid_client")`.
 */
export function validateClientMetadataDocument(
  url: string,
  json: unknown,
  now: number = Date.now(),
): ClientRecord {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw invalidClient("document must be a JSON object");
  }
  const doc = json as Record<string, unknown>;
  // Draft §4.1: a document MUST NOT carry a client secret; the client is public or uses keys.
  if ("client_secret" in doc || "client_secret_expires_at" in doc) {
    throw invalidClient("document must not contain client_secret");
  }
  // The MUST of the spec: client_id equals the URL the document came from, compared as strings.
  if (typeof doc.client_id !== "string") throw invalidClient("client_id is missing");
  if (doc.client_id !== url) throw invalidClient("client_id does not equal the document URL");

  const parsed = documentSchema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.map(String).join(".") : "document";
    const message = issue?.message ?? "invalid";
    throw invalidClient(
      `${where}: ${message}`,
      parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "),
    );
  }
  const d = parsed.data;

  const method = d.token_endpoint_auth_method ?? "none";
  if (SHARED_SECRET_METHODS.has(method)) {
    throw invalidClient(`token_endpoint_auth_method ${method} is not allowed (no shared secrets)`);
  }
  if (method !== "none" && method !== "private_key_jwt") {
    throw invalidClient("token_endpoint_auth_method must be none or private_key_jwt");
  }
  // RFC 7591 §2: jwks and jwks_uri MUST NOT both be present.
  if (d.jwks && d.jwks_uri) throw invalidClient("jwks and jwks_uri must not both be present");
  if (method === "private_key_jwt" && !d.jwks && !d.jwks_uri) {
    throw invalidClient("private_key_jwt needs jwks or jwks_uri");
  }
  const grantTypes = d.grant_types ?? ["authorization_code"];
  const responseTypes = d.response_types ?? ["code"];

  const metadata: Record<string, unknown> = {
    client_id: d.client_id,
    client_name: d.client_name,
    redirect_uris: d.redirect_uris,
    grant_types: grantTypes,
    response_types: responseTypes,
    token_endpoint_auth_method: method,
  };
  for (const key of [
    "client_uri",
    "logo_uri",
    "jwks_uri",
    "jwks",
    "scope",
    "dpop_bound_access_tokens",
  ] as const) {
    if (d[key] !== undefined) metadata[key] = d[key];
  }

  return {
    clientId: url,
    source: "metadata-document",
    clientName: d.client_name,
    clientUri: d.client_uri,
    logoUri: d.logo_uri,
    redirectUris: [...d.redirect_uris],
    grantTypes: [...grantTypes],
    responseTypes: [...responseTypes],
    tokenEndpointAuthMethod: method as TokenEndpointAuthMethod,
    jwksUri: d.jwks_uri,
    jwks: d.jwks,
    scope: d.scope,
    metadata,
    createdAt: now,
  };
}
