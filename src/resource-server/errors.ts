/**
 * The typed errors the gate throws. `challengeResponse` (challenge.ts) is the one place that turns
 * them into HTTP answers (RFC 6750 §3.1).
 */
import { GatehouseError, OAuthError, type OAuthErrorOptions } from "../shared/errors.js";

/**
 * The request carries no bearer credentials at all (no `Authorization` header, or one with a
 * scheme other than Bearer). RFC 6750 §3.1: the answer is 401 and SHOULD NOT carry an error code,
 * so this is not an {@link OAuthError}.
 */
export class MissingTokenError extends GatehouseError<"ERR_MISSING_TOKEN"> {
  /** The scopes the operation needs, for the challenge's `scope` parameter. */
  readonly requiredScopes: readonly string[];
  constructor(requiredScopes: readonly string[] = []) {
    super("ERR_MISSING_TOKEN", "no bearer token in the request");
    this.name = "MissingTokenError";
    this.requiredScopes = requiredScopes;
  }
}

/**
 * The request's `Host`, or its `Origin`, is not on the resource's allow-list (DNS-rebinding defence,
 * see host-guard.ts). Not an {@link OAuthError}: no token was looked at, and the answer (403) carries
 * no challenge. `value` is what the request sent, for logs only (never put in a response).
 */
export class HostNotAllowedError extends GatehouseError<"ERR_HOST_NOT_ALLOWED"> {
  constructor(
    readonly header: "host" | "origin",
    readonly value: string | null,
  ) {
    super("ERR_HOST_NOT_ALLOWED", `request ${header} is not allowed for this resource`);
    this.name = "HostNotAllowedError";
  }
}

/**
 * A valid token whose scopes do not cover the operation (RFC 6750 §3.1 `insufficient_scope`, 403).
 * Carries the scopes the operation needs and the ones the token has, so the challenge can list
 * every needed scope at once (2026-07-28) or repeat relevant granted ones (2025-11-25).
 */
export class InsufficientScopeError extends OAuthError {
  readonly requiredScopes: readonly string[];
  readonly grantedScopes: readonly string[];
  readonly missingScopes: readonly string[];
  constructor(
    required: readonly string[],
    granted: readonly string[],
    missing: readonly string[],
    options: OAuthErrorOptions = {},
  ) {
    super("insufficient_scope", {
      description: options.description ?? "The access token does not grant the scopes this operation needs",
      ...options,
    });
    this.name = "InsufficientScopeError";
    this.requiredScopes = required;
    this.grantedScopes = granted;
    this.missingScopes = missing;
  }
}

/** `invalid_token` (401): the token is malformed, expired, revoked, foreign or for another audience. */
export function invalidToken(detail: string, cause?: unknown): OAuthError {
  // The public description stays generic: which check failed is detail for logs only.
  return new OAuthError("invalid_token", { description: "The access token is invalid", detail, cause });
}

/** `invalid_request` (400): the request is malformed (RFC 6750 §3.1). */
export function invalidRequest(description: string, detail?: string): OAuthError {
  return new OAuthError("invalid_request", { description, detail });
}

/** The token could not be checked (keys or introspection endpoint unreachable): 503, not 401. */
export function verificationUnavailable(detail: string, cause?: unknown): OAuthError {
  return new OAuthError("temporarily_unavailable", {
    description: "The access token cannot be verified right now",
    detail,
    cause,
  });
}
