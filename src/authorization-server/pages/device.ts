/**
 * The verification page of the device authorization grant (RFC 8628 §3.3): the signed-in user
 * types the code their device shows, sees who asks for what, and allows or denies it.
 */
import type { ClientRecord, DeviceAuthorizationRecord } from "../../storage/contract.js";
import { csrfFailurePage } from "../browser/bound-interaction.js";
import { clientFacts, describeClient } from "../browser/client-info.js";
import { errorPage } from "../browser/error-page.js";
import { readPageForm } from "../browser/form.js";
import { formPage } from "../browser/form-page.js";
import { html, page } from "../browser/html.js";
import { csrfMatches, csrfToken, issuerPath } from "../browser/interaction.js";
import { htmlResponse, seeOther } from "../browser/security-headers.js";
import { type CurrentSession, currentSession } from "../browser/session.js";
import type { Endpoint, FetchInfo, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { clientRateLimitKey, hitSlidingWindows } from "../core/rate-limit.js";
import { refreshAllowed } from "../grants/refresh-policy.js";
import { displayUserCode, normalizeUserCode, USER_CODE_LENGTH, userCodeHash } from "../grants/user-code.js";
import { DEVICE_CODE_GRANT_TYPE, mayUseGrantType } from "../policy/grants.js";
import { scopeItem } from "./consent.js";

/**
 * The verification page (RFC 8628 §3.3), shown to a signed-in user only (a visitor is sent to the
 * login page, which returns here). Two steps, each a POST of the same form:
 *
 * 1. The user types the code (or finds it filled in from `verification_uri_complete`, §3.3.1) and
 *    continues. Nothing is ever approved from a URL: a link can only fill the field, and the user
 *    still confirms on the next page (§5.4, remote phishing).
 * 2. The page names the client as the consent page does, the resource, the scopes and the code
 *    again, so the user can check it matches their device (§3.3), and asks Allow or Deny. The
 *    device authorization grant is never approved silently from a remembered consent.
 *
 * Every POST that names a code counts against a sliding-window limit per client address and per
 * sign-in, so user codes cannot be guessed (§5.1: 20^8 codes, a handful of attempts per window).
 * Forms carry a CSRF token derived from the session cookie; a cross-site POST is refused before
 * the form is read (form-page.ts).
 */
export const handleDevice: Endpoint = formPage({
  where: "device",
  show: showDevice,
  submit: submitDevice,
  useInstead: "Use the form on the device page.",
});

/** Code entries allowed per sign-in in any window (RFC 8628 §5.1). */
export const DEVICE_CODE_ATTEMPTS_PER_SESSION = 10;
/** Code entries allowed per client address (higher: several people may share one address). */
export const DEVICE_CODE_ATTEMPTS_PER_ADDRESS = 30;
/** The sliding window the limits above apply to. */
export const DEVICE_CODE_WINDOW_MS = 5 * 60 * 1000;

/**
 * The page's own path, with a well-formed user code from a `verification_uri_complete` kept: the
 * login page may return here (pages/login.ts), and to nothing else that looks like it.
 */
export function devicePagePath(ctx: Pick<ServerContext, "options">, userCode?: string): string {
  return issuerPath(ctx, ENDPOINT_PATHS.device, userCode === undefined ? {} : { user_code: userCode });
}

/**
 * Whether `requested` is a path the login page may return to for this page: exactly the device
 * path, or the device path with a well-formed user code (so `return` can never lead elsewhere).
 */
export function isDeviceReturnPath(ctx: Pick<ServerContext, "options">, requested: string): boolean {
  const base = devicePagePath(ctx);
  if (requested === base) return true;
  const prefix = `${base}?user_code=`;
  if (!requested.startsWith(prefix)) return false;
  const code = normalizeUserCode(requested.slice(prefix.length));
  return code !== undefined && requested === devicePagePath(ctx, displayUserCode(code));
}

function deviceCsrf(session: CurrentSession): string {
  return csrfToken(session.cookieValue, "device");
}

function toLogin(ctx: ServerContext, userCode: string | undefined): Response {
  return seeOther(issuerPath(ctx, ENDPOINT_PATHS.login, { return: devicePagePath(ctx, userCode) }));
}

async function showDevice(request: Request, ctx: ServerContext): Promise<Response> {
  const typed = normalizeUserCode(new URL(request.url).searchParams.get("user_code"));
  const prefill = typed === undefined ? undefined : displayUserCode(typed);
  const session = await currentSession(request, ctx);
  if (!session) return toLogin(ctx, prefill);
  return renderEntry(ctx, session, { status: 200, ...(prefill === undefined ? {} : { value: prefill }) });
}

function renderEntry(
  ctx: ServerContext,
  session: CurrentSession,
  options: { status: number; value?: string; error?: string },
): Response {
  const body = html`<h1>Connect a device</h1>
<p class="muted">Signed in as <strong data-testid="username">${session.user.username}</strong>.
<a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">Not you?</a></p>
<p>Enter the code your device shows. Only enter a code from a device you are setting up yourself:
never one that someone sent you.</p>
${options.error ? html`<p class="error" role="alert" data-testid="device-error">${options.error}</p>` : ""}
<form method="post" action="${devicePagePath(ctx)}">
<input type="hidden" name="csrf" value="${deviceCsrf(session)}">
<label for="user_code">Code</label>
<input type="text" id="user_code" name="user_code" data-testid="user-code-input" autocomplete="off" autocapitalize="characters" spellcheck="false" required maxlength="20" placeholder="XXXX-XXXX" value="${options.value ?? ""}">
<div class="actions"><button type="submit" class="primary">Continue</button></div>
</form>`;
  return htmlResponse(page("Connect a device", body), { status: options.status });
}

/**
 * Counts one code entry per client address and per sign-in (RFC 8628 §5.1). Every attempt counts,
 * right or wrong, so parallel guesses cannot slip past the limit. Returns the seconds to wait, or
 * undefined when not limited.
 */
async function entryRateLimited(
  ctx: ServerContext,
  info: FetchInfo,
  session: CurrentSession,
): Promise<number | undefined> {
  return hitSlidingWindows(
    ctx.store,
    [
      { key: `device:session:${session.record.idHash}`, limit: DEVICE_CODE_ATTEMPTS_PER_SESSION },
      { key: `device:addr:${clientRateLimitKey(info)}`, limit: DEVICE_CODE_ATTEMPTS_PER_ADDRESS },
    ],
    { now: ctx.now(), windowMs: DEVICE_CODE_WINDOW_MS },
  );
}

/** Why a code was not accepted, in words a person can act on. */
const UNKNOWN_CODE =
  "That code is not valid. It may have been mistyped, already used, or expired: check the code on your " +
  "device, or start again there to get a new one.";

async function submitDevice(request: Request, ctx: ServerContext, info: FetchInfo): Promise<Response> {
  const form = await readPageForm(request);
  const session = await currentSession(request, ctx);
  if (!session) return toLogin(ctx, undefined);
  if (!csrfMatches(form.get("csrf"), deviceCsrf(session))) return csrfFailurePage();

  const retryAfter = await entryRateLimited(ctx, info, session);
  if (retryAfter !== undefined) {
    ctx.audit?.({
      type: "rate_limited",
      limit: "device_code",
      retry_after_seconds: retryAfter,
      ...(info.clientAddress ? { address: info.clientAddress } : {}),
    });
    const response = errorPage({
      status: 429,
      title: "Too many attempts",
      message: "Too many codes were entered. Wait a few minutes and try again.",
    });
    response.headers.set("retry-after", String(retryAfter));
    return response;
  }
  const typed = form.get("user_code");
  const code = normalizeUserCode(typed);
  if (code === undefined) {
    return renderEntry(ctx, session, {
      status: 400,
      value: (typed ?? "").slice(0, 20),
      error: `A code has ${USER_CODE_LENGTH} letters, like BCDF-GHJK. Check the code on your device.`,
    });
  }
  const hash = userCodeHash(code);
  const record = await ctx.store.getDeviceAuthorizationByUserCode(hash, ctx.now());
  if (!record) {
    ctx.log.info("device_code_not_found", { user_id: session.user.id });
    return renderEntry(ctx, session, { status: 400, value: displayUserCode(code), error: UNKNOWN_CODE });
  }
  const client = await ctx.clients.resolve(record.clientId);
  if (!client || !mayUseGrantType(client, DEVICE_CODE_GRANT_TYPE)) {
    return errorPage({
      status: 400,
      title: "This request cannot be completed",
      message: "The application is no longer registered as it was when the device asked.",
    });
  }
  const decision = form.get("decision");
  if (decision === undefined) return renderConfirm(ctx, session, client, record, code);
  if (decision !== "approve" && decision !== "deny") {
    return errorPage({ status: 400, title: "No decision", message: "Choose Allow or Deny." });
  }
  // The answer is for the request the page showed: should the code have expired and been drawn again
  // for another device meanwhile, the user never approved that one.
  if (form.get("request") !== record.grantId) return alreadyAnswered();
  return decide(ctx, session, client, record, hash, decision);
}

function renderConfirm(
  ctx: ServerContext,
  session: CurrentSession,
  client: ClientRecord,
  record: DeviceAuthorizationRecord,
  code: string,
): Response {
  const name = describeClient(client).name;
  const resource = ctx.resources.get(record.resource);
  // No redirect URI takes part in this grant: the facts block names the client and its publisher
  // only (a loopback redirect URI the client also registered says nothing about the device).
  const facts = clientFacts({ ...client, redirectUris: [] }, undefined);
  const body = html`<h1><span class="name">${name}</span> on a device wants access to your account</h1>
<p class="muted">Signed in as <strong data-testid="username">${session.user.username}</strong>.
<a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">Not you?</a></p>
<p>Check that your device shows this code:</p>
<h2 data-testid="user-code">${displayUserCode(code)}</h2>
<p class="warning" data-testid="device-warning">Allow only if you started this on a device in front of you.
If someone sent you this code or link, choose Deny: they would get access to your account.</p>
${facts}
<p>Access to <strong data-testid="resource">${resource?.name ?? record.resource}</strong>${
    resource?.name ? html` <code>${record.resource}</code>` : ""
  }</p>
${
  record.scopes.length > 0
    ? html`<h2>It asks to</h2>
<ul class="scopes" data-testid="requested-scopes">${record.scopes.map((s) => scopeItem(ctx, s, false))}</ul>`
    : html`<p data-testid="requested-scopes">It asks only for basic access.</p>`
}
<form method="post" action="${devicePagePath(ctx)}">
<input type="hidden" name="csrf" value="${deviceCsrf(session)}">
<input type="hidden" name="user_code" value="${displayUserCode(code)}">
<input type="hidden" name="request" value="${record.grantId}">
<div class="actions">
<button type="submit" name="decision" value="deny">Deny</button>
<button type="submit" name="decision" value="approve" class="primary">Allow</button>
</div>
</form>`;
  return htmlResponse(page(`Allow ${name}?`, body));
}

function alreadyAnswered(): Response {
  return errorPage({
    status: 400,
    title: "Already completed",
    message: "This code has already been answered or has expired. Look at your device.",
  });
}

/**
 * Records the user's answer (RFC 8628 §3.3) atomically: of two submissions (a double click, two
 * tabs) exactly one decides. An approval covers the requested scopes, with a refresh token when
 * the code flow's policy would give one (refresh-policy.ts), and remembers the sign-in that
 * approved it, so superseded grants are retired as for the code flow.
 */
async function decide(
  ctx: ServerContext,
  session: CurrentSession,
  client: ClientRecord,
  record: DeviceAuthorizationRecord,
  hash: string,
  decision: "approve" | "deny",
): Promise<Response> {
  const approved = decision === "approve";
  const decided = await ctx.store.decideDeviceAuthorization(
    hash,
    approved
      ? {
          approved: true,
          userId: session.user.id,
          approvedScopes: [...record.scopes],
          sessionHash: session.record.idHash,
          refreshAllowed: refreshAllowed(ctx, client, record.scopes),
        }
      : { approved: false },
    ctx.now(),
  );
  if (!decided) return alreadyAnswered();
  const event = { client_id: client.clientId, user_id: session.user.id } as const;
  ctx.audit?.({ type: approved ? "consent_granted" : "consent_denied", ...event });
  const name = describeClient(client).name;
  const body = approved
    ? html`<h1>Device connected</h1>
<p data-testid="device-done">You allowed <span class="name">${name}</span>. Go back to your device: it continues on its own.</p>
<p class="muted">You can close this page.</p>`
    : html`<h1>Request denied</h1>
<p data-testid="device-done"><span class="name">${name}</span> was not given access. Your device will say so.</p>
<p class="muted">You can close this page.</p>`;
  return htmlResponse(page(approved ? "Device connected" : "Request denied", body));
}
