/**
 * Every error Gatehouse raises, in two families (DESIGN.md principle 3), each with a code from a
 * closed set declared in this file (callers branch on `code`, never on message text):
 *
 * - {@link OAuthError}: a protocol error with an RFC error code. `description` is public and goes on
 *   the wire; `detail` is private and only ever reaches logs; `headers` are added to the HTTP answer
 *   (`WWW-Authenticate` for client authentication, `Retry-After` for rate limits).
 * - {@link GatehouseError}: everything else, with a {@link GatehouseErrorCode}: misuse of the API
 *   ({@link GatehouseTypeError}, a `TypeError`), and failures the caller may handle (the client's
 *   authorization flow and token stores, guarded fetches, storage, key decryption, the command line).
 *
 * None ever carries a token, code or secret in its text.
 */

/**
 * Error codes from RFC 6749 §4.1.2.1/§5.2, RFC 6750 §3.1, RFC 7591 §3.2.2, RFC 8707 §2, RFC 7009,
 * RFC 9449 §5, §8, §9 (DPoP).
 */
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
  | "authorization_pending"
  | "slow_down"
  | "expired_token"
  | "unsupported_token_type"
  | "invalid_dpop_proof"
  | "use_dpop_nonce";

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
  // RFC 8628 §3.5: the device authorization grant's answers while a device polls.
  authorization_pending: 400,
  slow_down: 400,
  expired_token: 400,
  unsupported_token_type: 400,
  // RFC 9449 §5, §8 (token endpoint); a resource server answers both with 401 and a DPoP challenge (§7.1, §9).
  invalid_dpop_proof: 400,
  use_dpop_nonce: 400,
};

export interface OAuthErrorOptions {
  /** Public, human-readable text (`error_description`). Must never contain a secret. */
  description?: string;
  /** Private detail for logs only; never serialised onto the wire. */
  detail?: string;
  /** Overrides the default status for the code. */
  status?: number;
  /** Headers the HTTP answer carries (e.g. `WWW-Authenticate`, `Retry-After`). */
  headers?: Readonly<Record<string, string>>;
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
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(code: OAuthErrorCode, options: OAuthErrorOptions = {}) {
    super(options.description ? `${code}: ${options.description}` : code, { cause: options.cause });
    this.name = "OAuthError";
    this.code = code;
    this.status = options.status ?? DEFAULT_STATUS[code];
    this.description =
      options.description === undefined ? undefined : sanitizeErrorDescription(options.description);
    this.detail = options.detail;
    this.headers = options.headers;
  }

  /** The RFC 6749 §5.2 JSON body. `detail` is deliberately left out. */
  toJSON(): { error: OAuthErrorCode; error_description?: string } {
    return this.description
      ? { error: this.code, error_description: this.description }
      : { error: this.code };
  }
}

/** Misuse of the API: bad options, wrong call order (a `TypeError`). */
export type GatehouseTypeErrorCode =
  | "ERR_INVALID_RESOURCE_URI"
  | "ERR_INVALID_OPTION"
  | "ERR_INVALID_HEADER_VALUE"
  | "ERR_INVALID_SCOPE"
  | "ERR_INVALID_URL";

/** The client's authorization flow (`AuthorizationFlowError` in `gatehouse/client`). */
export type AuthorizationFlowErrorCode =
  | "transport_failed"
  | "oauth_error"
  | "invalid_document"
  | "response_too_large"
  | "prm_not_found"
  | "prm_resource_mismatch"
  | "as_metadata_not_found"
  | "issuer_mismatch"
  | "pkce_not_supported"
  | "insecure_url"
  | "client_information_required"
  | "registration_failed"
  | "state_mismatch"
  | "iss_missing"
  | "iss_mismatch"
  | "authorization_denied"
  | "token_request_failed"
  | "refresh_failed"
  | "revocation_failed"
  | "step_up_limit"
  | "user_agent_failed"
  | "authorization_timed_out"
  | "reauthorization_loop"
  | "no_interactive_authorization";

/** A refused or failed guarded outbound fetch (`GuardedFetchError`, shared/guarded-fetch.ts). */
export type GuardedFetchErrorCode =
  | "bad_url"
  | "blocked_address"
  | "dns"
  | "network"
  | "tls"
  | "timeout"
  | "aborted"
  | "redirect"
  | "http_status"
  | "content_type"
  | "content_encoding"
  | "too_large"
  | "bad_body";

/** An encrypted secret that cannot be opened (`SecretEnvelopeError`, shared/secret-envelope.ts). */
export type SecretEnvelopeErrorCode =
  /** Sealed under a KEK that is not in the keyring (a wrong or missing KEK). */
  | "ERR_KEK_UNKNOWN"
  /** The tag does not verify: ciphertext, nonce or AAD changed (tampering, or another record's envelope). */
  | "ERR_ENVELOPE_AUTHENTICATION"
  /** Not an envelope this version understands. */
  | "ERR_ENVELOPE_MALFORMED";

/** A stored signing key that cannot be used (`SigningKeyDecryptionError`). */
export type SigningKeyDecryptionErrorCode =
  | SecretEnvelopeErrorCode
  /** The key is encrypted but no key-encryption key is configured at all. */
  | "ERR_KEK_NOT_CONFIGURED"
  /** The decrypted (or stored plaintext) private key is not the pair of the published public key. */
  | "ERR_KEY_MISMATCH";

/** The storage backend (`StorageUnavailableError`, `StorageConflictError`, a schema too new). */
export type StorageErrorCode =
  | "ERR_STORAGE_UNAVAILABLE"
  | "ERR_STORAGE_CONFLICT"
  /** The database was migrated by a newer Gatehouse than this one (`migrate()` refuses it). */
  | "ERR_STORAGE_SCHEMA_TOO_NEW";

/** The resource-server gate's signals that are not protocol errors (`MissingTokenError`, `HostNotAllowedError`). */
export type GateErrorCode = "ERR_MISSING_TOKEN" | "ERR_HOST_NOT_ALLOWED";

/**
 * The resource server's upstream token helper (`UpstreamTokenError`, resource-server/upstream-token.ts):
 * the user must sign in through the provider again, or the provider cannot answer now.
 */
export type UpstreamTokenErrorCode = "ERR_UPSTREAM_REAUTHENTICATE" | "ERR_UPSTREAM_UNAVAILABLE";

/**
 * The client's token stores (`TokenStoreError` and its subclasses in `gatehouse/client`); what a
 * caller does next differs by code:
 * - `ERR_KEYCHAIN_UNAVAILABLE`: no OS keychain is reachable, or it did not keep the store key
 *   (`KeychainUnavailableError`): keep the key in a file (`keyLocation: "file"`) or give it
 *   (`GATEHOUSE_STORE_KEY`).
 * - `ERR_STORE_LOCK_TIMEOUT`: another living process held the store's lock past `waitMs`
 *   (`LockTimeoutError`): try again later.
 * - `ERR_STORE_PATH_UNSAFE`: a symbolic link or special file where the store expects its own file
 *   (`StorePathSymlinkError`): remove it.
 * - `ERR_STORE_KEY_MISSING`: the store file's key is in neither the keychain nor the key file (it
 *   was written under `GATEHOUSE_STORE_KEY`?): give that key, or remove the file to sign in afresh.
 * - `ERR_STORE_UNREADABLE`: the store file cannot be read (wrong key, damaged, too large, or a
 *   format this version does not know).
 */
export type TokenStoreErrorCode =
  | "ERR_KEYCHAIN_UNAVAILABLE"
  | "ERR_STORE_LOCK_TIMEOUT"
  | "ERR_STORE_PATH_UNSAFE"
  | "ERR_STORE_KEY_MISSING"
  | "ERR_STORE_UNREADABLE";

/** HTTP adapters reading a request body, and the command line. */
export type AdapterErrorCode = "ERR_BODY_TOO_LARGE" | "ERR_BODY_ABORTED" | "ERR_USAGE";

/** Every code a {@link GatehouseError} may carry: the closed set. */
export type GatehouseErrorCode =
  | GatehouseTypeErrorCode
  | AuthorizationFlowErrorCode
  | GuardedFetchErrorCode
  | SigningKeyDecryptionErrorCode
  | StorageErrorCode
  | GateErrorCode
  | UpstreamTokenErrorCode
  | TokenStoreErrorCode
  | AdapterErrorCode;

/** The base of every error that is not an {@link OAuthError}: a stable `code` from the closed set. */
export class GatehouseError<C extends GatehouseErrorCode = GatehouseErrorCode> extends Error {
  readonly code: C;
  constructor(code: C, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "GatehouseError";
    this.code = code;
  }
}

/** Misuse of the API. A `TypeError` (what JavaScript throws for misuse) with a stable code. */
export class GatehouseTypeError extends TypeError {
  readonly code: GatehouseTypeErrorCode;
  constructor(code: GatehouseTypeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "GatehouseTypeError";
    this.code = code;
  }
}

/** True for any error Gatehouse raised: an {@link OAuthError}, a {@link GatehouseError} or a {@link GatehouseTypeError}. */
export function isGatehouseError(value: unknown): value is OAuthError | GatehouseError | GatehouseTypeError {
  return (
    value instanceof OAuthError || value instanceof GatehouseError || value instanceof GatehouseTypeError
  );
}
