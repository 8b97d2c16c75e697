/**
 * Which grant types a client may use, decided here only: the grants that need a client that
 * authenticates ({@link requireConfidentialClient}).
 */

import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord } from "../../storage/contract.js";

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
