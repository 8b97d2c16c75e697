/**
 * Token endpoint requests through oauth4webapi (the wire layer): the authorization code grant with
 * PKCE and `resource`, refresh, and any other grant; plus the single-flight refresh that keeps
 * concurrent callers from presenting one refresh token twice (which a server that rotates refresh
 * tokens treats as theft and answers by revoking the grant).
 */
import * as oauth from "oauth4webapi";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import { AuthorizationFlowError, type AuthorizationFlowErrorCode } from "../errors.js";
import type { StoredClient, StoredTokens } from "../stores/types.js";
import type { DPoPSigner } from "./dpop.js";
import { assertSecureUrl, type FetchLike, wireOptions } from "./http.js";
import { explainNetworkError } from "./network-errors.js";

/** Client authentication material beyond what a registration holds (RFC 7523 `private_key_jwt`). */
export interface ClientKeyMaterial {
  privateKey?: CryptoKey;
  /** `kid` to put in the assertion header, if the server needs one. */
  keyId?: string;
}

/** The oauth4webapi client authentication for a registration (RFC 6749 §2.3, RFC 7523 §2.2). */
export function clientAuthentication(client: StoredClient, keys: ClientKeyMaterial = {}): oauth.ClientAuth {
  switch (client.token_endpoint_auth_method) {
    case "client_secret_basic":
      return clientSecretBasic(requireSecret(client));
    case "client_secret_post":
      return oauth.ClientSecretPost(requireSecret(client));
    case "private_key_jwt":
      if (!keys.privateKey) {
        throw new AuthorizationFlowError(
          "client_information_required",
          "private_key_jwt needs a private key",
          {
            kind: "action",
            step: "token endpoint client authentication (RFC 7523 §2.2)",
          },
        );
      }
      return oauth.PrivateKeyJwt(keys.keyId ? { key: keys.privateKey, kid: keys.keyId } : keys.privateKey);
    default:
      return oauth.None();
  }
}

/**
 * RFC 6749 §2.3.1 HTTP Basic: id and secret each encoded with the application/x-www-form-urlencoded
 * serializer (Appendix B), joined by ":", base64. The WHATWG serializer leaves `*-._` and
 * alphanumerics as they are, which servers that skip the decoding step also accept.
 */
function clientSecretBasic(secret: string): oauth.ClientAuth {
  const encode = (value: string) => new URLSearchParams([["", value]]).toString().slice(1);
  return (_as, client, _body, headers) => {
    const credentials = Buffer.from(`${encode(client.client_id)}:${encode(secret)}`, "utf8").toString(
      "base64",
    );
    headers.set("authorization", `Basic ${credentials}`);
  };
}

function requireSecret(client: StoredClient): string {
  if (!client.client_secret) {
    throw new AuthorizationFlowError(
      "client_information_required",
      `${client.token_endpoint_auth_method} needs a client secret`,
      { kind: "action", step: "token endpoint client authentication (RFC 6749 §2.3.1)" },
    );
  }
  return client.client_secret;
}

export interface TokenRequestContext {
  metadata: AuthorizationServerMetadata;
  client: StoredClient;
  fetch: FetchLike;
  keys?: ClientKeyMaterial;
  /** Extra headers for the token request. */
  headers?: Record<string, string>;
  /** Proves possession of this key on the request, asking for a DPoP-bound token (RFC 9449 §5). */
  dpop?: DPoPSigner;
}

type WireOptions = { headers?: Record<string, string> } & Record<symbol, unknown>;

/**
 * Runs one token request (request and response processing), with a fresh DPoP proof when the
 * context has a key. RFC 9449 §8: a `use_dpop_nonce` error is answered by one retry carrying the
 * nonce the server sent in `DPoP-Nonce` (the server rejects before consuming a code, so the code
 * is still good). A second nonce error is passed on.
 */
async function tokenRequest<T>(
  ctx: TokenRequestContext,
  endpoint: string,
  step: string,
  attempt: (options: WireOptions) => Promise<T>,
): Promise<T> {
  const fetchImpl = ctx.dpop ? ctx.dpop.observing(ctx.fetch) : ctx.fetch;
  for (let tries = 0; ; tries++) {
    const headers: Record<string, string> = { ...ctx.headers };
    if (ctx.dpop) headers.dpop = await ctx.dpop.proof("POST", endpoint);
    const options: WireOptions = {
      ...(Object.keys(headers).length > 0 && { headers }),
      ...wireOptions(fetchImpl, [endpoint], "token response", step),
    };
    try {
      return await attempt(options);
    } catch (error) {
      if (ctx.dpop && tries === 0 && oauth.isDPoPNonceError(error) && ctx.dpop.nonceFor(endpoint)) continue;
      throw error;
    }
  }
}

function toAs(metadata: AuthorizationServerMetadata): oauth.AuthorizationServer {
  return metadata as oauth.AuthorizationServer;
}

/**
 * The `field` endpoint of the authorization server, for a request authenticated as `ctx.client`:
 * present in the metadata (else `invalid_document`), https or loopback (`assertSecureUrl`), and the
 * registration issued by this same issuer (else `issuer_mismatch`).
 */
export function clientEndpoint(
  ctx: { metadata: AuthorizationServerMetadata; client: StoredClient },
  field: "token_endpoint" | "revocation_endpoint",
  step: string,
): string {
  const endpoint = ctx.metadata[field];
  if (!endpoint) {
    throw new AuthorizationFlowError("invalid_document", `authorization server metadata has no ${field}`, {
      kind: "nonconforming",
      step,
    });
  }
  assertSecureUrl(endpoint, step);
  // Mix-up defence: credentials (and tokens) of one issuer never go to another issuer's endpoints.
  if (ctx.client.issuer !== ctx.metadata.issuer) {
    throw new AuthorizationFlowError("issuer_mismatch", "client registration belongs to another issuer", {
      kind: "refused",
      step,
    });
  }
  return endpoint;
}

/**
 * The error for an OAuth error response from the `endpoint` endpoint, as oauth4webapi reports it:
 * an error body (RFC 6749 §5.2, RFC 7009 §2.2.1, RFC 8628 §3.2) or a challenge refusing the client's
 * authentication (401 with `WWW-Authenticate`). Kind `oauth`, with the server's error code and
 * description; undefined for any other failure.
 */
export function endpointOAuthError(
  error: unknown,
  code: AuthorizationFlowErrorCode,
  endpoint: "token" | "revocation" | "device authorization",
  step: string,
): AuthorizationFlowError | undefined {
  if (error instanceof oauth.ResponseBodyError) {
    return new AuthorizationFlowError(
      code,
      `${endpoint} endpoint answered ${error.error}${error.error_description ? `: ${error.error_description}` : ""}`,
      {
        kind: "oauth",
        step,
        status: error.status,
        oauthError: {
          error: error.error,
          ...(error.error_description && { error_description: error.error_description }),
        },
        cause: error,
      },
    );
  }
  // RFC 6749 §5.2 `temporarily_unavailable`, answered as HTTP 503 with Retry-After (RFC 9110
  // §10.2.3) during an outage: oauth4webapi reads only 4xx bodies and calls any other status
  // nonconforming, so the status and the wait are read from the response it carries. An outage
  // to wait out, not a server that breaks the spec.
  if (
    error instanceof oauth.OperationProcessingError &&
    error.cause instanceof Response &&
    error.cause.status === 503
  ) {
    const seconds = retryAfterSeconds(error.cause.headers.get("retry-after"));
    return new AuthorizationFlowError(
      code,
      `${endpoint} endpoint temporarily unavailable, retry ${seconds === undefined ? "later" : `in ${seconds} s`}`,
      {
        kind: "oauth",
        step,
        status: 503,
        oauthError: { error: "temporarily_unavailable" },
        ...(seconds !== undefined && { retryAfter: seconds }),
        cause: error,
      },
    );
  }
  if (error instanceof oauth.WWWAuthenticateChallengeError) {
    return new AuthorizationFlowError(
      code,
      `${endpoint} endpoint rejected the client (HTTP ${error.status})`,
      {
        kind: "oauth",
        step,
        status: error.status,
        oauthError: { error: error.cause[0]?.parameters.error ?? "invalid_client" },
        cause: error,
      },
    );
  }
  return undefined;
}

/** Retry-After (RFC 9110 §10.2.3) in whole seconds from now: delta-seconds or an HTTP-date. */
function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Maps what oauth4webapi throws to our error, without ever quoting a token. */
export function mapTokenError(
  error: unknown,
  step: string,
  code: AuthorizationFlowErrorCode,
  url?: string,
): never {
  if (error instanceof AuthorizationFlowError) throw error;
  const answered = endpointOAuthError(error, code, "token", step);
  if (answered) throw answered;
  const network = explainNetworkError(error) !== undefined;
  if (network || (error instanceof TypeError && !(error instanceof oauth.UnsupportedOperationError))) {
    const cause = (error as { cause?: unknown }).cause;
    if (network || cause !== undefined || /fetch failed/i.test((error as Error).message)) {
      throw new AuthorizationFlowError("transport_failed", "could not reach the token endpoint", {
        kind: "transport",
        step,
        cause: error,
        ...(url !== undefined && { url }),
      });
    }
  }
  throw new AuthorizationFlowError(code, "token response does not conform", {
    kind: "nonconforming",
    step,
    cause: error,
  });
}

/** Turns a processed token response into what we store. */
export function toStoredTokens(
  response: oauth.TokenEndpointResponse,
  base: { issuer: string; client_id: string; resource: string; requestedScope?: string | undefined },
  previous?: StoredTokens,
): StoredTokens {
  const now = Date.now();
  const scope = response.scope ?? base.requestedScope ?? previous?.scope;
  // RFC 6749 §6: without a new refresh token in a refresh response, the old one stays valid.
  const refresh = response.refresh_token ?? previous?.refresh_token;
  return {
    issuer: base.issuer,
    client_id: base.client_id,
    resource: base.resource,
    access_token: response.access_token,
    token_type: response.token_type,
    ...(refresh !== undefined && { refresh_token: refresh }),
    ...(typeof response.expires_in === "number" && { expires_at: now + response.expires_in * 1000 }),
    ...(scope !== undefined && scope !== "" && { scope }),
    obtained_at: now,
  };
}

/** The `resource` form parameter, absent only when an issuer's compatibility setting omits it. */
function resourceParameters(resource: string | undefined): Record<string, string> {
  return resource === undefined ? {} : { resource };
}

/**
 * Authorization code grant (OAuth 2.1 §4.1.3) with `code_verifier` and `resource` (spec "Resource
 * parameter": MUST be in the token request too, identical to the authorization request).
 */
export async function exchangeAuthorizationCode(
  ctx: TokenRequestContext,
  options: {
    callbackParameters: URLSearchParams;
    redirectUri: string;
    codeVerifier: string;
    /** Undefined only under an issuer's `resource: "omit"` setting (issuer-compat.ts). */
    resource: string | undefined;
    scope?: string | undefined;
  },
): Promise<oauth.TokenEndpointResponse> {
  const step = `token request, authorization_code (${ctx.metadata.token_endpoint ?? ctx.metadata.issuer})`;
  const endpoint = clientEndpoint(ctx, "token_endpoint", step);
  const as = toAs(ctx.metadata);
  const client: oauth.Client = { client_id: ctx.client.client_id };
  try {
    return await tokenRequest(ctx, endpoint, step, async (wire) => {
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        client,
        clientAuthentication(ctx.client, ctx.keys),
        options.callbackParameters,
        options.redirectUri,
        options.codeVerifier,
        { additionalParameters: resourceParameters(options.resource), ...wire },
      );
      return oauth.processAuthorizationCodeResponse(as, client, response);
    });
  } catch (error) {
    mapTokenError(error, step, "token_request_failed", endpoint);
  }
}

/** Refresh grant (OAuth 2.1 §4.3), with `resource` so the token stays audience-bound. */
export async function refreshAccessToken(
  ctx: TokenRequestContext,
  options: { refreshToken: string; resource: string | undefined },
): Promise<oauth.TokenEndpointResponse> {
  const step = `token request, refresh_token (${ctx.metadata.token_endpoint ?? ctx.metadata.issuer})`;
  const endpoint = clientEndpoint(ctx, "token_endpoint", step);
  const as = toAs(ctx.metadata);
  const client: oauth.Client = { client_id: ctx.client.client_id };
  try {
    return await tokenRequest(ctx, endpoint, step, async (wire) => {
      const response = await oauth.refreshTokenGrantRequest(
        as,
        client,
        clientAuthentication(ctx.client, ctx.keys),
        options.refreshToken,
        { additionalParameters: resourceParameters(options.resource), ...wire },
      );
      return oauth.processRefreshTokenResponse(as, client, response);
    });
  } catch (error) {
    mapTokenError(error, step, "refresh_failed", endpoint);
  }
}

/** Any other grant (client credentials, JWT bearer, token exchange). */
export async function grantRequest(
  ctx: TokenRequestContext,
  grantType: string,
  parameters: Record<string, string>,
): Promise<oauth.TokenEndpointResponse> {
  const step = `token request, ${grantType} (${ctx.metadata.token_endpoint ?? ctx.metadata.issuer})`;
  const endpoint = clientEndpoint(ctx, "token_endpoint", step);
  const as = toAs(ctx.metadata);
  const client: oauth.Client = { client_id: ctx.client.client_id };
  try {
    return await tokenRequest(ctx, endpoint, step, async (wire) => {
      if (grantType === "client_credentials") {
        const response = await oauth.clientCredentialsGrantRequest(
          as,
          client,
          clientAuthentication(ctx.client, ctx.keys),
          parameters,
          wire,
        );
        return oauth.processClientCredentialsResponse(as, client, response);
      }
      const response = await oauth.genericTokenEndpointRequest(
        as,
        client,
        clientAuthentication(ctx.client, ctx.keys),
        grantType,
        parameters,
        wire,
      );
      return oauth.processGenericTokenEndpointResponse(as, client, response);
    });
  } catch (error) {
    mapTokenError(error, step, "token_request_failed", endpoint);
  }
}
