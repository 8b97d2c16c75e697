/**
 * Token exchange for downstream calls (RFC 8693), the resource server's side: a service that
 * received a user's access token asks its authorization server for one issued for a downstream
 * resource, instead of forwarding the token it received (the spec: the inbound token never reaches
 * an upstream API). The answer is read with a byte cap and one deadline.
 */
import { GatehouseError, GatehouseTypeError, type OAuthErrorCode } from "../shared/errors.js";
import { formatScope, parseScope } from "../shared/scopes.js";
import {
  type CallLabels,
  type ClientSecretAuth,
  checkedClientAuth,
  checkedEndpoint,
  errorResponse,
  postForm,
} from "./authorization-server-request.js";

const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
/** The OAuth error codes an exchange may answer with (RFC 6749 §5.2, RFC 8693 §2.2.2). */
const EXCHANGE_ERRORS: ReadonlySet<string> = new Set<OAuthErrorCode>([
  "invalid_request",
  "invalid_client",
  "invalid_grant",
  "unauthorized_client",
  "unsupported_grant_type",
  "invalid_scope",
  "invalid_target",
  "temporarily_unavailable",
  "server_error",
]);
const LABELS: CallLabels = {
  timeout: "token exchange timed out",
  failure: "token exchange request failed",
  response: "token exchange response",
  endpoint: "token exchange",
};

export interface ExchangeTokenOptions {
  /** The authorization server's `token_endpoint` (https; plain http only on a loopback host). */
  tokenEndpoint: string | URL;
  /** This resource server's credentials at the authorization server (default `client_secret_basic`). */
  clientAuth: ClientSecretAuth;
  /** The access token this service received (RFC 8693 `subject_token`). */
  subjectToken: string;
  /** The downstream resource (RFC 8693 §2.1 `resource`); give it, `audience`, or both. */
  resource?: string;
  /** The downstream audience (RFC 8693 §2.1 `audience`). */
  audience?: string;
  /** Scopes wanted for the downstream call (never wider than the subject token's). */
  scope?: string | readonly string[];
  /** Deadline for the whole call, body included, in ms (default 5000). */
  timeoutMs?: number;
  /** Cap on the response body in bytes (default 65536). */
  maxResponseBytes?: number;
  /** Fetch implementation (default the global fetch). */
  fetch?: typeof fetch;
}

/** An exchanged token (RFC 8693 §2.2.1). */
export interface ExchangedToken {
  accessToken: string;
  /** `urn:ietf:params:oauth:token-type:access_token`. */
  issuedTokenType: string;
  /** `Bearer` (or `DPoP`, as the server says). */
  tokenType: string;
  /** Seconds until it expires, when the server said. */
  expiresIn?: number;
  /** The scopes issued, when the server said. */
  scopes?: string[];
}

/**
 * Exchanges `subjectToken` for an access token for a downstream resource (RFC 8693 §2.1), with
 * client authentication (RFC 6749 §2.3.1). An OAuth error from the server is thrown as an
 * {@link OAuthError} with its code (`invalid_target`: not allowed for that resource;
 * `invalid_scope`: wider than allowed; `invalid_request`: the subject token is not acceptable);
 * a transport failure or a non-conforming answer as a `GatehouseError` (`network`, `timeout`,
 * `too_large`, `bad_body`, `http_status`). No token or secret is ever put in an error.
 *
 * What it does NOT check: the issued token itself (the downstream resource server verifies it).
 */
export async function exchangeToken(options: ExchangeTokenOptions): Promise<ExchangedToken> {
  const endpoint = checkedEndpoint(options.tokenEndpoint, "exchangeToken: tokenEndpoint");
  const clientAuth = checkedClientAuth(options.clientAuth, "exchangeToken");
  if (typeof options.subjectToken !== "string" || options.subjectToken === "") {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "exchangeToken: subjectToken is required");
  }
  if (options.resource === undefined && options.audience === undefined) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "exchangeToken: give resource or audience");
  }
  const form = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE_GRANT,
    subject_token: options.subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    requested_token_type: ACCESS_TOKEN_TYPE,
  });
  if (options.resource !== undefined) form.set("resource", options.resource);
  if (options.audience !== undefined) form.set("audience", options.audience);
  if (options.scope !== undefined) {
    const scope = typeof options.scope === "string" ? options.scope : formatScope(options.scope);
    if (scope !== "") form.set("scope", scope);
  }
  const { status, body } = await postForm(endpoint, form, {
    clientAuth,
    timeoutMs: options.timeoutMs ?? 5000,
    maxResponseBytes: options.maxResponseBytes ?? 64 * 1024,
    fetch: options.fetch ?? fetch,
    labels: LABELS,
  });
  if (status !== 200) throw errorResponse(body, status, EXCHANGE_ERRORS, LABELS);
  const { access_token, issued_token_type, token_type, expires_in, scope } = body;
  if (typeof access_token !== "string" || access_token === "" || typeof token_type !== "string") {
    throw new GatehouseError("bad_body", "token exchange response lacks access_token or token_type");
  }
  // RFC 8693 §2.2.1: `issued_token_type` is REQUIRED; anything but an access token is not usable here.
  if (issued_token_type !== ACCESS_TOKEN_TYPE) {
    throw new GatehouseError("bad_body", "token exchange did not issue an access token");
  }
  return {
    accessToken: access_token,
    issuedTokenType: issued_token_type,
    tokenType: token_type,
    ...(typeof expires_in === "number" ? { expiresIn: expires_in } : {}),
    ...(typeof scope === "string" ? { scopes: [...parseScope(scope)] } : {}),
  };
}
