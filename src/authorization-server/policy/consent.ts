/**
 * May this authorization request skip consent: whether a remembered consent may answer it with no
 * page shown ({@link maySkipConsent}), decided here only.
 */

import { isLoopbackHost } from "../../shared/resource-uri.js";
import type { ClientRecord } from "../../storage/contract.js";

/**
 * Whether an authorization request may be approved silently from a remembered consent.
 *
 * RFC 8252 §8.6 and RFC 6749 §10.2: unless the client's identity can be proven, the server should
 * process a repeated request as if nothing had been approved before, or a page on any site could
 * send the browser to `/authorize` with a known public client's id, a loopback `redirect_uri` on a
 * port of its choosing and its own PKCE challenge, and receive a code with no page shown. Silent
 * approval stays only where the code cannot reach anyone but the client:
 *
 * - the client authenticates at the token endpoint (a secret or a private key): a code without
 *   those credentials cannot be redeemed; or
 * - the redirect URI is an `https` URI the client provably controls: one an administrator
 *   registered for a pre-registered client, or one on the same origin as a metadata document's
 *   `client_id` URL (the document's host vouches for it).
 *
 * Everything else (public clients returning to loopback or a custom scheme, dynamically registered
 * public clients, metadata-document clients returning elsewhere) sees the consent page each time;
 * a remembered consent pre-fills it.
 */
export function maySkipConsent(client: ClientRecord, redirectUri: string): boolean {
  if (client.tokenEndpointAuthMethod !== "none") return true;
  let redirect: URL;
  try {
    redirect = new URL(redirectUri);
  } catch {
    return false;
  }
  // Loopback, even over https, is any program on the user's machine (RFC 8252 §8.6).
  if (redirect.protocol !== "https:" || isLoopbackHost(redirect.hostname)) return false;
  if (client.source === "preregistered") return true;
  if (client.source === "metadata-document") {
    try {
      return new URL(client.clientId).origin === redirect.origin;
    } catch {
      return false;
    }
  }
  return false;
}
