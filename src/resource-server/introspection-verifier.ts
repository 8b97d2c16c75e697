/**
 * Opaque access tokens verified through OAuth 2.0 Token Introspection (RFC 7662).
 */
import { GatehouseTypeError, OAuthError } from "../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";
import { boundedText } from "./authorization-server-request.js";
import { authInfoFromClaims } from "./claims.js";
import { invalidToken, verificationUnavailable } from "./errors.js";
import type { AccessTokenVerifier, AuthInfo } from "./types.js";

export interface IntrospectionVerifierOptions {
  /** The authorization server's `introspection_endpoint`. */
  endpoint: string | URL;
  /** This resource server's client credentials at the authorization server (client_secret_basic). */
  clientId: string;
  clientSecret: string;
  /** This resource's canonical URI; the response's `aud` must contain it exactly (RFC 8707 §2). */
  audience: string;
  /** Trusted issuer(s): when given, the response's `iss` must equal one exactly. */
  issuer?: string | readonly string[];
  /** Leeway for `exp` and `nbf`, in seconds (default 30). */
  clockToleranceSeconds?: number;
  /** Timeout of one introspection call in ms (default 5000). */
  timeoutMs?: number;
  /** Largest introspection response read, in bytes (default 64 KiB); a larger one is refused. */
  maxResponseBytes?: number;
  /** Fetch implementation (default global fetch). */
  fetch?: typeof fetch;
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

/** RFC 6749 §2.3.1: client_id and secret are form-urlencoded before Basic encoding. */
function basicCredentials(clientId: string, secret: string): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, "+");
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString("base64")}`;
}

/**
 * A verifier that asks the authorization server about each token (RFC 7662 §2.1) with
 * client_secret_basic authentication, and accepts it only when the response says `active: true`,
 * names this resource in `aud`, carries `exp` not past (and `nbf` not in the future), and comes
 * from a trusted `iss` when issuers are configured.
 *
 * Wrap it in {@link cachedVerifier} so each token is introspected once. An unreachable endpoint
 * or a non-200 answer is `temporarily_unavailable` (503), not `invalid_token`.
 */
export function introspectionVerifier(options: IntrospectionVerifierOptions): AccessTokenVerifier {
  let endpoint: URL;
  try {
    endpoint = new URL(options.endpoint);
  } catch {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "introspectionVerifier: endpoint must be an absolute URL",
    );
  }
  if (
    endpoint.protocol !== "https:" &&
    !(endpoint.protocol === "http:" && isLoopbackHost(endpoint.hostname))
  ) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "introspectionVerifier: endpoint must be https (http only for loopback hosts)",
    );
  }
  if (typeof options.clientId !== "string" || options.clientId === "") {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "introspectionVerifier: clientId is required");
  }
  if (typeof options.clientSecret !== "string" || options.clientSecret === "") {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "introspectionVerifier: clientSecret is required");
  }
  if (typeof options.audience !== "string") {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "introspectionVerifier: audience is required");
  }
  const audience = canonicalResourceUri(options.audience);
  const issuers =
    options.issuer === undefined
      ? []
      : typeof options.issuer === "string"
        ? [options.issuer]
        : [...options.issuer];
  const tolerance = options.clockToleranceSeconds ?? 30;
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
  if (!Number.isInteger(maxResponseBytes) || maxResponseBytes <= 0) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "introspectionVerifier: maxResponseBytes must be a positive integer",
    );
  }
  const timeoutMs = options.timeoutMs ?? 5000;
  const doFetch = options.fetch ?? fetch;
  const authorization = basicCredentials(options.clientId, options.clientSecret);
  const href = endpoint.href;

  return {
    async verify(token: string): Promise<AuthInfo> {
      let response: Response;
      try {
        response = await doFetch(href, {
          method: "POST",
          headers: {
            authorization,
            "content-type": "application/x-www-form-urlencoded",
            accept: "application/json",
          },
          body: new URLSearchParams({ token, token_type_hint: "access_token" }).toString(),
          redirect: "manual",
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        throw verificationUnavailable(`introspection request failed: ${(error as Error).name}`, error);
      }
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => {});
        throw verificationUnavailable(`introspection endpoint answered ${response.status}`);
      }
      let body: unknown;
      try {
        // Bounded read of what the endpoint sends (a remote party), then JSON.
        body = JSON.parse(await boundedText(response, maxResponseBytes, "introspection response"));
      } catch (error) {
        throw verificationUnavailable("introspection response is too large or not JSON", error);
      }
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        throw verificationUnavailable("introspection response is not a JSON object");
      }
      const claims = body as Record<string, unknown>;
      // RFC 7662 §2.2: `active` is REQUIRED; anything but boolean true means "do not accept".
      if (claims.active !== true) throw invalidToken("introspection: token inactive");
      try {
        return authInfoFromClaims(claims, {
          audience,
          issuers,
          clockToleranceSeconds: tolerance,
          nowSeconds: (options.now ? options.now() : Date.now()) / 1000,
        });
      } catch (error) {
        if (error instanceof OAuthError) throw error;
        throw invalidToken("introspection: malformed claims", error);
      }
    },
  };
}
