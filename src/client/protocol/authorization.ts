/**
 * The authorization request and the validation of its response: PKCE S256, `resource`, `state`,
 * scope, and the issuer recorded before the user agent opens (spec "Authorization flow" 5-7,
 * "Authorization response validation").
 */
import * as oauth from "oauth4webapi";
import { timingSafeEqualString } from "../../shared/crypto.js";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import { AuthorizationFlowError } from "../errors.js";
import type { StoredClient } from "../stores/types.js";
import type { MetadataDiscovery } from "./discovery.js";
import { assertSecureUrl } from "./http.js";

/**
 * The per-request record (spec: "associate it with the per-request record that stores the PKCE
 * verifier (and state)"). Created before the user agent opens; never logged.
 */
export interface PendingAuthorization {
  state: string;
  codeVerifier: string;
  /** The validated issuer of the selected authorization server (2026-07-28 issuer recording). */
  expectedIssuer: string;
  /** Whether that server announced `authorization_response_iss_parameter_supported`. */
  issParameterSupported: boolean;
  redirectUri: string;
  /** Undefined only when the issuer's compatibility settings omit it (issuer-compat.ts). */
  resource: string | undefined;
  scope: string | undefined;
  clientId: string;
  createdAt: number;
}

export interface AuthorizationRequest {
  url: URL;
  pending: PendingAuthorization;
}

/**
 * Whether the authorization server is an OpenID provider: its metadata came from OpenID Connect
 * Discovery (`/.well-known/openid-configuration`), or declares OpenID Connect wherever it was read
 * (`id_token_signing_alg_values_supported`, which OpenID Connect Discovery §3 makes REQUIRED and
 * only ID token issuers have, or `openid` in `scopes_supported`). The second test is needed
 * because the spec's discovery order reads RFC 8414 first, and providers such as oidc-provider
 * serve the same document at both well-known paths.
 */
export function isOpenIdProvider(
  metadata: AuthorizationServerMetadata,
  discoveredVia: MetadataDiscovery | undefined,
): boolean {
  if (discoveredVia === "openid-configuration") return true;
  const algorithms = (metadata as { id_token_signing_alg_values_supported?: unknown })
    .id_token_signing_alg_values_supported;
  return (
    (Array.isArray(algorithms) && algorithms.length > 0) ||
    (metadata.scopes_supported?.includes("openid") ?? false)
  );
}

/**
 * OpenID Connect Core §11: an OpenID provider ignores `offline_access` unless the request carries
 * `prompt=consent` (or other conditions it knows of permit offline access), so without it no
 * refresh token comes back (oidc-provider, at its defaults, drops the scope). The rule is OpenID
 * Connect's, so it applies to OpenID providers only ({@link isOpenIdProvider}): a plain RFC 8414
 * authorization server has no such rule, and `prompt=consent` would make it ask the user again on
 * every authorization. (Both official MCP SDKs send it with `offline_access` to any server.)
 */
export function needsConsentPrompt(
  scope: string | undefined,
  metadata: AuthorizationServerMetadata,
  discoveredVia: MetadataDiscovery | undefined,
): boolean {
  const offline = scope?.split(" ").includes("offline_access") ?? false;
  return offline && isOpenIdProvider(metadata, discoveredVia);
}

/**
 * Builds the authorization URL. `resource` is the PRM value byte for byte (RFC 8707 §2); `scope`
 * is omitted when undefined (spec "Scope selection" 2c); `prompt=consent` is added when
 * {@link needsConsentPrompt} says so, from `discoveredVia` (how `metadata` was discovered).
 */
export async function createAuthorizationRequest(options: {
  metadata: AuthorizationServerMetadata;
  client: StoredClient;
  redirectUri: string;
  /** The RFC 8707 value; undefined only under an issuer's `resource: "omit"` setting. */
  resource: string | undefined;
  scope?: string | undefined;
  discoveredVia?: MetadataDiscovery;
}): Promise<AuthorizationRequest> {
  const { metadata, client } = options;
  const step = `authorization request (${metadata.issuer})`;
  if (!metadata.authorization_endpoint) {
    throw new AuthorizationFlowError(
      "invalid_document",
      "authorization server metadata has no authorization_endpoint",
      {
        kind: "nonconforming",
        step,
      },
    );
  }
  // Mix-up defence: a client id is only ever used with the issuer that issued it.
  if (client.issuer !== metadata.issuer) {
    throw new AuthorizationFlowError("issuer_mismatch", "client registration belongs to another issuer", {
      kind: "refused",
      step,
    });
  }
  const url = assertSecureUrl(metadata.authorization_endpoint, `${step}: authorization_endpoint`);
  const codeVerifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  // Spec "PKCE" 2: S256.
  const codeChallenge = await oauth.calculatePKCECodeChallenge(codeVerifier);
  const params = url.searchParams;
  params.set("response_type", "code");
  params.set("client_id", client.client_id);
  params.set("redirect_uri", options.redirectUri);
  params.set("code_challenge", codeChallenge);
  params.set("code_challenge_method", "S256");
  params.set("state", state);
  // Spec "Resource parameter": MUST be sent; left out only for an issuer an operator named.
  if (options.resource !== undefined) params.set("resource", options.resource);
  if (options.scope) params.set("scope", options.scope);
  if (needsConsentPrompt(options.scope, metadata, options.discoveredVia)) params.set("prompt", "consent");
  return {
    url,
    pending: {
      state,
      codeVerifier,
      expectedIssuer: metadata.issuer,
      issParameterSupported: metadata.authorization_response_iss_parameter_supported === true,
      redirectUri: options.redirectUri,
      resource: options.resource,
      scope: options.scope,
      clientId: client.client_id,
      createdAt: Date.now(),
    },
  };
}

/**
 * SECURITY.md "the browser is opened without a shell" and "URLs from metadata are validated before
 * use": the URL handed to a user agent must be https (or http on loopback) and carry no userinfo.
 */
export function assertOpenableAuthorizationUrl(value: string | URL): URL {
  const step = "user agent (authorization URL check)";
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new AuthorizationFlowError("insecure_url", "the authorization URL is not a valid absolute URL", {
      kind: "refused",
      step,
      cause,
    });
  }
  if (url.username || url.password) {
    throw new AuthorizationFlowError("insecure_url", "authorization URL carries userinfo", {
      kind: "refused",
      step,
    });
  }
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url;
  throw new AuthorizationFlowError("insecure_url", `refusing to open a ${url.protocol} authorization URL`, {
    kind: "refused",
    step,
  });
}

/**
 * Validates the redirect back from the authorization server, in this order:
 *
 * 1. the callback is for our redirect URI;
 * 2. `state` is present exactly once and equal to ours (spec "Redirect URIs and state" 4);
 * 3. the `iss` table of spec "Authorization response validation", by exact string comparison with
 *    the recorded issuer (no case folding, port or slash handling): advertised and absent → reject;
 *    present → must equal. On any failure here nothing of `error`, `error_description` or
 *    `error_uri` is acted on or shown;
 * 4. only then an `error` response is surfaced (as an OAuth error), else the code is returned
 *    (inside oauth4webapi's validated parameters, which its token request requires).
 */
export function validateAuthorizationResponse(
  pending: PendingAuthorization,
  metadata: AuthorizationServerMetadata,
  callbackUrl: string | URL,
): URLSearchParams {
  const step = `authorization response (${pending.expectedIssuer})`;
  const callback = new URL(callbackUrl);
  const expected = new URL(pending.redirectUri);
  if (callback.origin !== expected.origin || callback.pathname !== expected.pathname) {
    throw new AuthorizationFlowError(
      "state_mismatch",
      "callback is not for the redirect URI of this request",
      {
        kind: "refused",
        step,
      },
    );
  }
  const params = callback.searchParams;
  const states = params.getAll("state");
  if (states.length !== 1 || !timingSafeEqualString(states[0]!, pending.state)) {
    throw new AuthorizationFlowError(
      "state_mismatch",
      states.length === 0 ? "response has no state; discarded" : "response state does not match; discarded",
      { kind: "refused", step },
    );
  }
  const issValues = params.getAll("iss");
  if (issValues.length > 1) {
    throw new AuthorizationFlowError("iss_mismatch", "response carries iss more than once; rejected", {
      kind: "refused",
      step,
    });
  }
  const iss = issValues[0];
  if (iss === undefined) {
    if (pending.issParameterSupported) {
      throw new AuthorizationFlowError(
        "iss_missing",
        "the server announces authorization_response_iss_parameter_supported but the response has no iss; rejected (RFC 9207 §2.4)",
        { kind: "refused", step },
      );
    }
  } else if (iss !== pending.expectedIssuer) {
    throw new AuthorizationFlowError(
      "iss_mismatch",
      "iss differs from the recorded issuer; response rejected without reading its error fields (RFC 9207 §2.4)",
      { kind: "refused", step },
    );
  }
  // The recorded issuer, not whatever the metadata says now, is what oauth4webapi compares against.
  const as = {
    ...(metadata as oauth.AuthorizationServer),
    issuer: pending.expectedIssuer,
    authorization_response_iss_parameter_supported: pending.issParameterSupported,
  };
  try {
    return oauth.validateAuthResponse(as, { client_id: pending.clientId }, params, pending.state);
  } catch (error) {
    if (error instanceof oauth.AuthorizationResponseError) {
      const code = error.error;
      throw new AuthorizationFlowError(
        "authorization_denied",
        `authorization server answered ${code}${error.error_description ? `: ${error.error_description}` : ""}`,
        {
          kind: "oauth",
          step,
          oauthError: {
            error: code,
            ...(error.error_description && { error_description: error.error_description }),
            ...(error.cause.get("error_uri") && { error_uri: error.cause.get("error_uri")! }),
          },
        },
      );
    }
    throw new AuthorizationFlowError("invalid_document", "authorization response does not conform", {
      kind: "nonconforming",
      step,
      cause: error,
    });
  }
}
