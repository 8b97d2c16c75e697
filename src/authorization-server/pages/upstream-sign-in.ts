/**
 * The two ends of an upstream sign-in: the start (from the login page's button to the provider)
 * and the callback (from the provider back to a Gatehouse session, then to the consent page of
 * the authorization request it is a step of).
 */
import { createHash, createHmac } from "node:crypto";
import { randomToken, sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import { readInteractionBinding } from "../browser/bound-interaction.js";
import { readCookie } from "../browser/cookies.js";
import { errorPage, unexpectedErrorPage } from "../browser/error-page.js";
import { bindingMatches, issuerPath } from "../browser/interaction.js";
import { seeOther } from "../browser/security-headers.js";
import { startSessionRecord } from "../browser/session.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS, upstreamCallbackPath } from "../core/paths.js";
import type {
  ResolvedUpstreamProvider,
  ResolvedUpstreamSignIn,
  UpstreamProfile,
} from "../core/upstream-options.js";
import { localAccountFor } from "../upstream/accounts.js";
import { admissionFailure } from "../upstream/admission.js";
import { failed, UpstreamFailure } from "../upstream/failure.js";
import { completeOAuth2SignIn } from "../upstream/oauth2-client.js";
import { completeOidcSignIn, discover } from "../upstream/oidc-client.js";
import { authorizationRequestUrl, type UpstreamTokenResponse } from "../upstream/token-request.js";
import { keepSignInTokens } from "../vault/upstream-tokens.js";
import { failurePage } from "./upstream-failure.js";

/** How long a started upstream sign-in waits for its callback. */
export const UPSTREAM_LOGIN_TTL_MS = 10 * 60 * 1000;
/** A `state` we issued is 43 characters; anything much longer is not ours and is not hashed. */
const MAX_STATE_LENGTH = 512;
const MAX_CODE_LENGTH = 4096;

/**
 * The PKCE verifier (RFC 7636 §4.1: 43 base64url characters, 256 bits) and the OpenID Connect
 * nonce of one sign-in, derived from the browser's binding cookie and the sign-in's `state`. They
 * are never stored: the callback derives them again from the cookie the browser brings, so a
 * stolen store row or callback URL is not enough to complete the sign-in elsewhere.
 */
function derivedSecret(binding: string, purpose: "pkce" | "nonce", state: string): string {
  return createHmac("sha256", binding).update(`gatehouse-upstream\0${purpose}\0${state}`).digest("base64url");
}

/** The redirect URI to register at the provider: `<issuer>/upstream/<id>/callback`. */
export function upstreamRedirectUri(ctx: Pick<ServerContext, "options">, providerId: string): string {
  return `${ctx.options.issuer.replace(/\/$/, "")}${upstreamCallbackPath(providerId)}`;
}

/** Waits for the discovery document on the login page at most this long (then the issuer's origin is used). */
const LOGIN_PAGE_DISCOVERY_WAIT_MS = 1500;

/**
 * Where the login page's provider buttons lead, for its CSP `form-action` (Chromium applies it to
 * the redirect that follows the form): each provider's authorization endpoint, which for OpenID
 * Connect comes from discovery (waited for briefly; the issuer's origin stands in meanwhile).
 */
export async function upstreamFormTargets(
  ctx: ServerContext,
  settings: ResolvedUpstreamSignIn,
): Promise<string[]> {
  return Promise.all(
    settings.providers.map(async (provider) => {
      if (provider.kind === "oauth2") return [provider.authorizationEndpoint];
      let timer: ReturnType<typeof setTimeout> | undefined;
      const metadata = await Promise.race([
        discover(provider, settings, ctx.now()),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), LOGIN_PAGE_DISCOVERY_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
      return metadata === undefined || metadata instanceof UpstreamFailure
        ? [provider.issuer]
        : [provider.issuer, metadata.authorization_endpoint];
    }),
  ).then((lists) => lists.flat());
}

/** Where the sign-in started: an authorization request's interaction, or the account pages. */
export type UpstreamSignInOrigin = { binding: string } & (
  | {
      interactionId: string;
      returnTo?: undefined;
      /** The request carried `prompt=login`: an OpenID Connect provider is asked for a fresh sign-in too. */
      reauthenticate?: boolean;
    }
  | { interactionId?: undefined; returnTo?: string; reauthenticate?: undefined }
);

/**
 * Starts a sign-in at `provider` for this browser (the login page checked its CSRF token): a fresh
 * `state` (stored hashed, with the provider, the browser binding's hash and where to continue), the
 * derived PKCE challenge and nonce, then a 303 to the provider. Nothing of the MCP client's request
 * (its redirect URI, state, scopes or resource) goes upstream: the provider only signs the user in.
 */
export async function startUpstreamSignIn(
  ctx: ServerContext,
  settings: ResolvedUpstreamSignIn,
  provider: ResolvedUpstreamProvider,
  origin: UpstreamSignInOrigin,
): Promise<Response> {
  const state = randomToken(32);
  const request = {
    redirectUri: upstreamRedirectUri(ctx, provider.id),
    state,
    // RFC 7636 §4.2: S256.
    codeChallenge: createHash("sha256")
      .update(derivedSecret(origin.binding, "pkce", state))
      .digest("base64url"),
  };
  let location: string;
  if (provider.kind === "oidc") {
    const metadata = await discover(provider, settings, ctx.now());
    if (metadata instanceof UpstreamFailure) return refuse(ctx, provider, metadata);
    location = authorizationRequestUrl(metadata.authorization_endpoint, provider, {
      ...request,
      nonce: derivedSecret(origin.binding, "nonce", state),
      // OpenID Connect Core §3.1.2.1: the client's `prompt=login` is passed on, so the provider's
      // own session does not stand in for the fresh sign-in the client asked for.
      ...(origin.reauthenticate ? { prompt: "login" as const } : {}),
    });
  } else {
    location = authorizationRequestUrl(provider.authorizationEndpoint, provider, request);
  }
  const now = ctx.now();
  await ctx.store.createUpstreamLogin({
    stateHash: sha256Base64url(state),
    providerId: provider.id,
    browserBindingHash: sha256Base64url(origin.binding),
    ...(origin.interactionId !== undefined ? { interactionId: origin.interactionId } : {}),
    ...(origin.returnTo !== undefined ? { returnTo: origin.returnTo } : {}),
    createdAt: now,
    expiresAt: now + UPSTREAM_LOGIN_TTL_MS,
  });
  ctx.log.info("upstream_sign_in_started", { upstream_provider: provider.id });
  return seeOther(location);
}

/** The failure page, with its audit event (the reason's name, never the provider's words). */
function refuse(ctx: ServerContext, provider: ResolvedUpstreamProvider, failure: UpstreamFailure): Response {
  ctx.audit?.({ type: "upstream_sign_in_failed", upstream_provider: provider.id, reason: failure.failure });
  if (failure.detail !== undefined) {
    ctx.log.warn("upstream_sign_in_detail", {
      upstream_provider: provider.id,
      detail: failure.detail.slice(0, 300),
    });
  }
  return failurePage(failure, provider.displayName);
}

/** A completed upstream sign-in, before the Gatehouse session starts. */
interface UpstreamSignIn {
  provider: ResolvedUpstreamProvider;
  profile: UpstreamProfile;
  /**
   * The provider's token response (access, refresh and ID tokens): secrets of the user's, never
   * logged or shown. See {@link finishUpstreamSignIn} for where they end.
   */
  tokens: UpstreamTokenResponse;
  userId: string;
  /** The authorization request this sign-in is a step of, if any. */
  interactionId?: string;
}

/**
 * The callback endpoint of one provider (`GET <issuer>/upstream/<id>/callback`). In order: the
 * `state` (one value, known, unexpired, this provider's, consumed once across instances: RFC 6749
 * §10.12, RFC 9700 §4.7), the browser (its binding cookie's hash equals the one stored at the
 * start), the provider's error if any (`access_denied` = the user cancelled), the code redeemed with
 * the derived PKCE verifier, the ID token or user-info, the admission rules, the local account, and
 * then the session and the consent page. Every failure is a page; nothing is redirected elsewhere.
 */
export function upstreamCallbackEndpoint(
  provider: ResolvedUpstreamProvider,
  settings: ResolvedUpstreamSignIn,
): Endpoint {
  return async (request, ctx) => {
    try {
      return await callback(request, ctx, provider, settings);
    } catch (error) {
      return unexpectedErrorPage(ctx, "upstream_callback", error);
    }
  };
}

async function callback(
  request: Request,
  ctx: ServerContext,
  provider: ResolvedUpstreamProvider,
  settings: ResolvedUpstreamSignIn,
): Promise<Response> {
  const params = new URL(request.url).searchParams;
  // A repeated response parameter is refused rather than one of its values picked (RFC 6749 §3.1).
  for (const name of ["state", "code", "error", "iss"]) {
    if (params.getAll(name).length > 1)
      return refuse(ctx, provider, failed("state_invalid", `repeated ${name}`));
  }
  const state = params.get("state");
  if (state === null || state === "" || state.length > MAX_STATE_LENGTH) {
    return refuse(ctx, provider, failed("state_invalid", "state missing"));
  }
  const login = await ctx.store.consumeUpstreamLogin(sha256Base64url(state), ctx.now());
  if (!login || login.providerId !== provider.id) {
    return refuse(
      ctx,
      provider,
      failed("state_invalid", login ? "state of another provider" : "state unknown, used or expired"),
    );
  }
  // The secret the sign-in was started with: its interaction's, or the browser's (account pages).
  const binding =
    login.interactionId !== undefined
      ? readInteractionBinding(request, ctx, login.interactionId)
      : readCookie(request, "binding", ctx);
  if (binding === undefined || !timingSafeEqualString(sha256Base64url(binding), login.browserBindingHash)) {
    return refuse(ctx, provider, failed("wrong_browser", "binding cookie missing or another browser's"));
  }
  const error = params.get("error");
  if (error !== null) {
    // RFC 6749 §4.1.2.1: `access_denied` is the user's (or the provider's policy's) refusal.
    return refuse(
      ctx,
      provider,
      failed(error === "access_denied" ? "cancelled" : "provider_error", "error response", error),
    );
  }
  const code = params.get("code");
  if (code === null || code === "" || code.length > MAX_CODE_LENGTH) {
    return refuse(ctx, provider, failed("provider_error", "no code in the response"));
  }
  const exchange = {
    code,
    redirectUri: upstreamRedirectUri(ctx, provider.id),
    codeVerifier: derivedSecret(binding, "pkce", state),
  };
  const completed =
    provider.kind === "oidc"
      ? await completeOidcSignIn(
          provider,
          settings,
          { ...exchange, nonce: derivedSecret(binding, "nonce", state), iss: params.get("iss") },
          ctx.now(),
        )
      : await completeOAuth2SignIn(provider, settings, exchange);
  if (completed instanceof UpstreamFailure) return refuse(ctx, provider, completed);
  const refusal = await admissionFailure(provider, completed.profile);
  if (refusal) return refuse(ctx, provider, refusal);
  const account = await localAccountFor(ctx, provider, completed.profile);
  if (account instanceof UpstreamFailure) return refuse(ctx, provider, account);
  if (account.created) {
    ctx.audit?.({
      type: "upstream_account_created",
      upstream_provider: provider.id,
      user_id: account.userId,
    });
  }
  return finishUpstreamSignIn(ctx, binding, login.returnTo, {
    provider,
    profile: completed.profile,
    tokens: completed.tokens,
    userId: account.userId,
    ...(login.interactionId !== undefined ? { interactionId: login.interactionId } : {}),
  });
}

/**
 * Hands a completed upstream sign-in to Gatehouse: a fresh session, the interaction's user, then
 * the consent page, which decides as for any sign-in (policy/consent.ts `maySkipConsent`: a
 * dynamically registered or metadata-document client is asked, never skipped).
 *
 * Upstream tokens: `signIn.tokens` ends here. Unless the provider's `keepTokens` is set they are
 * dropped; with it they are sealed and held by the new session until a grant it approves takes them
 * (./tokens.ts).
 */
async function finishUpstreamSignIn(
  ctx: ServerContext,
  binding: string,
  returnTo: string | undefined,
  signIn: UpstreamSignIn,
): Promise<Response> {
  let next: string;
  if (signIn.interactionId !== undefined) {
    const interaction = await ctx.store.getInteraction(signIn.interactionId, ctx.now());
    if (!interaction || !bindingMatches(binding, interaction)) {
      return errorPage({
        status: 400,
        title: "This request has expired",
        message:
          "The application's sign-in request is no longer valid. Go back to the application and start again.",
      });
    }
    await ctx.store.setInteractionUser(interaction.id, signIn.userId);
    next = issuerPath(ctx, ENDPOINT_PATHS.consent, { interaction: interaction.id });
  } else {
    next = returnTo ?? issuerPath(ctx, ENDPOINT_PATHS.account);
  }
  const session = await startSessionRecord(ctx, signIn.userId);
  const cookie = session.cookie;
  // Kept only when the provider's keepTokens asks, sealed, for the grants this session approves.
  await keepSignInTokens(ctx, signIn.provider, signIn.userId, session.record, signIn.tokens);
  ctx.audit?.({ type: "login_succeeded", user_id: signIn.userId, upstream_provider: signIn.provider.id });
  return seeOther(next, [cookie]);
}
