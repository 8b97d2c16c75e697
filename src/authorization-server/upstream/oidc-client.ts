/**
 * The OpenID Connect side of an upstream sign-in (OpenID Connect Core 1.0 §3.1, Discovery 1.0):
 * the provider's discovery document, the authorization request (code flow, PKCE S256, `state`,
 * `nonce`), the token request, and the ID token checks with jose.
 */
import {
  createRemoteJWKSet,
  customFetch,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import { timingSafeEqualString } from "../../shared/crypto.js";
import { fetchUrlProblem, GuardedFetchError, guardedFetch } from "../../shared/guarded-fetch.js";
import type {
  ResolvedOidcProvider,
  ResolvedUpstreamSignIn,
  UpstreamProfile,
} from "../core/upstream-options.js";
import { failed, UpstreamFailure } from "./failure.js";
import { exchangeCode, type UpstreamTokenResponse } from "./token-request.js";

/** The parts of a discovery document Gatehouse uses. */
export interface OidcProviderMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  /** RFC 9207 §3: the provider sends `iss` in every authorization response. */
  authorization_response_iss_parameter_supported?: boolean;
}

const DISCOVERY_MAX_BYTES = 64 * 1024;
/** How long a discovery document is reused (a provider's endpoints change rarely). */
const DISCOVERY_CACHE_MS = 60 * 60 * 1000;
/**
 * How long a failed discovery is remembered: every login page view asks for the document (for its
 * CSP), and a provider that is down should not be asked again on each one.
 */
const DISCOVERY_FAILURE_CACHE_MS = 30 * 1000;
const JWKS_MAX_BYTES = 64 * 1024;
/** Clock skew tolerated on `exp` and `iat` (OpenID Connect Core §3.1.3.7 items 9-10). */
const CLOCK_TOLERANCE_SECONDS = 60;
const MAX_SUBJECT_LENGTH = 255;
/** Entra's `tid`: a GUID. */
const TENANT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface CachedDiscovery {
  expiresAt: number;
  metadata: Promise<OidcProviderMetadata>;
}
const discoveries = new WeakMap<ResolvedOidcProvider, CachedDiscovery>();
const keySets = new WeakMap<ResolvedOidcProvider, { jwksUri: string; set: JWTVerifyGetKey }>();

/**
 * The discovery URL (OpenID Connect Discovery 1.0 §4.1: the issuer without a trailing slash, then
 * `/.well-known/openid-configuration`).
 */
function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
}

/**
 * Whether the document's `issuer` is the configured one: exactly (Discovery §4.3), or for Entra's
 * multi-tenant authorities the `{tenantid}` template their metadata publishes on the same host.
 */
function issuerMatches(provider: ResolvedOidcProvider, published: string): boolean {
  if (published === provider.issuer) return true;
  if (!provider.multiTenantIssuer) return false;
  const configured = new URL(provider.issuer);
  return published === `${configured.origin}/{tenantid}/v2.0`;
}

async function fetchDiscovery(
  provider: ResolvedOidcProvider,
  settings: ResolvedUpstreamSignIn,
): Promise<OidcProviderMetadata> {
  const response = await guardedFetch(discoveryUrl(provider.issuer), {
    maxBytes: DISCOVERY_MAX_BYTES,
    timeoutMs: settings.timeoutMs,
    accept: "application/json",
    // This provider's address policy and CAs only (its `allowPrivateNetwork` and `ca`).
    ...provider.network,
  });
  let document: Record<string, unknown>;
  try {
    document = JSON.parse(response.body) as Record<string, unknown>;
  } catch {
    // A fixed message: the parser's own would quote the provider's body into the log.
    throw new Error("discovery document is not JSON");
  }
  if (typeof document !== "object" || document === null)
    throw new Error("discovery document is not an object");
  if (typeof document.issuer !== "string" || !issuerMatches(provider, document.issuer)) {
    throw new Error("discovery document names another issuer");
  }
  for (const field of ["authorization_endpoint", "token_endpoint", "jwks_uri"] as const) {
    const value = document[field];
    if (typeof value !== "string" || fetchUrlProblem(value) !== undefined) {
      throw new Error(`discovery document has no usable ${field}`);
    }
  }
  return document as unknown as OidcProviderMetadata;
}

/**
 * The provider's discovery document, fetched through the guarded fetch and kept an hour; a failed
 * fetch is remembered for half a minute, then tried again.
 */
export async function discover(
  provider: ResolvedOidcProvider,
  settings: ResolvedUpstreamSignIn,
  now: number,
): Promise<OidcProviderMetadata | UpstreamFailure> {
  let cached = discoveries.get(provider);
  if (!cached || cached.expiresAt <= now) {
    cached = { expiresAt: now + DISCOVERY_CACHE_MS, metadata: fetchDiscovery(provider, settings) };
    discoveries.set(provider, cached);
  }
  try {
    return await cached.metadata;
  } catch (error) {
    if (discoveries.get(provider) === cached) {
      cached.expiresAt = Math.min(cached.expiresAt, now + DISCOVERY_FAILURE_CACHE_MS);
    }
    return failed("unreachable", `discovery: ${describe(error)}`);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function keySet(
  provider: ResolvedOidcProvider,
  metadata: OidcProviderMetadata,
  settings: ResolvedUpstreamSignIn,
) {
  const known = keySets.get(provider);
  if (known && known.jwksUri === metadata.jwks_uri) return known.set;
  const set = createRemoteJWKSet(new URL(metadata.jwks_uri), {
    timeoutDuration: settings.timeoutMs,
    cooldownDuration: 30_000,
    cacheMaxAge: 10 * 60_000,
    // The provider's keys through the guarded fetch: https only, bounded, no redirects, and under
    // the provider's own address policy (the jwks_uri its discovery names is reached as it is).
    [customFetch]: async (url: string, init: { signal?: AbortSignal }) => {
      const response = await guardedFetch(url, {
        maxBytes: JWKS_MAX_BYTES,
        timeoutMs: settings.timeoutMs,
        accept: "application/jwk-set+json, application/json",
        ...provider.network,
        ...(init.signal ? { signal: init.signal } : {}),
      });
      return new Response(response.body, { status: response.status, headers: response.headers });
    },
  });
  keySets.set(provider, { jwksUri: metadata.jwks_uri, set });
  return set;
}

/**
 * The ID token checks of OpenID Connect Core §3.1.3.7: signature with the provider's published keys
 * under the configured algorithm allow-list (never the token's own choice, RFC 8725 §3.1), `iss`
 * exactly the issuer (item 2; for Entra multi-tenant the template filled with the token's `tid`),
 * `aud` contains our client id (item 3), `azp` present and ours when there are several audiences
 * and ours whenever present (items 4-5), `exp` not past and `iat` not future (items 9-10), and
 * `nonce` the one this browser's sign-in sent (item 11, constant time).
 */
export async function verifyIdToken(
  provider: ResolvedOidcProvider,
  metadata: OidcProviderMetadata,
  settings: ResolvedUpstreamSignIn,
  idToken: string,
  expectedNonce: string,
  now: number,
): Promise<JWTPayload | UpstreamFailure> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(idToken, keySet(provider, metadata, settings), {
      algorithms: provider.algorithms,
      audience: provider.clientId,
      // A multi-tenant issuer is checked below against the token's `tid`.
      ...(provider.multiTenantIssuer ? {} : { issuer: provider.issuer }),
      currentDate: new Date(now),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ["iss", "sub", "aud", "exp", "iat"],
    }));
  } catch (error) {
    if (
      error instanceof GuardedFetchError ||
      error instanceof errors.JWKSTimeout ||
      error instanceof errors.JWKSInvalid
    ) {
      return failed("unreachable", `keys: ${describe(error)}`);
    }
    return failed("id_token_rejected", describe(error));
  }
  if (provider.multiTenantIssuer) {
    const tid = typeof payload.tid === "string" ? payload.tid.toLowerCase() : undefined;
    if (
      tid === undefined ||
      !TENANT_ID.test(tid) ||
      payload.iss !== metadata.issuer.replace("{tenantid}", tid)
    ) {
      return failed("id_token_rejected", "iss does not match the tenant template with the token's tid");
    }
  }
  const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  if (audiences.length > 1 && payload.azp === undefined) {
    return failed("id_token_rejected", "several audiences and no azp");
  }
  if (payload.azp !== undefined && payload.azp !== provider.clientId) {
    return failed("id_token_rejected", "azp is another client");
  }
  if ((payload.iat as number) > Math.floor(now / 1000) + CLOCK_TOLERANCE_SECONDS) {
    return failed("id_token_rejected", "iat is in the future");
  }
  if (typeof payload.nonce !== "string" || !timingSafeEqualString(payload.nonce, expectedNonce)) {
    return failed("nonce_mismatch", "nonce is missing or another sign-in's");
  }
  if (typeof payload.sub !== "string" || payload.sub === "" || payload.sub.length > MAX_SUBJECT_LENGTH) {
    return failed("id_token_rejected", "sub is missing or too long");
  }
  return payload;
}

/** A short string claim, or undefined (claims are remote input: bounded before they are kept). */
function text(value: unknown, max = 320): string | undefined {
  return typeof value === "string" && value !== "" && value.length <= max ? value : undefined;
}

/** The profile an ID token describes; `email_verified` counts only as the boolean `true`. */
export function oidcProfile(providerId: string, claims: JWTPayload): UpstreamProfile {
  const email = text(claims.email);
  const name = text(claims.name, 200);
  const username = text(claims.preferred_username, 200);
  const hostedDomain = text(claims.hd, 253);
  const tenantId = text(claims.tid, 64);
  return {
    provider: providerId,
    subject: claims.sub as string,
    ...(email === undefined ? {} : { email }),
    emailVerified: email !== undefined && claims.email_verified === true,
    ...(name === undefined ? {} : { name }),
    ...(username === undefined ? {} : { username }),
    ...(hostedDomain === undefined ? {} : { hostedDomain: hostedDomain.toLowerCase() }),
    ...(tenantId === undefined ? {} : { tenantId: tenantId.toLowerCase() }),
    claims,
  };
}

/**
 * Completes an OpenID Connect sign-in: redeems the code (with the PKCE verifier), checks the ID
 * token and returns the profile with the token response (kept for the upstream-token hook).
 */
export async function completeOidcSignIn(
  provider: ResolvedOidcProvider,
  settings: ResolvedUpstreamSignIn,
  params: { code: string; redirectUri: string; codeVerifier: string; nonce: string; iss: string | null },
  now: number,
): Promise<{ profile: UpstreamProfile; tokens: UpstreamTokenResponse } | UpstreamFailure> {
  const metadata = await discover(provider, settings, now);
  if (metadata instanceof UpstreamFailure) return metadata;
  // RFC 9207 §2.4: an `iss` in the response must be this provider's (mix-up defence), and a
  // provider that advertises the parameter must send it. A multi-tenant Entra authority names no
  // single issuer here; its tenant is checked on the ID token's `iss` and `tid` below.
  const issAdvertised = metadata.authorization_response_iss_parameter_supported === true;
  const issWrong = params.iss !== null && !provider.multiTenantIssuer && params.iss !== metadata.issuer;
  if (issWrong || (params.iss === null && issAdvertised)) {
    return failed("id_token_rejected", "authorization response iss is missing or another issuer's");
  }
  const tokens = await exchangeCode(provider, settings, metadata.token_endpoint, params);
  if (tokens instanceof UpstreamFailure) return tokens;
  if (typeof tokens.id_token !== "string")
    return failed("id_token_rejected", "no id_token in the token response");
  const claims = await verifyIdToken(provider, metadata, settings, tokens.id_token, params.nonce, now);
  if (claims instanceof UpstreamFailure) return claims;
  return { profile: oidcProfile(provider.id, claims), tokens };
}
