/**
 * Types shared by the resource-server modules: what a verified token yields and how tokens are
 * verified.
 */

export { REVISIONS, type Revision } from "../shared/revision.js";

/**
 * What the resource server knows about a request once its access token has been verified.
 *
 * It deliberately does NOT carry the raw access token: the spec (Token validation, rule 4) forbids
 * passing the token received from a client to upstream APIs, and keeping it out of this object
 * keeps it out of handlers, logs and upstream calls by construction. A handler that calls an
 * upstream API obtains its own token from the upstream authorization server.
 */
export interface AuthInfo {
  /** `sub`: the resource owner (or the client itself for client_credentials tokens). */
  subject: string | undefined;
  /** `client_id` (RFC 9068 §2.2, RFC 7662 §2.2). */
  clientId: string | undefined;
  /** Granted scopes as issued (without expansion through a scope hierarchy). */
  scopes: string[];
  /** `aud`, always an array; it contains this resource's canonical URI. */
  audience: string[];
  /** `exp` in seconds since the epoch. */
  expiresAt: number;
  /** `iss`, equal to one of the trusted issuers. */
  issuer: string | undefined;
  /**
   * The token's identifier, `jti` (RFC 9068 §2.2 / RFC 7519 §4.1.7; RFC 7662 §2.2 for
   * introspection), when it has one as a string. Names the token without being it: safe to log and
   * to hand to the authorization server (see `onInsufficientScope`).
   */
  tokenId?: string;
  /**
   * The RFC 7638 thumbprint of the key the token is bound to (`cnf.jkt`, RFC 9449 §6), when it is
   * DPoP-bound. The gate admits such a token only with the `DPoP` scheme and a valid proof signed
   * by that key (RFC 9449 §7.1), so a handler seeing it knows the request was sender-constrained.
   */
  dpopJkt?: string;
  /** Every claim of the token (JWT payload or introspection response), for application use. */
  claims?: Readonly<Record<string, unknown>>;
}

/**
 * Verifies one access token (OAuth 2.1 §5.2). Implementations throw an `OAuthError` with code
 * `invalid_token` for a token that must be refused (HTTP 401), or `temporarily_unavailable` when
 * the verification itself could not be done (keys or introspection endpoint unreachable).
 */
export interface AccessTokenVerifier {
  verify(token: string): Promise<AuthInfo>;
  /**
   * Optional: the result of an earlier successful `verify(token)` that is still trusted (a cache
   * hit), synchronously; `undefined` when `verify` must be called. Lets the gate answer a warm
   * request without a promise round-trip; it must never return what `verify` would not.
   */
  peek?(token: string): AuthInfo | undefined;
}
