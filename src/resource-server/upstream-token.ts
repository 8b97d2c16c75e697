/**
 * Upstream tokens, the resource server's side: an MCP tool that calls an upstream provider's API
 * (GitHub, Google, ...) as the user behind the request asks its Gatehouse authorization server for
 * that user's upstream access token (`POST <issuer>/upstream/token`), authenticating as its own
 * confidential client and presenting the access token the request carried as the subject. The
 * token the client sent is never forwarded upstream (the spec: "MUST NOT pass through"): it goes
 * only back to the server that issued it. docs/resource-server.md "Upstream tokens" has the
 * trust model. The answer is read with a byte cap and one deadline; no token or secret is ever put
 * in an error.
 */
import { GatehouseError, GatehouseTypeError, type OAuthErrorCode } from "../shared/errors.js";
import {
  type CallLabels,
  type ClientSecretAuth,
  checkedClientAuth,
  checkedEndpoint,
  errorResponse,
  postForm,
} from "./authorization-server-request.js";

export interface UpstreamTokenClientOptions {
  /** The Gatehouse authorization server's issuer (https; plain http only on a loopback host). */
  issuer: string | URL;
  /** This resource server's credentials at the authorization server (default `client_secret_basic`). */
  clientAuth: ClientSecretAuth;
  /** Deadline for each call, body included, in ms (default 10000: the server may refresh upstream). */
  timeoutMs?: number;
  /** Cap on the response body in bytes (default 65536). */
  maxResponseBytes?: number;
  /** Fetch implementation (default the global fetch). */
  fetch?: typeof fetch;
}

/** An upstream provider's access token, to send to that provider's API only. */
export interface UpstreamAccessToken {
  accessToken: string;
  tokenType: "Bearer";
  /** Seconds until it expires, when the provider said. */
  expiresIn?: number;
  /** The scopes the provider granted, when it said. */
  scopes?: string[];
}

/**
 * `ERR_UPSTREAM_REAUTHENTICATE`: nothing usable is kept for this user and provider (never kept,
 * the grant was revoked, the provider refused the refresh token): the user must sign in through
 * the provider again, which a tool reports as an error the user can act on.
 * `ERR_UPSTREAM_UNAVAILABLE`: the provider could not refresh the token now; try later.
 */
export class UpstreamTokenError extends GatehouseError<
  "ERR_UPSTREAM_REAUTHENTICATE" | "ERR_UPSTREAM_UNAVAILABLE"
> {
  constructor(code: "ERR_UPSTREAM_REAUTHENTICATE" | "ERR_UPSTREAM_UNAVAILABLE", message: string) {
    super(code, message);
    this.name = "UpstreamTokenError";
  }
}

/** Where the subject token comes from: the token itself, or the request that carried it. */
export type SubjectTokenSource = string | Request | { headers: Headers | Record<string, unknown> };

/** The access token in the request's `Authorization` header (Bearer or DPoP scheme), if any. */
function subjectToken(source: SubjectTokenSource): string | undefined {
  if (typeof source === "string") return source === "" ? undefined : source;
  const headers = source.headers;
  const value =
    headers instanceof Headers
      ? headers.get("authorization")
      : (headers as Record<string, unknown>).authorization;
  if (typeof value !== "string") return undefined;
  // RFC 6750 §2.1 and RFC 9449 §7.1: one scheme, one space, the token (the gate already judged it).
  const match = /^(?:bearer|dpop) ([A-Za-z0-9\-._~+/]+=*)$/i.exec(value);
  return match?.[1];
}

export interface UpstreamTokenClient {
  /**
   * A valid access token of upstream provider `provider` for the user behind `from` (the request
   * the gate admitted, or the access token it carried). Throws {@link UpstreamTokenError} when the
   * user must sign in again or the provider cannot answer, an {@link OAuthError} when the server
   * refuses this resource server (`invalid_client`, `unauthorized_client`, `invalid_request`), and
   * a `GatehouseError` (`network`, `timeout`, `too_large`, `bad_body`, `http_status`) otherwise.
   */
  token(from: SubjectTokenSource, provider: string): Promise<UpstreamAccessToken>;
}

/** The OAuth error codes the upstream token endpoint answers with, as they reach a caller. */
const ENDPOINT_ERRORS: ReadonlySet<string> = new Set<OAuthErrorCode>([
  "invalid_request",
  "invalid_client",
  "unauthorized_client",
  "server_error",
]);
const LABELS: CallLabels = {
  timeout: "upstream token request timed out",
  failure: "upstream token request failed",
  response: "upstream token response",
  endpoint: "upstream token endpoint",
};

export function upstreamTokenClient(options: UpstreamTokenClientOptions): UpstreamTokenClient {
  const issuer = checkedEndpoint(options.issuer, "upstreamTokenClient: issuer");
  const endpoint = `${issuer.replace(/\/$/, "")}/upstream/token`;
  const call = {
    clientAuth: checkedClientAuth(options.clientAuth, "upstreamTokenClient"),
    maxResponseBytes: options.maxResponseBytes ?? 64 * 1024,
    timeoutMs: options.timeoutMs ?? 10_000,
    fetch: options.fetch ?? fetch,
    labels: LABELS,
  };

  return {
    async token(from, provider) {
      const subject = subjectToken(from);
      if (subject === undefined) {
        throw new GatehouseTypeError(
          "ERR_INVALID_OPTION",
          "upstreamTokenClient: no access token in the request",
        );
      }
      const form = new URLSearchParams({ subject_token: subject, provider });
      const { status, body } = await postForm(endpoint, form, call);
      if (status !== 200) {
        const description = typeof body.error_description === "string" ? body.error_description : undefined;
        if (body.error === "invalid_grant") {
          throw new UpstreamTokenError(
            "ERR_UPSTREAM_REAUTHENTICATE",
            description ?? "upstream re-authentication required",
          );
        }
        if (body.error === "temporarily_unavailable") {
          throw new UpstreamTokenError(
            "ERR_UPSTREAM_UNAVAILABLE",
            description ?? "upstream provider unavailable",
          );
        }
        throw errorResponse(body, status, ENDPOINT_ERRORS, LABELS);
      }
      const { access_token, token_type, expires_in, scope } = body;
      if (typeof access_token !== "string" || access_token === "" || token_type !== "Bearer") {
        throw new GatehouseError(
          "bad_body",
          "upstream token response lacks access_token or a Bearer token_type",
        );
      }
      return {
        accessToken: access_token,
        tokenType: "Bearer",
        ...(typeof expires_in === "number" ? { expiresIn: expires_in } : {}),
        // As the provider wrote it: space-separated (RFC 6749 §3.3), or comma-separated (GitHub).
        ...(typeof scope === "string" ? { scopes: scope.split(/[\s,]+/).filter(Boolean) } : {}),
      };
    },
  };
}
