/**
 * The code flow both provider kinds share: the authorization request URL, the token request
 * (RFC 6749 §4.1.3 with the PKCE verifier of RFC 7636 §4.5), and the reading of its answer in either dialect: JSON (RFC 6749 §5.1) or the form-encoded
 * body GitHub sends unless asked for JSON, with GitHub's habit of answering errors with 200.
 */
import { GuardedFetchError } from "../../shared/guarded-fetch.js";
import { mediaType } from "../../shared/media-type.js";
import type { ResolvedUpstreamProvider, ResolvedUpstreamSignIn } from "../core/upstream-options.js";
import { failed, type UpstreamFailure } from "./failure.js";
import { addUpstreamClientAuthentication, upstreamRequest } from "./http.js";

/** What an authorization request to a provider carries besides the provider's own settings. */
export interface UpstreamAuthorizationRequest {
  redirectUri: string;
  state: string;
  /** OpenID Connect only (Core §3.1.2.1); a plain OAuth 2 provider is sent none. */
  nonce?: string;
  codeChallenge: string;
  /** OpenID Connect `prompt=login`: the client asked Gatehouse for a fresh sign-in. */
  prompt?: "login";
}

/**
 * The authorization request URL (RFC 6749 §4.1.1, PKCE S256 of RFC 7636 §4.3, OpenID Connect Core
 * §3.1.2.1 with the nonce), the endpoint's own query kept. No `resource`: Microsoft Entra's v2.0
 * endpoints refuse it, and Gatehouse asks the provider for a sign-in, not for a token to pass on.
 */
export function authorizationRequestUrl(
  endpoint: string,
  provider: Pick<ResolvedUpstreamProvider, "clientId" | "scopes">,
  request: UpstreamAuthorizationRequest,
): string {
  const url = new URL(endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", provider.clientId);
  url.searchParams.set("redirect_uri", request.redirectUri);
  url.searchParams.set("scope", provider.scopes.join(" "));
  url.searchParams.set("state", request.state);
  if (request.nonce !== undefined) url.searchParams.set("nonce", request.nonce);
  if (request.prompt !== undefined) url.searchParams.set("prompt", request.prompt);
  url.searchParams.set("code_challenge", request.codeChallenge);
  url.searchParams.set("code_challenge_method", "S256");
  return url.href;
}

/**
 * A provider's token response (RFC 6749 §5.1), as received. The upstream access and refresh tokens
 * are secrets of the user's: they are never logged, never shown and, until the upstream-token
 * feature keeps them (encrypted, bound to the grant), dropped after the sign-in.
 */
export interface UpstreamTokenResponse {
  access_token: string;
  token_type?: string;
  expires_in?: number;
  refresh_token?: string;
  scope?: string;
  id_token?: string;
}

/** Parses a token endpoint's body: JSON, or form-encoded (GitHub without `Accept: application/json`). */
function parseTokenBody(contentType: string | null, body: string): Record<string, unknown> | undefined {
  const type = mediaType(contentType);
  try {
    if (type === "application/x-www-form-urlencoded" || type === "text/plain") {
      return Object.fromEntries(new URLSearchParams(body));
    }
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Redeems the code at the provider's token endpoint. Never sends `resource` (Entra's v2.0
 * endpoints refuse it; Gatehouse asks the provider for a sign-in, not for a token to pass on).
 */
export async function exchangeCode(
  provider: ResolvedUpstreamProvider,
  settings: ResolvedUpstreamSignIn,
  tokenEndpoint: string,
  params: { code: string; redirectUri: string; codeVerifier: string },
): Promise<UpstreamTokenResponse | UpstreamFailure> {
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code: params.code,
    redirect_uri: params.redirectUri,
    code_verifier: params.codeVerifier,
  });
  return requestTokens(provider, settings, tokenEndpoint, body);
}

/**
 * Refreshes upstream tokens kept for a resource server (RFC 6749 §6; ./tokens.ts). The provider's
 * refusal comes back as a `provider_error` failure carrying its `error` code (`invalid_grant`: the
 * refresh token is dead).
 */
export function refreshUpstreamTokens(
  provider: ResolvedUpstreamProvider,
  settings: ResolvedUpstreamSignIn,
  tokenEndpoint: string,
  refreshToken: string,
): Promise<UpstreamTokenResponse | UpstreamFailure> {
  const body = new URLSearchParams({ grant_type: "refresh_token", refresh_token: refreshToken });
  return requestTokens(provider, settings, tokenEndpoint, body);
}

/** One request to the provider's token endpoint, authenticated as Gatehouse, and its answer judged. */
async function requestTokens(
  provider: ResolvedUpstreamProvider,
  settings: ResolvedUpstreamSignIn,
  tokenEndpoint: string,
  body: URLSearchParams,
): Promise<UpstreamTokenResponse | UpstreamFailure> {
  const headers: Record<string, string> = { accept: "application/json" };
  addUpstreamClientAuthentication(provider, headers, body);
  let response: Awaited<ReturnType<typeof upstreamRequest>>;
  try {
    response = await upstreamRequest(tokenEndpoint, {
      method: "POST",
      headers,
      body,
      timeoutMs: settings.timeoutMs,
      // The provider's address policy and CAs (its allowPrivateNetwork and ca).
      ...provider.network,
    });
  } catch (error) {
    return failed(
      "unreachable",
      `token endpoint: ${error instanceof GuardedFetchError ? error.code : "error"}`,
    );
  }
  const parsed = parseTokenBody(response.headers.get("content-type"), response.body);
  if (!parsed)
    return failed("unreachable", `token endpoint answered HTTP ${response.status} without a readable body`);
  // RFC 6749 §5.2 (and GitHub's 200 with `error`): the grant was refused. Only the code is kept.
  if (typeof parsed.error === "string" || response.status !== 200) {
    const code = typeof parsed.error === "string" ? parsed.error : undefined;
    return failed(
      "provider_error",
      `token endpoint refused the ${body.get("grant_type")} (HTTP ${response.status})`,
      code,
    );
  }
  const { access_token, token_type } = parsed;
  if (typeof access_token !== "string" || access_token === "") {
    return failed("unreachable", "token response has no access_token");
  }
  // RFC 6749 §7.1: only bearer tokens are understood (case-insensitive, RFC 6750 §4).
  if (token_type !== undefined && (typeof token_type !== "string" || token_type.toLowerCase() !== "bearer")) {
    return failed("unreachable", "token response has an unknown token_type");
  }
  const expiresIn = Number(parsed.expires_in);
  return {
    access_token,
    ...(typeof token_type === "string" ? { token_type } : {}),
    ...(Number.isFinite(expiresIn) && expiresIn > 0 ? { expires_in: expiresIn } : {}),
    ...(typeof parsed.refresh_token === "string" ? { refresh_token: parsed.refresh_token } : {}),
    ...(typeof parsed.scope === "string" ? { scope: parsed.scope } : {}),
    ...(typeof parsed.id_token === "string" ? { id_token: parsed.id_token } : {}),
  };
}
