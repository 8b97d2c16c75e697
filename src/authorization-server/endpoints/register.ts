/**
 * Dynamic client registration (RFC 7591 §3), rate-limited per client address; unused
 * registrations expire (SECURITY.md "Dynamic registration").
 */
import { z } from "zod";
import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import { formatScope, isScopeToken } from "../../shared/scopes.js";
import type { ClientRecord, TokenEndpointAuthMethod } from "../../storage/contract.js";
import { redirectUriProblem } from "../clients/redirect-uri.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { clientRateLimitKey, RateLimitedError } from "../core/rate-limit.js";
import { readJsonObject } from "../core/request-body.js";
import { DEVICE_CODE_GRANT_TYPE } from "../policy/grants.js";
import { REGISTERED_WITH_TOKEN, registrationAllowance } from "../policy/grants-without-user.js";

/** Display names are stored as given but bounded; pages render them as text, never as markup. */
export const MAX_CLIENT_NAME_LENGTH = 200;
/** Prefix of generated client ids: never `https://`, so they cannot pose as metadata-document URLs. */
export const CLIENT_ID_PREFIX = "gh_";
const HOUR_MS = 60 * 60 * 1000;
const MAX_REGISTRATION_BYTES = 16 * 1024;

const str = (max: number) => z.string().max(max);

/**
 * RFC 7591 §2 client metadata Gatehouse understands. Anything else is ignored (§2: "MUST ignore
 * any client metadata sent by the client that it does not understand"), `client_id` and
 * `client_secret` included: a caller never chooses its credentials.
 */
const RegistrationRequest = z.object({
  redirect_uris: z.array(z.string()).max(20).optional(),
  token_endpoint_auth_method: z
    .enum(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"])
    .optional(),
  grant_types: z
    .array(z.enum(["authorization_code", "refresh_token", "client_credentials", DEVICE_CODE_GRANT_TYPE]))
    .max(4)
    .optional(),
  response_types: z.array(z.literal("code")).max(1).optional(),
  client_name: z.string().max(10_000).optional(),
  client_uri: str(2000).optional(),
  logo_uri: str(2000).optional(),
  tos_uri: str(2000).optional(),
  policy_uri: str(2000).optional(),
  contacts: z.array(str(320)).max(10).optional(),
  scope: str(2000).optional(),
  jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1).max(10) }).optional(),
  jwks_uri: z.string().optional(),
  software_id: str(200).optional(),
  software_version: str(200).optional(),
  // RFC 9449 §5.2: the client always uses DPoP; the token endpoint then refuses requests without it.
  dpop_bound_access_tokens: z.boolean().optional(),
});

function metadataError(description: string): OAuthError {
  return new OAuthError("invalid_client_metadata", { description });
}

/** A URL shown or linked to the user: https, or http on loopback; no userinfo. */
function checkDisplayUrl(name: string, value: string | undefined): void {
  if (value === undefined) return;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw metadataError(`${name} must be an absolute URL`);
  }
  const ok = url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname));
  if (!ok || url.username !== "" || url.password !== "") throw metadataError(`${name} must be an https URL`);
}

async function enforceRateLimit(ctx: ServerContext, address: string): Promise<void> {
  const now = ctx.now();
  const windowStart = Math.floor(now / HOUR_MS) * HOUR_MS;
  const hits = await ctx.store.hitRateLimit(`register:${address}`, windowStart, HOUR_MS);
  if (hits > ctx.options.dynamicRegistration.ratePerHour) {
    const retryAfter = Math.max(1, Math.ceil((windowStart + HOUR_MS - now) / 1000));
    throw new RateLimitedError(retryAfter);
  }
}

// Kept importable from here for callers that knew it here; decided in ../rate-limit.ts.
export { RateLimitedError };

/**
 * Dynamic client registration (RFC 7591 §3; deprecated by the 2026-07-28 revision, kept for
 * clients of servers without Client ID Metadata Documents). Redirect URIs follow the spec's rules
 * (`invalid_redirect_uri`), other bad metadata is `invalid_client_metadata` (§3.2.2). Secrets are
 * returned once and stored hashed; unused registrations expire.
 */
export const handleRegister: Endpoint = async (request, ctx, info) => {
  const address = clientRateLimitKey(info);
  try {
    return await register(request, ctx, address);
  } catch (error) {
    if (error instanceof RateLimitedError) {
      ctx.audit?.({
        type: "rate_limited",
        limit: "registration",
        key_kind: "address",
        retry_after_seconds: error.retryAfterSeconds,
        address,
      });
    } else if (error instanceof OAuthError) {
      ctx.audit?.({ type: "client_registration_refused", error: error.code, address });
    }
    throw error;
  }
};

async function register(request: Request, ctx: ServerContext, address: string): Promise<Response> {
  await enforceRateLimit(ctx, address);
  // RFC 7591 §3: an initial access token, when this server configures any, judged before the body.
  const allowance = registrationAllowance(ctx, request);
  const body = await readJsonObject(request, MAX_REGISTRATION_BYTES, "invalid_client_metadata");
  const parsed = RegistrationRequest.safeParse(body);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path[0];
    if (field === "redirect_uris")
      throw new OAuthError("invalid_redirect_uri", { description: "redirect_uris is invalid" });
    throw metadataError(typeof field === "string" ? `${field} is invalid` : "client metadata is invalid");
  }
  const m = parsed.data;
  const method: TokenEndpointAuthMethod = m.token_endpoint_auth_method ?? "none";
  const grantTypes = m.grant_types ?? ["authorization_code", "refresh_token"];
  if (grantTypes.length === 0) throw metadataError("grant_types must not be empty");
  const usesCode = grantTypes.includes("authorization_code");
  // A refresh token comes only from a grant a user approved: the code or the device grant (RFC 8628).
  if (grantTypes.includes("refresh_token") && !usesCode && !grantTypes.includes(DEVICE_CODE_GRANT_TYPE)) {
    throw metadataError("refresh_token requires the authorization_code or device_code grant type");
  }
  // RFC 7591 §2.1: response_types and grant_types must agree.
  const responseTypes = m.response_types ?? (usesCode ? ["code"] : []);
  if (usesCode !== responseTypes.includes("code")) {
    throw metadataError('response_types must be ["code"] exactly when grant_types has authorization_code');
  }
  const machine = grantTypes.includes("client_credentials");
  if (machine && method === "none") {
    throw metadataError("client_credentials requires a confidential token_endpoint_auth_method");
  }
  // DESIGN.md "Self-registered clients act for a user": a grant without a user only for a
  // registration the operator vouched for with an initial access token (policy/grants-without-user.ts).
  if (machine && !allowance) {
    throw metadataError("client_credentials requires an initial access token (RFC 7591 §3)");
  }
  if (m.jwks_uri !== undefined) {
    // Fetching a stranger-chosen URL later would be server-side request forgery; keys go inline.
    throw metadataError("jwks_uri is not accepted at registration; send jwks instead");
  }
  if (method === "private_key_jwt" && !m.jwks) throw metadataError("private_key_jwt requires jwks");
  const redirectUris = m.redirect_uris ?? [];
  if (usesCode && redirectUris.length === 0) {
    throw new OAuthError("invalid_redirect_uri", { description: "redirect_uris is required" });
  }
  for (const uri of redirectUris) {
    // Spec "Redirect URIs": localhost or HTTPS; dangerous schemes, fragments and userinfo refused.
    const problem = redirectUriProblem(uri);
    if (problem) throw new OAuthError("invalid_redirect_uri", { description: problem });
  }
  for (const key of ["client_uri", "logo_uri", "tos_uri", "policy_uri"] as const)
    checkDisplayUrl(key, m[key]);
  let scope: string | undefined;
  if (m.scope !== undefined) {
    const tokens = m.scope.split(" ").filter((s) => s !== "");
    if (!tokens.every(isScopeToken)) throw metadataError("scope contains invalid characters");
    // RFC 7591 §2: the server may narrow the scope; keep only scopes this server offers.
    const known = tokens.filter((s) => ctx.scopes.has(s));
    scope = known.length > 0 ? formatScope(known) : undefined;
  }
  if (machine && allowance) {
    // A machine client's scope is what it asked for within the token's, or the token's.
    const within =
      scope === undefined ? allowance.scopes : scope.split(" ").filter((s) => allowance.scopes.includes(s));
    if (within.length === 0) throw metadataError("scope is outside the initial access token's scopes");
    scope = formatScope(within);
  }

  const now = ctx.now();
  const clientId = `${CLIENT_ID_PREFIX}${randomToken(24)}`;
  const secret =
    method === "client_secret_basic" || method === "client_secret_post" ? randomToken() : undefined;
  const clientName = m.client_name?.slice(0, MAX_CLIENT_NAME_LENGTH);
  const accepted: Record<string, unknown> = {
    redirect_uris: redirectUris,
    token_endpoint_auth_method: method,
    grant_types: grantTypes,
    response_types: responseTypes,
    ...(clientName === undefined ? {} : { client_name: clientName }),
    ...(m.client_uri === undefined ? {} : { client_uri: m.client_uri }),
    ...(m.logo_uri === undefined ? {} : { logo_uri: m.logo_uri }),
    ...(m.tos_uri === undefined ? {} : { tos_uri: m.tos_uri }),
    ...(m.policy_uri === undefined ? {} : { policy_uri: m.policy_uri }),
    ...(m.contacts === undefined ? {} : { contacts: m.contacts }),
    ...(scope === undefined ? {} : { scope }),
    ...(m.jwks === undefined ? {} : { jwks: m.jwks }),
    ...(m.software_id === undefined ? {} : { software_id: m.software_id }),
    ...(m.software_version === undefined ? {} : { software_version: m.software_version }),
    ...(m.dpop_bound_access_tokens === undefined
      ? {}
      : { dpop_bound_access_tokens: m.dpop_bound_access_tokens }),
  };
  const record: ClientRecord = {
    clientId,
    source: "dynamic",
    redirectUris,
    grantTypes,
    responseTypes,
    tokenEndpointAuthMethod: method,
    // The allowance is recorded with the client (and judged again at each token request), not echoed.
    metadata: machine && allowance ? { ...accepted, [REGISTERED_WITH_TOKEN]: allowance.sha256 } : accepted,
    createdAt: now,
    // SECURITY.md "Dynamic registration": registrations that are never used expire.
    expiresAt: now + ctx.options.dynamicRegistration.unusedTtlSeconds * 1000,
    ...(clientName === undefined ? {} : { clientName }),
    ...(m.client_uri === undefined ? {} : { clientUri: m.client_uri }),
    ...(m.logo_uri === undefined ? {} : { logoUri: m.logo_uri }),
    ...(scope === undefined ? {} : { scope }),
    ...(m.jwks === undefined ? {} : { jwks: m.jwks }),
    ...(secret === undefined ? {} : { clientSecretHash: sha256Base64url(secret), clientSecretExpiresAt: 0 }),
  };
  await ctx.store.createClient(record);
  ctx.audit?.({ type: "client_registered", client_id: clientId, auth_method: method, address });
  return jsonResponse(
    {
      client_id: clientId,
      client_id_issued_at: Math.floor(now / 1000),
      ...(secret === undefined ? {} : { client_secret: secret, client_secret_expires_at: 0 }),
      ...accepted,
    },
    { status: 201, headers: NO_STORE },
  );
}
