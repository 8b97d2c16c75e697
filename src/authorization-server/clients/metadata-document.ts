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
import { CLIENT_ASSERTION_ALGORITHMS } from "../policy/assertions.js";
import { DEVICE_CODE_GRANT_TYPE, JWT_BEARER_GRANT } from "../policy/grants.js";
import { redirectUriProblem } from "./redirect-uri.js";

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

/** JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2). */
const PRIVATE_KEY_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/**
 * Why `jwk` cannot be a client's public verification key (from a document's `jwks` or the set at its
 * `jwks_uri`), or undefined. A symmetric key (`kty` oct) would be a shared secret published to the
 * world (draft §4.1: no shared secrets); a private key in a public document is a leaked key, and
 * signing with it proves nothing. Either refuses the whole set, fail closed.
 */
export function publicJwkProblem(jwk: unknown): string | undefined {
  if (typeof jwk !== "object" || jwk === null || Array.isArray(jwk)) return "each key must be a JSON object";
  const key = jwk as Record<string, unknown>;
  if (key.kty === "oct") return "symmetric keys (kty oct) are not accepted";
  if (key.kty !== "RSA" && key.kty !== "EC" && key.kty !== "OKP") return "kty must be RSA, EC or OKP";
  if (PRIVATE_KEY_MEMBERS.some((m) => m in key)) return "must hold public keys only";
  return undefined;
}

const SHARED_SECRET_METHODS = new Set(["client_secret_basic", "client_secret_post", "client_secret_jwt"]);

/**
 * Longest list a document may give for grant types, response types or authentication methods. A
 * document lists what its client can do (claude.ai's adds jwt-bearer), so unknown values are
 * tolerated, but not without bound: a list this long is not a description of a client.
 */
const MAX_LIST = 20;

/** A bounded list of short strings (grant types, response types, methods). */
const stringList = (maxLength: number) => z.array(z.string().min(1).max(maxLength)).min(1).max(MAX_LIST);

/**
 * The grant types a document client may hold, in the order the document lists them: the code flow,
 * refresh, the device grant (RFC 8628) and, for a client that authenticates with a key, the JWT
 * bearer grant (RFC 7523; ID-JAG). Whether this server's configuration offers one and whether its
 * policy lets this client use it is decided at the token endpoint (grants/grant-types.ts and the
 * grant handlers); the record keeps only what the document asked for AND the client can use.
 */
function keptGrantTypes(requested: readonly string[], method: "none" | "private_key_jwt"): string[] {
  const usable = new Set(["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE]);
  // A jwt-bearer grant with `none` would let anyone who holds an assertion for the client present it
  // under the client's public id: the grant is simply not given (RFC 7521 §4.2, §5.2).
  if (method === "private_key_jwt") usable.add(JWT_BEARER_GRANT);
  return [...new Set(requested.filter((g) => usable.has(g)))];
}

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
  // Negotiated, not fatal (see keptGrantTypes): unknown and unsupported values are dropped, but the
  // code flow must be there.
  grant_types: stringList(200)
    .refine((g) => g.includes("authorization_code"), "must include authorization_code")
    .optional(),
  response_types: stringList(100)
    .refine((r) => r.includes("code"), "must include code")
    .optional(),
  token_endpoint_auth_method: z.string().max(100).optional(),
  // The draft "RP metadata choices" SEP: the methods the client can use; absent means the single
  // field above. Read by chooseAuthMethod.
  token_endpoint_auth_methods_supported: stringList(100).optional(),
  token_endpoint_auth_signing_alg: z.string().max(20).optional(),
  jwks_uri: httpsUrl.optional(),
  jwks: z
    .object({
      keys: z
        .array(z.record(z.string(), z.unknown()))
        .min(1)
        .max(10)
        .superRefine((keys, ctx) => {
          for (const [i, key] of keys.entries()) {
            const problem = publicJwkProblem(key);
            if (problem) ctx.addIssue({ code: "custom", path: [i], message: problem });
          }
        }),
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

/**
 * The one token endpoint authentication method the server holds this client to, from the methods
 * the document says its client can use (`token_endpoint_auth_methods_supported`, the field the
 * draft "RP metadata choices" SEP says to read; absent means the single `token_endpoint_auth_method`,
 * itself defaulting to `none`) and the ones this server accepts from a document: `private_key_jwt`
 * when the document offers it with keys (`jwks` or `jwks_uri`) and, if it names one, a signing
 * algorithm this server accepts; otherwise `none` when offered. Unknown and shared-secret entries
 * in the list are never chosen.
 *
 * Why private_key_jwt first, and why exactly one method: a `client_id` URL is public, so if the
 * token endpoint accepted every method the document lists, anyone could present the id with `none`
 * and the keys would protect nothing (a stolen refresh token or code would redeem without them).
 * The server therefore picks one method per document and clients/authentication.ts refuses any
 * other (RFC 6749 §2.3: one method per client); preferring the key makes the stronger method the
 * one enforced. A document that lists `none` and offers no usable key is a public client.
 */
function chooseAuthMethod(d: z.infer<typeof documentSchema>): "none" | "private_key_jwt" {
  const offered = d.token_endpoint_auth_methods_supported ?? [d.token_endpoint_auth_method ?? "none"];
  const hasKeys = d.jwks !== undefined || d.jwks_uri !== undefined;
  const alg = d.token_endpoint_auth_signing_alg;
  const algAccepted = alg === undefined || CLIENT_ASSERTION_ALGORITHMS.includes(alg);
  if (offered.includes("private_key_jwt") && hasKeys && algAccepted) return "private_key_jwt";
  if (offered.includes("none")) return "none";
  if (offered.includes("private_key_jwt") && !hasKeys) {
    throw invalidClient("private_key_jwt needs jwks or jwks_uri");
  }
  if (offered.includes("private_key_jwt")) {
    throw invalidClient("token_endpoint_auth_signing_alg is not one this server accepts");
  }
  throw invalidClient("token_endpoint_auth_method must be none or private_key_jwt");
}

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
 * `client_secret` and no shared-secret `token_endpoint_auth_method` (draft §4.1: MUST NOT); not both
 * `jwks` and `jwks_uri`, inline keys public and asymmetric; one authentication method chosen from
 * what the document offers ({@link chooseAuthMethod}); grant and response types negotiated: the
 * code flow must be there, what this server does not support or the chosen method cannot use is
 * dropped ({@link keptGrantTypes}); lists and lengths capped; `dpop_bound_access_tokens`, when
 * present, a boolean (RFC 9449 §5.2). Does NOT check the redirect URI of a particular request.
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

  // Draft §4.1: a document MUST NOT name a shared-secret method (it cannot hold the secret).
  const declared = d.token_endpoint_auth_method;
  if (declared !== undefined && SHARED_SECRET_METHODS.has(declared)) {
    throw invalidClient(`token_endpoint_auth_method ${declared} is not allowed (no shared secrets)`);
  }
  // RFC 7591 §2: jwks and jwks_uri MUST NOT both be present.
  if (d.jwks && d.jwks_uri) throw invalidClient("jwks and jwks_uri must not both be present");
  const method = chooseAuthMethod(d);
  const grantTypes = keptGrantTypes(d.grant_types ?? ["authorization_code"], method);
  const responseTypes = ["code"];

  const metadata: Record<string, unknown> = {
    client_id: d.client_id,
    client_name: d.client_name,
    redirect_uris: d.redirect_uris,
    grant_types: grantTypes,
    response_types: responseTypes,
    token_endpoint_auth_method: method,
  };
  // RFC 7591 §2: with this field, assertions signed with another algorithm MUST be rejected
  // (clients/authentication.ts reads it from the stored metadata).
  if (method === "private_key_jwt" && d.token_endpoint_auth_signing_alg !== undefined) {
    metadata.token_endpoint_auth_signing_alg = d.token_endpoint_auth_signing_alg;
  }
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
    tokenEndpointAuthMethod: method satisfies TokenEndpointAuthMethod,
    jwksUri: d.jwks_uri,
    jwks: d.jwks,
    scope: d.scope,
    metadata,
    createdAt: now,
  };
}
