/**
 * The client's one error type. DESIGN.md principle 3: the client keeps apart a transport failure
 * (`kind: "transport"`), an OAuth error response from a server (`kind: "oauth"`), a response that
 * does not conform to the spec (`kind: "nonconforming"`), and a refusal by Gatehouse itself because
 * a MUST would otherwise be broken (`kind: "refused"`) or the caller must act (`kind: "action"`).
 *
 * Messages name the step and the document or rule; they never contain a token, code, secret or
 * verifier.
 */
import { type AuthorizationFlowErrorCode, GatehouseError } from "../shared/errors.js";

export type AuthorizationFlowErrorKind = "transport" | "oauth" | "nonconforming" | "refused" | "action";

/** Stable codes; callers branch on these, never on the message (the closed set: shared/errors.ts). */
export type { AuthorizationFlowErrorCode };

export interface AuthorizationFlowErrorOptions {
  kind: AuthorizationFlowErrorKind;
  /** The step that failed, e.g. `"authorization server metadata (RFC 8414 §3.3 issuer check)"`. */
  step: string;
  cause?: unknown;
  /** For `kind: "oauth"`: the RFC 6749 error code and description from the server. */
  oauthError?: { error: string; error_description?: string; error_uri?: string };
  /** HTTP status of the response that caused the failure, when there was one. */
  status?: number;
  /** For `kind: "transport"`: the URL that could not be fetched (never carries a token). */
  url?: string;
  /** The authorization server (its issuer) the failure concerns, when one is known. */
  issuer?: string;
  /** A 503's Retry-After (RFC 9110 §10.2.3) in whole seconds from now, when the server sent one. */
  retryAfter?: number;
}

export class AuthorizationFlowError extends GatehouseError<AuthorizationFlowErrorCode> {
  readonly kind: AuthorizationFlowErrorKind;
  readonly step: string;
  readonly oauthError: AuthorizationFlowErrorOptions["oauthError"];
  readonly status: number | undefined;
  readonly url: string | undefined;
  readonly retryAfter: number | undefined;
  readonly issuer: string | undefined;

  constructor(code: AuthorizationFlowErrorCode, message: string, options: AuthorizationFlowErrorOptions) {
    super(code, `${options.step}: ${message}`, { cause: options.cause });
    this.name = "AuthorizationFlowError";
    this.kind = options.kind;
    this.step = options.step;
    this.oauthError = options.oauthError;
    this.status = options.status;
    this.url = options.url;
    this.retryAfter = options.retryAfter;
    this.issuer = options.issuer;
  }
}

export function isAuthorizationFlowError(value: unknown): value is AuthorizationFlowError {
  return value instanceof AuthorizationFlowError;
}
