/**
 * Requests to an upstream provider that the guarded GET (src/shared/guarded-fetch.ts) cannot make:
 * the token request (a POST with client credentials) and the user-info requests (a bearer token).
 * Same guards where they apply, and the same connection code (`guardedConnection`): https only, DNS
 * answers and the connected address checked under the provider's address policy before any byte is
 * sent (`guardSocket`), no redirects, one deadline, a byte cap on the body, identity encoding.
 */
import https from "node:https";
import {
  type FetchDestinationOptions,
  fetchUrlProblem,
  GuardedFetchError,
  guardedConnection,
  guardSocket,
  refusedLiteralHost,
} from "../../shared/guarded-fetch.js";

/** Bodies a provider may send back: tokens, a user, a list of e-mails or organisations. */
export const UPSTREAM_MAX_BYTES = 256 * 1024;

/** One request; where it may connect and which CAs it trusts are the provider's (`ResolvedUpstreamProvider.network`). */
export interface UpstreamRequest extends FetchDestinationOptions {
  method: "GET" | "POST";
  headers: Record<string, string>;
  /** A form body (POST). */
  body?: URLSearchParams;
  timeoutMs: number;
}

export interface UpstreamResponse {
  status: number;
  headers: Headers;
  body: string;
}

/**
 * Sends one request and reads the whole answer (any status: a token endpoint's error is a 400 with
 * a JSON body). Fails with a {@link GuardedFetchError} on a refused URL or address, a redirect, a
 * timeout, an oversized or compressed body, or a broken connection.
 */
export function upstreamRequest(rawUrl: string, init: UpstreamRequest): Promise<UpstreamResponse> {
  const { policy, requestOptions } = guardedConnection(init);
  const refused = refusedLiteralHost(rawUrl, policy);
  if (refused) return Promise.reject(refused);
  const problem = fetchUrlProblem(rawUrl);
  if (problem) return Promise.reject(new GuardedFetchError("bad_url", problem));
  const url = new URL(rawUrl);
  const payload = init.body?.toString();
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (error: GuardedFetchError | undefined, value?: UpstreamResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) {
        request.destroy();
        reject(error);
      } else resolve(value!);
    };
    const timer = setTimeout(
      () => finish(new GuardedFetchError("timeout", `no complete response within ${init.timeoutMs} ms`)),
      init.timeoutMs,
    );
    const request = https.request(url, {
      ...requestOptions,
      method: init.method,
      headers: {
        ...init.headers,
        "accept-encoding": "identity",
        "user-agent": "gatehouse",
        ...(payload === undefined
          ? {}
          : {
              "content-type": "application/x-www-form-urlencoded",
              "content-length": String(Buffer.byteLength(payload)),
            }),
      },
    });
    request.on("socket", (socket) => guardSocket(socket, policy));
    request.on("error", (cause) =>
      finish(
        cause instanceof GuardedFetchError
          ? cause
          : new GuardedFetchError("network", "connection to the provider failed", { cause }),
      ),
    );
    request.on("response", (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        finish(new GuardedFetchError("redirect", `refused redirect (HTTP ${status})`, { status }));
        return;
      }
      const encoding = String(res.headers["content-encoding"] ?? "identity").toLowerCase();
      if (encoding !== "identity" && encoding !== "") {
        finish(new GuardedFetchError("content_encoding", "response is content-encoded"));
        return;
      }
      const headers = new Headers();
      for (const [name, value] of Object.entries(res.headers)) {
        if (value === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value]) {
          try {
            headers.append(name, v);
          } catch {
            // A header Headers cannot hold is dropped; nothing here needs it.
          }
        }
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > UPSTREAM_MAX_BYTES) {
          finish(new GuardedFetchError("too_large", `response is larger than ${UPSTREAM_MAX_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on("error", (cause) => finish(new GuardedFetchError("network", "response failed", { cause })));
      res.on("end", () => {
        let body: string;
        try {
          body = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
        } catch {
          finish(new GuardedFetchError("bad_body", "response body is not UTF-8"));
          return;
        }
        finish(undefined, { status, headers, body });
      });
    });
    request.end(payload);
  });
}

/** The client authentication of a token request (RFC 6749 §2.3.1), added to `headers` and `body`. */
export function addUpstreamClientAuthentication(
  provider: {
    clientId: string;
    clientSecret?: string;
    tokenEndpointAuthMethod: "client_secret_basic" | "client_secret_post" | "none";
  },
  headers: Record<string, string>,
  body: URLSearchParams,
): void {
  if (provider.tokenEndpointAuthMethod === "client_secret_basic") {
    // RFC 6749 §2.3.1: both parts form-encoded before Basic.
    const encode = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
    const credentials = `${encode(provider.clientId)}:${encode(provider.clientSecret ?? "")}`;
    headers.authorization = `Basic ${Buffer.from(credentials).toString("base64")}`;
    return;
  }
  body.set("client_id", provider.clientId);
  if (provider.tokenEndpointAuthMethod === "client_secret_post") {
    body.set("client_secret", provider.clientSecret ?? "");
  }
}
