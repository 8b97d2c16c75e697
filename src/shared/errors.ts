/**
 * The two error families of Gatehouse (DESIGN.md principle 3).
 *
 * - {@link OAuthError}: a protocol error with an RFC error code. `description` is public and goes on
 *   the wire; `detail` is private and only ever reaches logs.
 * - {@link GatehouseTypeError}: misuse of the API (bad options, wrong call order). Its `code` is
 *   stable so callers can branch on it.
 *
 * Neither ever carries a token, code or secret in its text.
 */

/** Error codes from RFC 6749 §4.1.2.1/§5.2, RFC 6750 §3.1, RFC 7591 §3.2.2, RFC 8707 §2, RFC 7009. */
export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "unsupported_response_type"
  | "invalid_scope"
  | "access_denied"
  | "server_error"
  | "temporarily_unavailable"
  | "invalid_token"
  | "insufficient_scope"
  | "invalid_target"
  | "invalid_redirect_uri"
  | "invalid_client_metadata"
  | "unsupported_token_type";

/** Default HTTP status for each code (RFC 6749 §5.2, RFC 6750 §3.1). */
const DEFAULT_STATUS: Record<OAuthErrorCode, number> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  invalid_scope: 400,
  access_denied: 403,
  server_error: 500,
  temporarily_unavailable: 503,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_target: 400,
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  unsupported_token_type: 400,
};

export interface OAuthErrorOptions {
  /** Public, human-readable text (`error_description`). Must never contain a secret. */
  description?: string;
  /** Private detail for logs only; never serialised onto the wire. */
  detail?: string;
  /** Overrides the default status for the code. */
  status?: number;
  cause?: unknown;
}

/** RFC 6749 §5.2: `error_description` is limited to %x20-21 / %x23-5B / %x5D-7E. */
export function sanitizeErrorDescription(text: string): string {
  return text.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, " ").slice(0, 300);
}

export class OAuthError extends Error {
  readonly code: OAuthErrorCode;
  readonly status: number;
  readonly description: string | undefined;
  readonly detail: string | undefined;

  constructor(code: OAuthErrorCode, options: OAuthErrorOptions = {}) {
    super(options.description ? `${code}: ${options.description}` : code, { cause: options.cause });
    this.name = "OAuthError";
    this.code = code;
    this.status = options.status ?? DEFAULT_STATUS[code];
    this.description =
      options.description === undefined ? undefined : sanitizeErrorDescription(options.description);
    this.detail = options.detail;
  }

  /** The RFC 6749 §5.2 JSON body. `detail` is deliberately left out. */
  toJSON(): { error: OAuthErrorCode; error_description?: string } {
    return this.description
      ? { error: this.code, error_description: this.description }
      : { error: this.code };
  }
}

/** Stable codes for API misuse. */
export type GatehouseTypeErrorCode =
  | "ERR_INVALID_RESOURCE_URI"
  | "ERR_INVALID_OPTION"
  | "ERR_INVALID_HEADER_VALUE"
  | "ERR_INVALID_SCOPE"
  | "ERR_INVALID_URL";

export class GatehouseTypeError extends TypeError {
  readonly code: GatehouseTypeErrorCode;
  constructor(code: GatehouseTypeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "GatehouseTypeError";
    this.code = code;
  }
}
