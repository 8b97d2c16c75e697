/**
 * The authorization server metadata document (RFC 8414 §2), also served for OpenID Connect
 * Discovery.
 */
import type { ServerContext } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";
import { supportedGrantTypes } from "../grants/grant-types.js";
import { CLIENT_ASSERTION_ALGORITHMS } from "../policy/assertions.js";

/** Client authentication methods the token endpoint accepts (RFC 6749 §2.3, RFC 7523 §2.2). */
export const TOKEN_ENDPOINT_AUTH_METHODS = [
  "none",
  "client_secret_basic",
  "client_secret_post",
  "private_key_jwt",
] as const;

/**
 * The grant profile of identity assertion JWT authorization grants (ID-JAG, the enterprise-managed
 * authorization extension): clients look for it in `authorization_grant_profiles_supported`.
 */
export const ID_JAG_GRANT_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag";

/**
 * Authorization server metadata (RFC 8414 §2). The same document answers OpenID Connect Discovery:
 * Gatehouse issues no ID tokens, so it claims none of the OpenID-only fields.
 *
 * `issuer` is the configured string exactly (RFC 8414 §3.3: clients compare it as a string).
 */
export function buildMetadata(ctx: ServerContext): Record<string, unknown> {
  const issuer = ctx.options.issuer;
  const scopes = [...ctx.scopes];
  const metadata: Record<string, unknown> = {
    issuer,
    authorization_endpoint: endpointUrl(issuer, "authorize"),
    token_endpoint: endpointUrl(issuer, "token"),
    jwks_uri: endpointUrl(issuer, "jwks"),
  };
  if (ctx.options.dynamicRegistration.enabled) {
    metadata.registration_endpoint = endpointUrl(issuer, "register");
  }
  Object.assign(metadata, {
    scopes_supported: scopes,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: supportedGrantTypes(ctx),
    token_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    token_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    revocation_endpoint: endpointUrl(issuer, "revoke"),
    revocation_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    revocation_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    introspection_endpoint: endpointUrl(issuer, "introspect"),
    // RFC 7662 §2.1: introspection requires authentication, so `none` is not offered.
    introspection_endpoint_auth_methods_supported: TOKEN_ENDPOINT_AUTH_METHODS.filter((m) => m !== "none"),
    introspection_endpoint_auth_signing_alg_values_supported: CLIENT_ASSERTION_ALGORITHMS,
    // PKCE: S256 only (OAuth 2.1 §4.1.1; the spec: clients refuse to proceed without this field).
    code_challenge_methods_supported: ["S256"],
    // RFC 9207 §3: every authorization response carries `iss`.
    authorization_response_iss_parameter_supported: true,
  });
  // Claude uses Client ID Metadata Documents only when it sees this field true AND `none` among the
  // token endpoint's methods above: both are pinned by test/authorization-server/endpoints/metadata-clients.test.ts.
  if (ctx.options.clientMetadataDocuments.enabled) {
    metadata.client_id_metadata_document_supported = true;
  }
  // Enterprise-managed authorization: some clients use the JWT bearer grant with an ID-JAG only when
  // the profile is advertised, so it is, exactly when identity assertions are accepted (a jwt-bearer
  // grant for workload identity alone is not this profile).
  if (ctx.options.enterpriseAuthorization) {
    metadata.authorization_grant_profiles_supported = [ID_JAG_GRANT_PROFILE];
  }
  if (ctx.options.dpop?.enabled) {
    // RFC 9449 §5.1: the very list the token endpoint's proof verifier accepts.
    metadata.dpop_signing_alg_values_supported = [...ctx.options.dpop.signingAlgorithms];
  }
  if (ctx.options.deviceAuthorization?.enabled) {
    // RFC 8628 §4.
    metadata.device_authorization_endpoint = endpointUrl(issuer, "deviceAuthorization");
  }
  return metadata;
}
