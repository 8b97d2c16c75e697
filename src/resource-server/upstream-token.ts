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
import { GatehouseError, GatehouseTypeError, OAuthError, type OAuthErrorCode } from "../shared/errors.js";
import { basicCredentials, boundedText, checkedEndpoint } from "./token-exchange.js";

export interface UpstreamTokenClientOptions {
  /** The Gatehouse authorization server's issuer (https; plain http only on a loopback host). */
  issuer: string | URL;
  /** This resource server's credentials at the authorization server (default `client_secret_basic`). */
  clientAuth: {
    clientId: string;
    clientSecret: string;
    method?: "client_secret_basic" | "client_secret_post";
  };
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

export function upstreamTokenClient(options: UpstreamTokenClientOptions): UpstreamTokenClient {
  const issuer = checkedEndpoint(options.issuer, "upstreamTokenClient: issuer");
  const endpoint = `${issuer.replace(/\/$/, "")}/upstream/token`;
  const { clientId, clientSecret, method = "client_secret_basic" } = options.clientAuth ?? {};
  if (
    typeof clientId !== "string" ||
    clientId === "" ||
    typeof clientSecret !== "string" ||
    clientSecret === ""
  ) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "upstreamTokenClient: clientAuth needs clientId and clientSecret",
    );
  }
  const maxBytes = options.maxResponseBytes ?? 64 * 1024;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? fetch;

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
      const headers: Record<string, string> = {
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json",
      };
      if (method === "client_secret_post") {
        form.set("client_id", clientId);
        form.set("client_secret", clientSecret);
      } else {
        headers.authorization = basicCredentials(clientId, clientSecret);
      }
      const signal = AbortSignal.timeout(timeoutMs);
      let status: number;
      let text: string;
      try {
        const response = await doFetch(endpoint, {
          method: "POST",
          headers,
          body: form.toString(),
          redirect: "manual",
          signal,
        });
        status = response.status;
        text = await boundedText(response, maxBytes, "upstream token response");
      } catch (error) {
        if (error instanceof GatehouseError) throw error;
        const timedOut = signal.aborted;
        throw new GatehouseError(
          timedOut ? "timeout" : "network",
          timedOut
            ? "upstream token request timed out"
            : `upstream token request failed: ${(error as Error).name}`,
          { cause: error },
        );
      }
      let body: Record<string, unknown>;
      try {
        const parsed: unknown = JSON.parse(text);
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new TypeError();
        body = parsed as Record<string, unknown>;
      } catch {
        throw new GatehouseError(
          "bad_body",
          `upstream token endpoint answered ${status} without a JSON object`,
        );
      }
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
        if (typeof body.error === "string" && ENDPOINT_ERRORS.has(body.error)) {
          throw new OAuthError(body.error as OAuthErrorCode, {
            ...(description === undefined ? {} : { description }),
            status,
          });
        }
        throw new GatehouseError("http_status", `upstream token endpoint answered ${status}`);
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
