/**
 * Which grant types a client may use, decided here only: the grant types a client may use at all
 * ({@link mayUseGrantType}, with the one default for a client that declared none), and the grants
 * that need a client that authenticates ({@link requireConfidentialClient}).
 */

import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord } from "../../storage/contract.js";

/** RFC 8628 §3.4: the grant type a device polls the token endpoint with. */
export const DEVICE_CODE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code";

/** RFC 7523 §2.1: the JWT bearer grant (ID-JAG and workload identity use it). */
export const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/**
 * The grants only a client that authenticates (a secret or a private key) may use:
 * client_credentials (OAuth 2.1 §4.2.1: confidential clients only), token exchange (RFC 8693 §2.1:
 * the exchanging party is a service that proves who it is) and the identity assertion grant (the
 * ID-JAG names one client, and only that client proving who it is may redeem it).
 */
export type ConfidentialGrant = "client_credentials" | "token_exchange" | "identity_assertion";

/**
 * Refuses a public client (`token_endpoint_auth_method` `none`) a {@link ConfidentialGrant}. One
 * answer for all three: `unauthorized_client`, 400 (RFC 6749 §5.2: "The authenticated client is not
 * authorized to use this authorization grant type"). Not `invalid_client`: the client was
 * identified as it registered, its authentication did not fail; the grant is not for its kind.
 */
export function requireConfidentialClient(client: ClientRecord, grant: ConfidentialGrant): void {
  if (client.tokenEndpointAuthMethod !== "none") return;
  throw new OAuthError("unauthorized_client", {
    description: "this grant is for clients that authenticate (a secret or a private key)",
    detail: `${grant} asked by a public client`,
  });
}

/**
 * The grant types of a client that declared none. RFC 7591 §2: an omitted `grant_types` means
 * `authorization_code`; Gatehouse adds `refresh_token`, because such a client (a pre-registered one
 * configured without grant types) is issued a refresh token when the user grants `offline_access`
 * (OpenID Connect Core §11; grants/refresh-policy.ts), and a refresh token that is issued must be
 * redeemable. Nothing else: no grant without a user, no device grant.
 */
const UNDECLARED_GRANT_TYPES: readonly string[] = ["authorization_code", "refresh_token"];

/**
 * Whether `client` may use `grantType` at the token endpoint (RFC 6749 §5.2 `unauthorized_client`
 * otherwise) and, for `refresh_token`, whether it may be issued one at all: the grant types it
 * declared, or {@link UNDECLARED_GRANT_TYPES} when it declared none.
 */
export function mayUseGrantType(client: ClientRecord, grantType: string): boolean {
  const declared = declaredGrantTypes(client) ? client.grantTypes : UNDECLARED_GRANT_TYPES;
  return declared.includes(grantType);
}

/** Whether the client declared its grant types (RFC 7591 §2), rather than taking the default. */
export function declaredGrantTypes(client: ClientRecord): boolean {
  return client.grantTypes.length > 0;
}
