/**
 * The authorization endpoint (OAuth 2.1 §4.1.1): validates the request in a fixed order and parks it
 * in an interaction for login and consent, or answers at once from a remembered consent.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { parseScope } from "../../shared/scopes.js";
import type { ClientRecord } from "../../storage/contract.js";
import { bindNewInteraction } from "../browser/bound-interaction.js";
import { isUntrustedClient } from "../browser/client-info.js";
import { errorPage, oauthErrorPage, unexpectedErrorPage } from "../browser/error-page.js";
import { readFormPairs } from "../browser/form.js";
import {
  authorizationResponseUrl,
  csrfToken,
  INTERACTION_TTL_MS,
  issueCodeAndRedirect,
  issuerPath,
  newInteractionId,
} from "../browser/interaction.js";
import { seeOther } from "../browser/security-headers.js";
import { currentSession } from "../browser/session.js";
import { matchRedirectUri, redirectUriProblem } from "../clients/redirect-uri.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { requestQuery } from "../core/request-url.js";
import { authorizationRequestJkt } from "../grants/dpop-binding.js";
import { maySkipConsent } from "../policy/consent.js";
import { mayUseGrantType } from "../policy/grants.js";
import { servedResource } from "../policy/resources.js";
import { grantableScopes } from "../policy/scopes.js";

/**
 * The authorization endpoint (OAuth 2.1 §4.1.1, authorization code flow with PKCE only).
 *
 * The checks run in a fixed order, because what may happen on failure depends on how far the request
 * got (OAuth 2.1 §4.1.2.1, RFC 9700 §4.1):
 *
 * 1. {@link readParameters}: repeated parameters → error page.
 * 2. {@link authorizingClient}: missing or unknown client, refused metadata document → error page.
 * 3. {@link resolveRedirectUri}: exact match against the registered values → error page on failure,
 *    never a redirect to either URI.
 * 4. From here errors go back to the client with `error`, `state` and `iss` ({@link errorToClient}),
 *    except that an untrusted client first gets a page naming it: {@link checkResponseType},
 *    {@link checkPkce}, {@link resolveResource}, {@link resolveScopes}.
 * 5. {@link continueInteraction}: silent code when an existing consent covers the request, else an
 *    interaction bound to this browser and a 303 to the login or consent page.
 *
 * Omitted `scope` (a documented default, OAuth 2.1 §3.2.2.1): every scope of the requested resource
 * the client may use, without `offline_access`.
 */
export const handleAuthorize: Endpoint = async (request, ctx) => {
  try {
    return await authorize(request, ctx);
  } catch (error) {
    if (error instanceof OAuthError) return oauthErrorPage(error);
    return unexpectedErrorPage(ctx, "authorize", error);
  }
};

/** Parameters that may be repeated: RFC 8707 §2 allows several `resource` values (refused later). */
const MULTI_VALUED = new Set(["resource"]);

interface AuthorizationParameters {
  single: Map<string, string>;
  resources: string[];
}

/** The parameters of a validated authorization request, ready for an interaction or a code. */
interface ValidatedRequest {
  client: ClientRecord;
  /** The redirect URI as requested (and as the code is bound to; the token request repeats it). */
  redirectUri: string;
  /** Whether the request carried `redirect_uri` (then the token request must too, OAuth 2.1 §4.1.3). */
  redirectUriSent: boolean;
  /** The registered value it matched (differs only in a loopback port); consent is keyed by it. */
  registeredRedirectUri: string;
  state?: string;
  scopes: string[];
  resource: string;
  codeChallenge: string;
  prompt: Set<string>;
  /** RFC 9449 §10: the DPoP key thumbprint the code is to be bound to. */
  dpopJkt?: string;
}

async function authorize(request: Request, ctx: ServerContext): Promise<Response> {
  if (request.method !== "GET" && request.method !== "POST") {
    const response = errorPage({
      status: 405,
      title: "Method not allowed",
      message: "The authorization endpoint accepts GET and POST only.",
    });
    response.headers.set("allow", "GET, POST");
    return response;
  }
  const params = readParameters(await parameterPairs(request));
  const client = await authorizingClient(ctx, params.single.get("client_id"));
  const { redirectUri, registered, sent } = resolveRedirectUri(client, params.single.get("redirect_uri"));
  const state = params.single.get("state");

  let validated: ValidatedRequest;
  try {
    checkResponseType(client, params.single.get("response_type"));
    const codeChallenge = checkPkce(
      params.single.get("code_challenge"),
      params.single.get("code_challenge_method"),
    );
    const resource = resolveResource(ctx, params.resources);
    const scopes = resolveScopes(ctx, client, resource, params.single.get("scope"));
    validated = {
      client,
      redirectUri,
      redirectUriSent: sent,
      registeredRedirectUri: registered,
      scopes,
      resource,
      codeChallenge,
      prompt: new Set((params.single.get("prompt") ?? "").split(" ").filter(Boolean)),
    };
    if (state !== undefined) validated.state = state;
    const dpopJkt = authorizationRequestJkt(ctx, params.single.get("dpop_jkt"));
    if (dpopJkt !== undefined) validated.dpopJkt = dpopJkt;
  } catch (error) {
    if (error instanceof OAuthError) return errorToClient(ctx, client, redirectUri, state, error);
    throw error;
  }
  return continueInteraction(request, ctx, validated);
}

/** GET: the query (OAuth 2.1 §4.1.1); POST: a form body (OAuth 2.1 §3.1 allows both). */
async function parameterPairs(request: Request): Promise<[string, string][]> {
  if (request.method === "POST") return readFormPairs(request);
  return [...requestQuery(request)];
}

/**
 * OAuth 2.1 §3.1: request parameters MUST NOT be included more than once. A repeated parameter is
 * refused before anything else, so a second `redirect_uri` or `client_id` can never win. Empty
 * values count as omitted (same section).
 */
function readParameters(pairs: [string, string][]): AuthorizationParameters {
  const single = new Map<string, string>();
  const seen = new Set<string>();
  const resources: string[] = [];
  for (const [name, value] of pairs) {
    if (MULTI_VALUED.has(name)) {
      if (value !== "") resources.push(value);
      continue;
    }
    if (seen.has(name)) {
      throw new OAuthError("invalid_request", {
        description: `the parameter ${/^[a-z_]{1,40}$/.test(name) ? name : "(unnamed)"} is repeated`,
      });
    }
    seen.add(name);
    if (value !== "") single.set(name, value);
  }
  return { single, resources };
}

/** OAuth 2.1 §4.1.2.1: an unknown client gets no redirect; a refused metadata document likewise. */
async function authorizingClient(ctx: ServerContext, clientId: string | undefined): Promise<ClientRecord> {
  if (clientId === undefined) {
    throw new OAuthError("invalid_request", { description: "client_id is required" });
  }
  // The resolver throws OAuthError for a metadata document it refuses; that becomes a page too.
  const client = await ctx.clients.resolve(clientId);
  if (!client) throw new OAuthError("invalid_client", { description: "the application is not known here" });
  if (client.expiresAt !== undefined && client.expiresAt <= ctx.now()) {
    throw new OAuthError("invalid_client", { description: "the application's registration has expired" });
  }
  return client;
}

/**
 * Spec "Redirect URIs and state" / OAuth 2.1 §4.1.1: exact string comparison with the registered
 * values (only the port of an http localhost or loopback IP redirect may vary, RFC 8252 §7.3: see
 * clients/redirect-uri.ts); omitted only when exactly one
 * is registered. Dangerous schemes never match (`redirectUriProblem`). Any failure is a page.
 */
function resolveRedirectUri(
  client: ClientRecord,
  requested: string | undefined,
): { redirectUri: string; registered: string; sent: boolean } {
  if (requested === undefined) {
    const only = client.redirectUris.length === 1 ? client.redirectUris[0]! : undefined;
    // A stored value is re-checked too: a record written around registration must not open a hole.
    if (only !== undefined && redirectUriProblem(only) === undefined) {
      return { redirectUri: only, registered: only, sent: false };
    }
    throw new OAuthError("invalid_request", {
      description: "redirect_uri is required because the application registered several",
    });
  }
  if (redirectUriProblem(requested) !== undefined) {
    throw new OAuthError("invalid_request", {
      description: "redirect_uri is not an acceptable redirect URI",
    });
  }
  const registered = matchRedirectUri(client.redirectUris, requested);
  if (registered === undefined) {
    throw new OAuthError("invalid_request", {
      description: "redirect_uri does not match any redirect URI registered for this application",
    });
  }
  return { redirectUri: requested, registered, sent: true };
}

/** OAuth 2.1 §4.1.1: only `response_type=code`; the client must be allowed to use it. */
function checkResponseType(client: ClientRecord, responseType: string | undefined): void {
  if (responseType === undefined) {
    throw new OAuthError("invalid_request", { description: "response_type is required" });
  }
  if (responseType !== "code") {
    throw new OAuthError("unsupported_response_type", {
      description: "only response_type=code is supported",
    });
  }
  if (client.responseTypes.length > 0 && !client.responseTypes.includes("code")) {
    throw new OAuthError("unauthorized_client", {
      description: "the application may not use response_type=code",
    });
  }
  if (!mayUseGrantType(client, "authorization_code")) {
    throw new OAuthError("unauthorized_client", {
      description: "the application may not use the authorization_code grant",
    });
  }
}

/** base64url of 32 bytes, no padding (RFC 7636 §4.2 with SHA-256). */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * OAuth 2.1 §4.1.1 / §7.5.1: PKCE is required and only `S256` is accepted (`plain` offers no
 * protection when the request leaks; a missing method means `plain`). The challenge must be the
 * canonical base64url form of a SHA-256 digest.
 */
function checkPkce(challenge: string | undefined, method: string | undefined): string {
  if (challenge === undefined) {
    throw new OAuthError("invalid_request", { description: "code_challenge is required (PKCE)" });
  }
  if (method !== "S256") {
    throw new OAuthError("invalid_request", { description: "code_challenge_method must be S256" });
  }
  if (
    !S256_CHALLENGE.test(challenge) ||
    Buffer.from(challenge, "base64url").toString("base64url") !== challenge
  ) {
    throw new OAuthError("invalid_request", {
      description: "code_challenge must be the base64url SHA-256 of the code verifier (43 characters)",
    });
  }
  return challenge;
}

/**
 * RFC 8707 §2: `resource` names the protected resource; one per request, since tokens carry a
 * single audience. Which served resource it names is policy/resources.ts's rule, the same as at the
 * token endpoint.
 */
export function resolveResource(ctx: ServerContext, resources: string[]): string {
  if (resources.length === 0) {
    throw new OAuthError("invalid_target", { description: "the resource parameter is required" });
  }
  if (resources.length > 1) {
    throw new OAuthError("invalid_target", { description: "only one resource may be requested at a time" });
  }
  const resource = resources[0]!;
  if (resource.includes("#")) {
    throw new OAuthError("invalid_target", { description: "resource must not contain a fragment" });
  }
  return servedResource(ctx, resource);
}

/**
 * OAuth 2.1 §3.2.2.1: the scopes this request gets, decided by policy/scopes.ts as for every grant;
 * a `scope` with characters RFC 6749 §3.3 does not allow is `invalid_scope`.
 */
export function resolveScopes(
  ctx: ServerContext,
  client: ClientRecord,
  resourceUri: string,
  scopeParam: string | undefined,
): string[] {
  let requested: Set<string>;
  try {
    requested = parseScope(scopeParam);
  } catch {
    throw new OAuthError("invalid_scope", { description: "scope contains characters that are not allowed" });
  }
  return grantableScopes(ctx, client, {
    resource: resourceUri,
    requested,
    offlineAccess: ctx.options.refresh.enabled,
  });
}

/**
 * An error after the redirect URI is validated goes back to the client (OAuth 2.1 §4.1.2.1) with
 * `state` and `iss` (RFC 9207 §2). An untrusted client does not get the automatic redirect: the user
 * first sees a page naming the client and chooses to return (SECURITY.md "Authorization endpoint";
 * spec: "SHOULD redirect the user agent automatically only to a redirect URI it trusts").
 */
function errorToClient(
  ctx: ServerContext,
  client: ClientRecord,
  redirectUri: string,
  state: string | undefined,
  error: OAuthError,
): Response {
  const params: Parameters<typeof authorizationResponseUrl>[2] = { error: error.code, state };
  if (error.description !== undefined) params.errorDescription = error.description;
  const location = authorizationResponseUrl(redirectUri, ctx, params);
  ctx.log.info("authorization_request_refused", { client_id: client.clientId, error: error.code });
  if (isUntrustedClient(client)) {
    return oauthErrorPage(error, { client, redirectUri, returnUrl: location });
  }
  return seeOther(location);
}

/** The `prompt` values the login and consent pages act on (OpenID Connect Core §3.1.2.1). */
function promptDemands(prompt: Set<string>): Array<"login" | "consent"> {
  return (["login", "consent"] as const).filter((value) => prompt.has(value));
}

/**
 * Step 5. A signed-in user whose consent (for this client and redirect URI) already covers the
 * requested scopes through the hierarchy gets the code at once, when the client's identity is
 * assured ({@link maySkipConsent}). Otherwise the request is parked in an interaction bound to this
 * browser: a binding cookie of its own whose secret's hash the interaction stores
 * (browser/bound-interaction.ts), and a CSRF token derived from it; the consent page then shows what
 * was allowed before.
 */
async function continueInteraction(
  request: Request,
  ctx: ServerContext,
  req: ValidatedRequest,
): Promise<Response> {
  const session = req.prompt.has("login") ? undefined : await currentSession(request, ctx);
  if (session && !req.prompt.has("consent") && maySkipConsent(req.client, req.redirectUri)) {
    const consent = await ctx.store.getConsent(
      session.user.id,
      req.client.clientId,
      req.registeredRedirectUri,
    );
    if (consent && ctx.hierarchy.satisfies(consent.scopes, req.scopes)) {
      return issueCodeAndRedirect(
        ctx,
        {
          clientId: req.client.clientId,
          redirectUri: req.redirectUri,
          redirectUriSent: req.redirectUriSent,
          scopes: req.scopes,
          resource: req.resource,
          state: req.state,
          codeChallenge: req.codeChallenge,
          codeChallengeMethod: "S256",
          ...(req.dpopJkt === undefined ? {} : { dpopJkt: req.dpopJkt }),
        },
        req.client,
        { userId: session.user.id, idHash: session.record.idHash },
      );
    }
  }

  const id = newInteractionId();
  const now = ctx.now();
  const { binding, cookies } = bindNewInteraction(request, ctx, id, now);
  await ctx.store.createInteraction({
    id,
    browserBindingHash: sha256Base64url(binding),
    clientId: req.client.clientId,
    redirectUri: req.redirectUri,
    redirectUriSent: req.redirectUriSent,
    scopes: req.scopes,
    resource: req.resource,
    ...(req.state !== undefined ? { state: req.state } : {}),
    codeChallenge: req.codeChallenge,
    codeChallengeMethod: "S256",
    csrfHash: sha256Base64url(csrfToken(binding, `interaction:${id}`)),
    ...(session ? { userId: session.user.id } : {}),
    // RFC 9449 §10: the code this interaction ends in is bound to the key, as a silent one is.
    ...(req.dpopJkt === undefined ? {} : { dpopJkt: req.dpopJkt }),
    // The pages honour it too: a session older than the request, or a remembered consent, does not answer it.
    ...(promptDemands(req.prompt).length > 0 ? { prompt: promptDemands(req.prompt) } : {}),
    createdAt: now,
    expiresAt: now + INTERACTION_TTL_MS,
  });
  const next = issuerPath(ctx, session ? ENDPOINT_PATHS.consent : ENDPOINT_PATHS.login, { interaction: id });
  return seeOther(next, cookies);
}
