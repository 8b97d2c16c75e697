/**
 * Boundary schemas for the JSON documents the client reads (DESIGN.md principle 5: validate at the
 * boundary, once). Each schema checks the fields Gatehouse relies on and keeps the others
 * (`looseObject`), since every one of these documents is extensible by its RFC.
 *
 * The schemas check shape only. Rules that compare a document with where it came from (RFC 9728
 * §3.3 `resource`, RFC 8414 §3.3 `issuer`) live with the code that knows the origin.
 */
import { z } from "zod";

const stringArray = z.array(z.string());

/** RFC 9728 §2: protected resource metadata. `authorization_servers` is required by the spec. */
export const ProtectedResourceMetadataSchema = z.looseObject({
  resource: z.string().min(1),
  authorization_servers: z.array(z.string().min(1)).min(1),
  scopes_supported: stringArray.optional(),
  bearer_methods_supported: stringArray.optional(),
  resource_name: z.string().optional(),
  /** RFC 9449 §5.2 (as registered for RFC 9728): the resource accepts only DPoP-bound tokens. */
  dpop_bound_access_tokens_required: z.boolean().optional(),
  dpop_signing_alg_values_supported: stringArray.optional(),
});
export type ProtectedResourceMetadata = z.infer<typeof ProtectedResourceMetadataSchema>;

/** RFC 8414 §2 (and OpenID Connect Discovery 1.0 §3): authorization server metadata. */
export const AuthorizationServerMetadataSchema = z.looseObject({
  issuer: z.string().min(1),
  authorization_endpoint: z.string().optional(),
  token_endpoint: z.string().optional(),
  registration_endpoint: z.string().optional(),
  jwks_uri: z.string().optional(),
  scopes_supported: stringArray.optional(),
  response_types_supported: stringArray.optional(),
  grant_types_supported: stringArray.optional(),
  token_endpoint_auth_methods_supported: stringArray.optional(),
  token_endpoint_auth_signing_alg_values_supported: stringArray.optional(),
  code_challenge_methods_supported: stringArray.optional(),
  authorization_response_iss_parameter_supported: z.boolean().optional(),
  client_id_metadata_document_supported: z.boolean().optional(),
  dpop_signing_alg_values_supported: stringArray.optional(),
  revocation_endpoint: z.string().optional(),
});
export type AuthorizationServerMetadata = z.infer<typeof AuthorizationServerMetadataSchema>;

/** RFC 7591 §3.2.1: a client information response. */
export const ClientRegistrationResponseSchema = z.looseObject({
  client_id: z.string().min(1),
  client_secret: z.string().min(1).optional(),
  client_secret_expires_at: z.number().optional(),
  client_id_issued_at: z.number().optional(),
  token_endpoint_auth_method: z.string().optional(),
  redirect_uris: stringArray.optional(),
  grant_types: stringArray.optional(),
});
