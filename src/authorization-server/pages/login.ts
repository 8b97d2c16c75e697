/**
 * The login page: password sign-in with rate limits, or a button per upstream identity provider,
 * then on to consent.
 */
import { randomToken } from "../../shared/crypto.js";
import type { ClientRecord, InteractionRecord } from "../../storage/contract.js";
import {
  type BoundInteraction,
  csrfFailurePage,
  interactionCsrf,
  interactionCsrfValid,
  loadBoundInteraction,
} from "../browser/bound-interaction.js";
import { describeClient } from "../browser/client-info.js";
import { readCookie, serializeCookie } from "../browser/cookies.js";
import { errorPage } from "../browser/error-page.js";
import { readPageForm } from "../browser/form.js";
import { formPage } from "../browser/form-page.js";
import { html, page } from "../browser/html.js";
import { csrfMatches, csrfToken, issuerPath } from "../browser/interaction.js";
import { htmlResponse, seeOther } from "../browser/security-headers.js";
import { type CurrentSession, currentSession, startSession } from "../browser/session.js";
import type { Endpoint, FetchInfo, ServerContext } from "../core/context.js";
import { DUMMY_PASSWORD_HASH_PROMISE, verifyPassword } from "../core/password.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { clientRateLimitKey, hitSlidingWindows } from "../core/rate-limit.js";
import { isUsableAccount } from "../core/user-accounts.js";
import { NO_PASSWORD } from "../upstream/accounts.js";
import { isDeviceReturnPath } from "./device.js";
import { startUpstreamSignIn, upstreamFormTargets } from "./upstream-sign-in.js";

/**
 * The login page: a plain HTML form (no JavaScript), passwords checked against scrypt hashes in
 * constant time, attempts rate-limited per username and per client address (SECURITY.md "Consent
 * and login pages").
 *
 * With `?interaction=` it is a step of an authorization request and continues to the consent page;
 * without, it signs in to the account page (`/account`), its CSRF token bound to the browser cookie,
 * or to the admin page with `?return=` naming it (the only allowed return path: no open redirect).
 *
 * With upstream providers configured (`upstreamSignIn`), each is a button of its own form, posted
 * here with the same CSRF token (`upstream=<id>`), which starts the sign-in at the provider
 * (pages/upstream-sign-in.ts); `localPasswords: false` removes the password form and refuses its POST.
 */
export const handleLogin: Endpoint = formPage({
  where: "login",
  show: showLogin,
  submit: submitLogin,
  useInstead: "Use the login form.",
});

/** Attempts allowed per username in any window (slows guessing one account's password). */
export const LOGIN_ATTEMPTS_PER_USER = 10;
/** Attempts allowed per client address (higher: several people may share one address). */
export const LOGIN_ATTEMPTS_PER_ADDRESS = 30;
/** The sliding window the limits above apply to. */
export const LOGIN_WINDOW_MS = 5 * 60 * 1000;

/** Where a login comes from and goes to. */
type LoginContext =
  | { kind: "interaction"; bound: BoundInteraction; client?: ClientRecord }
  | { kind: "account"; binding: string; newBinding: boolean; returnTo?: string };

/**
 * Where an account sign-in may return to besides the account page: only the admin page, or the
 * device verification page (with a well-formed user code, pages/device.ts), matched exactly as
 * paths under the issuer, so `return` can never send the browser elsewhere.
 */
function allowedReturn(ctx: ServerContext, requested: string | undefined | null): string | undefined {
  const admin = issuerPath(ctx, ENDPOINT_PATHS.admin);
  if (requested === admin) return admin;
  return typeof requested === "string" && isDeviceReturnPath(ctx, requested) ? requested : undefined;
}

/**
 * What a sign-in outside an authorization request is for, said on the page (issue 26: a sign-in
 * reached from /device, /admin or /account said nothing of where it leads). `returnTo` is one of
 * {@link allowedReturn}'s answers.
 */
function accountPurpose(ctx: ServerContext, returnTo: string | undefined): string {
  if (returnTo === issuerPath(ctx, ENDPOINT_PATHS.admin)) return "to open the administration page";
  if (returnTo !== undefined) return "to connect a device: you confirm the code it shows on the next page";
  return "to see your account and the applications you have authorized";
}

async function loginContext(
  request: Request,
  ctx: ServerContext,
  interactionId: string | undefined | null,
  returnParam?: string | null,
): Promise<LoginContext | Response> {
  if (interactionId !== undefined && interactionId !== null) {
    const bound = await loadBoundInteraction(request, ctx, interactionId);
    if (bound instanceof Response) return bound;
    let client: ClientRecord | undefined;
    try {
      client = await ctx.clients.resolve(bound.interaction.clientId);
    } catch {
      client = undefined; // Only for the heading; consent re-checks the client.
    }
    return client ? { kind: "interaction", bound, client } : { kind: "interaction", bound };
  }
  const existing = readCookie(request, "binding", ctx);
  const returnTo = allowedReturn(ctx, returnParam);
  return {
    kind: "account",
    binding: existing ?? randomToken(32),
    newBinding: existing === undefined,
    ...(returnTo !== undefined && { returnTo }),
  };
}

function csrfFor(login: LoginContext): string {
  return login.kind === "interaction" ? interactionCsrf(login.bound) : csrfToken(login.binding, "login");
}

function nextAfterLogin(ctx: ServerContext, login: LoginContext): string {
  return login.kind === "interaction"
    ? issuerPath(ctx, ENDPOINT_PATHS.consent, { interaction: login.bound.interaction.id })
    : (login.returnTo ?? issuerPath(ctx, ENDPOINT_PATHS.account));
}

/**
 * Where forms on the page may end up after redirects (see `contentSecurityPolicy`): the client's
 * redirect URI (a silent consent may follow the sign-in) and each provider's authorization endpoint.
 */
async function formTargets(ctx: ServerContext, login: LoginContext): Promise<string[]> {
  const upstream = ctx.options.upstreamSignIn
    ? await upstreamFormTargets(ctx, ctx.options.upstreamSignIn)
    : [];
  return login.kind === "interaction" ? [login.bound.interaction.redirectUri, ...upstream] : upstream;
}

/** Whether the username and password form is offered (default yes; `upstreamSignIn.localPasswords`). */
function localPasswords(ctx: ServerContext): boolean {
  return ctx.options.upstreamSignIn?.localPasswords ?? true;
}

async function showLogin(request: Request, ctx: ServerContext): Promise<Response> {
  const url = new URL(request.url);
  const login = await loginContext(
    request,
    ctx,
    url.searchParams.get("interaction"),
    url.searchParams.get("return"),
  );
  if (login instanceof Response) return login;
  const session = await currentSession(request, ctx);
  if (session && sessionAnswers(login, session)) return seeOther(nextAfterLogin(ctx, login));
  return renderLogin(ctx, login, { status: 200 });
}

/**
 * Whether the browser's session may stand in for a sign-in. Under `prompt=login` (OpenID Connect
 * Core §3.1.2.1) only a session started after the authorization request does.
 */
function sessionAnswers(login: LoginContext, session: CurrentSession): boolean {
  if (login.kind !== "interaction") return true;
  const { interaction } = login.bound;
  return !interaction.prompt?.includes("login") || session.record.createdAt >= interaction.createdAt;
}

async function renderLogin(
  ctx: ServerContext,
  login: LoginContext,
  options: { status: number; error?: string; username?: string },
): Promise<Response> {
  const interaction: InteractionRecord | undefined =
    login.kind === "interaction" ? login.bound.interaction : undefined;
  const clientName =
    login.kind === "interaction" && login.client ? describeClient(login.client).name : undefined;
  // Which server asks for the password: the issuer's host, so a user can tell one server from another.
  const issuerHost = new URL(ctx.options.issuer).host;
  const providers = ctx.options.upstreamSignIn?.providers ?? [];
  // The fields both forms carry: where the sign-in continues, and the CSRF token.
  const hidden = html`${interaction ? html`<input type="hidden" name="interaction" value="${interaction.id}">` : ""}
${login.kind === "account" && login.returnTo ? html`<input type="hidden" name="return" value="${login.returnTo}">` : ""}
<input type="hidden" name="csrf" value="${csrfFor(login)}">`;
  const body = html`<h1>Sign in</h1>
<p class="muted">with your account on <strong data-testid="issuer-host">${issuerHost}</strong></p>
${clientName !== undefined ? html`<p>to continue to <span class="name" data-testid="client-name">${clientName}</span></p>` : ""}
${login.kind === "account" ? html`<p data-testid="sign-in-purpose">${accountPurpose(ctx, login.returnTo)}</p>` : ""}
${options.error ? html`<p class="error" role="alert" data-testid="login-error">${options.error}</p>` : ""}
${
  providers.length > 0
    ? html`<form method="post" action="${issuerPath(ctx, ENDPOINT_PATHS.login)}" data-testid="upstream-providers">
${hidden}
${providers.map((p) => html`<div class="actions"><button type="submit" name="upstream" value="${p.id}" data-testid="upstream-${p.id}">Continue with ${p.displayName}</button></div>`)}
</form>`
    : ""
}
${
  localPasswords(ctx)
    ? html`${providers.length > 0 ? html`<p class="muted">or with a username and password</p>` : ""}
<form method="post" action="${issuerPath(ctx, ENDPOINT_PATHS.login)}">
${hidden}
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required value="${options.username ?? ""}">
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>`
    : ""
}`;
  const cookies =
    login.kind === "account" && login.newBinding ? [serializeCookie("binding", login.binding, ctx)] : [];
  return htmlResponse(page("Sign in", body), {
    status: options.status,
    cookies,
    formTargets: await formTargets(ctx, login),
  });
}

/**
 * Sliding-window counters shared by every instance (`rate-limit.ts` over `store.hitRateLimit`):
 * per username (case-insensitive) and per client address. Every attempt counts, so parallel
 * guesses cannot slip past the limit before a failure is recorded, and attempts on both sides of
 * a window boundary still add up. Returns the seconds to wait, or undefined when not limited.
 */
async function rateLimited(
  info: FetchInfo,
  ctx: ServerContext,
  username: string,
): Promise<number | undefined> {
  return hitSlidingWindows(
    ctx.store,
    [
      { key: `login:user:${username.toLowerCase()}`, limit: LOGIN_ATTEMPTS_PER_USER },
      { key: `login:addr:${clientRateLimitKey(info)}`, limit: LOGIN_ATTEMPTS_PER_ADDRESS },
    ],
    { now: ctx.now(), windowMs: LOGIN_WINDOW_MS },
  );
}

async function submitLogin(request: Request, ctx: ServerContext, info: FetchInfo): Promise<Response> {
  const form = await readPageForm(request);
  const login = await loginContext(request, ctx, form.get("interaction"), form.get("return"));
  if (login instanceof Response) return login;
  const csrfOk =
    login.kind === "interaction"
      ? interactionCsrfValid(login.bound, form.get("csrf"))
      : !login.newBinding && csrfMatches(form.get("csrf"), csrfFor(login));
  if (!csrfOk) return csrfFailurePage();

  const upstream = form.get("upstream");
  if (upstream !== undefined) return startUpstream(ctx, info, login, upstream);
  if (!localPasswords(ctx)) {
    return renderLogin(ctx, login, { status: 400, error: "Sign-in with a password is turned off here." });
  }
  const username = (form.get("username") ?? "").slice(0, 200);
  const password = form.get("password") ?? "";
  if (username === "" || password === "") {
    return renderLogin(ctx, login, { status: 400, error: "Enter your username and password.", username });
  }
  const retryAfter = await rateLimited(info, ctx, username);
  if (retryAfter !== undefined) return tooManyAttempts(ctx, info, retryAfter);
  const user = await ctx.store.getUserByUsername(username);
  // An unknown user, or one without a password (created from an upstream identity), is checked
  // against a dummy hash so every case takes the same time; NO_PASSWORD itself never verifies.
  const hasPassword = user !== undefined && user.passwordHash !== NO_PASSWORD;
  const passwordOk =
    (await verifyPassword(password, hasPassword ? user.passwordHash : await DUMMY_PASSWORD_HASH_PROMISE)) &&
    hasPassword;
  if (!user || !passwordOk) {
    ctx.audit?.(user ? { type: "login_failed", user_id: user.id } : { type: "login_failed" });
    return renderLogin(ctx, login, { status: 400, error: "Incorrect username or password.", username });
  }
  // A disabled account (user-accounts.ts) gets no session. Said only after the right password, so
  // the page tells a stranger nothing about which accounts exist or are disabled (no enumeration).
  if (!isUsableAccount(user)) {
    ctx.audit?.({ type: "login_failed", user_id: user.id, reason: "account_disabled" });
    return renderLogin(ctx, login, {
      status: 403,
      error: "This account is disabled. Ask an administrator of this server to enable it.",
      username,
    });
  }
  const cookie = await startSession(ctx, user.id);
  if (login.kind === "interaction") await ctx.store.setInteractionUser(login.bound.interaction.id, user.id);
  ctx.audit?.({ type: "login_succeeded", user_id: user.id });
  return seeOther(nextAfterLogin(ctx, login), [cookie]);
}

/**
 * The `upstream=<id>` button: starts the sign-in at that provider for this browser. Each start
 * writes a (short-lived) row and sends the browser to the provider, so starts count against the
 * per-address sign-in limit as password attempts do.
 */
async function startUpstream(
  ctx: ServerContext,
  info: FetchInfo,
  login: LoginContext,
  providerId: string,
): Promise<Response> {
  const settings = ctx.options.upstreamSignIn;
  const provider = settings?.providers.find((p) => p.id === providerId);
  if (!settings || !provider) {
    return renderLogin(ctx, login, { status: 400, error: "Choose one of the sign-in options on this page." });
  }
  const retryAfter = await hitSlidingWindows(
    ctx.store,
    [{ key: `login:upstream:addr:${clientRateLimitKey(info)}`, limit: LOGIN_ATTEMPTS_PER_ADDRESS }],
    { now: ctx.now(), windowMs: LOGIN_WINDOW_MS },
  );
  if (retryAfter !== undefined) return tooManyAttempts(ctx, info, retryAfter);
  return startUpstreamSignIn(
    ctx,
    settings,
    provider,
    login.kind === "interaction"
      ? {
          binding: login.bound.binding,
          interactionId: login.bound.interaction.id,
          reauthenticate: login.bound.interaction.prompt?.includes("login") ?? false,
        }
      : { binding: login.binding, ...(login.returnTo !== undefined ? { returnTo: login.returnTo } : {}) },
  );
}

/** The 429 page of a sign-in limit (RFC 6585 §4, with `Retry-After`), and its audit event. */
function tooManyAttempts(ctx: ServerContext, info: FetchInfo, retryAfter: number): Response {
  ctx.audit?.({
    type: "rate_limited",
    limit: "login",
    retry_after_seconds: retryAfter,
    ...(info?.clientAddress ? { address: info.clientAddress } : {}),
  });
  const response = errorPage({
    status: 429,
    title: "Too many attempts",
    message: "Too many sign-in attempts. Wait a few minutes and try again.",
  });
  response.headers.set("retry-after", String(retryAfter));
  return response;
}
