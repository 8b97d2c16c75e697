/**
 * The account page (`/account`): the user's authorizations, each withdrawable, and sign-out; and
 * `/logout`, its former address, kept for existing links and forms.
 */
import { isLoopbackHost } from "../../shared/resource-uri.js";
import type { ClientRecord, ConsentRecord, GrantRecord } from "../../storage/contract.js";
import { csrfFailurePage } from "../browser/bound-interaction.js";
import { errorPage } from "../browser/error-page.js";
import { readPageForm } from "../browser/form.js";
import { formPage } from "../browser/form-page.js";
import { html, page, type SafeHtml } from "../browser/html.js";
import { csrfMatches, csrfToken, issuerPath } from "../browser/interaction.js";
import { htmlResponse, seeOther } from "../browser/security-headers.js";
import { type CurrentSession, currentSession, endSession } from "../browser/session.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { DEVICE_CODE_GRANT_TYPE, mayUseGrantType } from "../policy/grants.js";
import { scopeItem } from "./consent.js";

/**
 * The account page at `/account`: who is signed in, the applications they have authorized (each
 * with a button to withdraw it, which opens a review first), and a sign-out button. Every change is
 * a POST with a CSRF token derived from the session cookie, answered with a 303 back here.
 *
 * Withdrawing an authorization deletes the consent for that client and redirect URI and revokes
 * the user's grants for the client (their refresh and access tokens), so it takes effect at once.
 * A grant that no consent covers (one approved on the device page, RFC 8628 §3.3: there is no
 * redirect URI to remember a consent by) is listed on its own and withdrawn by its grant id.
 */
export const handleAccount: Endpoint = formPage({
  where: "account",
  show: showAccount,
  submit: submitAccount,
  useInstead: "Use the buttons on this page.",
});

/**
 * `/logout`, where the account page lived first: a GET is sent on to `/account` (303, RFC 9110
 * §15.4.4) and a POST (a sign-out or withdraw form of an open older page) is taken as before.
 */
export const handleLogout: Endpoint = formPage({
  where: "logout",
  show: async (_request, ctx) => seeOther(issuerPath(ctx, ENDPOINT_PATHS.account)),
  submit: submitAccount,
  useInstead: "Use the buttons on your account page.",
});

function accountCsrf(session: CurrentSession): string {
  return csrfToken(session.cookieValue, "account");
}

async function storedClient(ctx: ServerContext, clientId: string): Promise<ClientRecord | undefined> {
  // Storage only: listing authorizations must not trigger metadata document fetches.
  return ctx.store.getClient(clientId).catch(() => undefined);
}

function nameOf(client: ClientRecord | undefined, clientId: string): string {
  return client?.clientName?.trim() ? client.clientName.trim().slice(0, 200) : clientId;
}

async function clientName(ctx: ServerContext, clientId: string): Promise<string> {
  return nameOf(await storedClient(ctx, clientId), clientId);
}

/** The scopes in words, as the consent page showed them (none: "basic access"). */
function scopeList(ctx: ServerContext, scopes: readonly string[]): SafeHtml {
  if (scopes.length === 0) return html`<p class="muted">Basic access.</p>`;
  return html`<ul class="scopes">${scopes.map((s) => scopeItem(ctx, s, true))}</ul>`;
}

/**
 * A time to the minute, unambiguous in every locale (UTC), in a `<time>` element: two rows of one
 * application approved the same day are told apart by it (issue 26).
 */
function minute(ms: number): SafeHtml {
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace("T", " ")} UTC</time>`;
}

/**
 * Where an application returns the browser: the redirect URI's host, with the port (a loopback
 * client listens on a port of its own each run, the only thing telling its rows apart) and "this
 * computer" for loopback.
 */
function returnsTo(redirectUri: string): string {
  try {
    const url = new URL(redirectUri);
    return isLoopbackHost(url.hostname) ? `${url.host} (this computer)` : url.host;
  } catch {
    return redirectUri;
  }
}

/** The resources a row's grants are for, by name when the server names them, and the URI. */
function resourceList(ctx: ServerContext, uris: readonly string[]): SafeHtml {
  const unique = [...new Set(uris)];
  if (unique.length === 0) return html``;
  return html`<br><span class="muted" data-testid="resource">for ${unique.map((uri, i) => {
    const name = ctx.resources.get(uri)?.name;
    return html`${i ? ", " : ""}${name ? html`${name} (<code>${uri}</code>)` : html`<code>${uri}</code>`}`;
  })}</span>`;
}

/**
 * The user's live grants that no listed consent covers: in practice those approved on the device
 * page (RFC 8628), which have no redirect URI. Without this list they could not be withdrawn.
 */
async function uncoveredGrants(
  ctx: ServerContext,
  userId: string,
  consents: readonly ConsentRecord[],
): Promise<GrantRecord[]> {
  const covered = new Set(consents.map((c) => c.clientId));
  const now = ctx.now();
  return (await ctx.store.listGrants({ userId, active: true }))
    .filter((g) => g.revokedAt === undefined && g.expiresAt > now && !covered.has(g.clientId))
    .sort((a, b) => b.createdAt - a.createdAt);
}

/**
 * A Withdraw button: a GET form to its review (`?review=`), which changes nothing; the review
 * carries the POST form that withdraws. One click never revokes, and no script asks (the pages run
 * none), as on the admin page.
 */
function withdrawButton(
  ctx: ServerContext,
  review: "withdraw" | "withdraw-grant",
  fields: Record<string, string>,
): SafeHtml {
  return html`<form method="get" action="${issuerPath(ctx, ENDPOINT_PATHS.account)}">
<input type="hidden" name="review" value="${review}">
${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
<button type="submit">Withdraw…</button></form>`;
}

/**
 * The review of one withdrawal, of the signed-in user's own authorization only: what it will do,
 * said exactly (the access-token caveat in seconds), the POST form (CSRF token) and Cancel. A
 * record that is gone or not this user's gets a line saying so, and no form.
 */
async function withdrawReview(
  ctx: ServerContext,
  session: CurrentSession,
  csrf: string,
  params: URLSearchParams,
  consents: readonly ConsentRecord[],
  activeGrants: readonly GrantRecord[],
): Promise<SafeHtml> {
  const here = issuerPath(ctx, ENDPOINT_PATHS.account);
  const ttl = ctx.options.accessTokenTtlSeconds;
  const tokens = (count: number) =>
    count === 0
      ? "It holds no active grant now."
      : `Its ${count === 1 ? "active grant is" : `${count} active grants are`} revoked: refresh tokens stop working at once, ` +
        `but an access token already issued stays valid at a resource server that checks it itself until it expires, at most ${ttl} s from now.`;
  const section = (title: string, what: SafeHtml, consequences: string, fields: Record<string, string>) =>
    html`<section class="review" data-testid="review"><h2>${title}</h2>${what}<p data-testid="consequences">${consequences}</p>
<div class="actions"><form method="post" action="${here}">
<input type="hidden" name="csrf" value="${csrf}">
${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
<button type="submit">Withdraw</button></form>
<form method="get" action="${here}"><button type="submit" data-testid="cancel">Cancel</button></form></div></section>`;
  if (params.get("review") === "withdraw") {
    const consent = consents.find(
      (c) => c.clientId === params.get("client_id") && c.redirectUri === params.get("redirect_uri"),
    );
    if (consent) {
      const name = await clientName(ctx, consent.clientId);
      const count = activeGrants.filter((g) => g.clientId === consent.clientId).length;
      return section(
        `Withdraw ${name}?`,
        html`<p>${name}, returning to ${returnsTo(consent.redirectUri)}, approved ${minute(consent.createdAt)}.</p>`,
        `${name} will have to ask you again before it gets access. ${tokens(count)}`,
        { action: "revoke", client_id: consent.clientId, redirect_uri: consent.redirectUri },
      );
    }
  } else if (params.get("review") === "withdraw-grant") {
    const grant = activeGrants.find((g) => g.grantId === params.get("grant_id"));
    if (grant && grant.userId === session.user.id) {
      const name = await clientName(ctx, grant.clientId);
      return section(
        `Withdraw ${name}?`,
        html`<p>${name}, granted ${minute(grant.createdAt)}.</p>`,
        tokens(1),
        { action: "revoke-grant", grant_id: grant.grantId },
      );
    }
  }
  return html`<p class="notice" role="status" data-testid="notice">Nothing to withdraw: that authorization no longer exists.</p>`;
}

/** The `done` value of the account page's address right after a sign-out. */
const SIGNED_OUT = "signed-out";

async function showAccount(request: Request, ctx: ServerContext): Promise<Response> {
  const session = await currentSession(request, ctx);
  if (!session) {
    // "Signed out" only right after this browser signed out (the sign-out's 303 says so); someone
    // who never signed in is told only that nobody is. The flag is wording, not state: a forged
    // one changes a heading and nothing else.
    const justSignedOut = new URL(request.url).searchParams.get("done") === SIGNED_OUT;
    const heading = justSignedOut ? "You are signed out" : "You are not signed in";
    const body = html`<h1 data-testid="not-signed-in">${heading}</h1>
<p><a href="${issuerPath(ctx, ENDPOINT_PATHS.login)}">Sign in</a> to see the applications you have authorized.</p>`;
    return htmlResponse(page(justSignedOut ? "Signed out" : "Not signed in", body));
  }
  const csrf = accountCsrf(session);
  const consents = await ctx.store.listConsents(session.user.id);
  const now = ctx.now();
  const activeGrants = (await ctx.store.listGrants({ userId: session.user.id, active: true })).filter(
    (g) => g.expiresAt > now,
  );
  const rows = await Promise.all(
    consents.map(async (c: ConsentRecord) => {
      // A consent is per redirect URI, its grants per client: the row shows the client's live ones.
      const grants = activeGrants.filter((g) => g.clientId === c.clientId);
      const newest = Math.max(c.updatedAt, ...grants.map((g) => g.createdAt));
      return html`<tr data-testid="consent-row"><td><span class="name">${await clientName(ctx, c.clientId)}</span><br>
<span class="muted">returns to ${returnsTo(c.redirectUri)} · approved ${minute(c.createdAt)}${
        newest > c.createdAt ? html` · last authorized ${minute(newest)}` : ""
      }</span>${resourceList(
        ctx,
        grants.map((g) => g.resource),
      )}
${scopeList(ctx, c.scopes)}</td>
<td class="withdraw">${withdrawButton(ctx, "withdraw", { client_id: c.clientId, redirect_uri: c.redirectUri })}</td></tr>`;
    }),
  );
  const grantRows = await Promise.all(
    (await uncoveredGrants(ctx, session.user.id, consents)).map(async (g) => {
      const client = await storedClient(ctx, g.clientId);
      const device = client !== undefined && mayUseGrantType(client, DEVICE_CODE_GRANT_TYPE);
      return html`<tr data-testid="grant-row" data-grant="${g.grantId}"><td><span class="name">${nameOf(client, g.clientId)}</span><br>
<span class="muted">${device ? "on a device · " : ""}granted ${minute(g.createdAt)}</span>${resourceList(ctx, [g.resource])}
${scopeList(ctx, g.scopes)}</td>
<td class="withdraw">${withdrawButton(ctx, "withdraw-grant", { grant_id: g.grantId })}</td></tr>`;
    }),
  );
  rows.push(...grantRows);
  const params = new URL(request.url).searchParams;
  const review = params.has("review")
    ? await withdrawReview(ctx, session, csrf, params, consents, activeGrants)
    : undefined;
  const body = html`<h1>Your account</h1>
<p>Signed in as <strong data-testid="username">${session.user.username}</strong>.</p>
${review ?? ""}
<h2>Authorized applications</h2>
${rows.length > 0 ? html`<table class="consents">${rows}</table>` : html`<p class="muted" data-testid="no-consents">None.</p>`}
<form method="post" action="${issuerPath(ctx, ENDPOINT_PATHS.account)}">
<input type="hidden" name="csrf" value="${csrf}">
<input type="hidden" name="action" value="logout">
<div class="actions"><button type="submit" class="primary">Sign out</button></div>
</form>`;
  return htmlResponse(page("Your account", body));
}

/**
 * Signing out: the grants approved in this sign-in (GrantRecord.sessionHash) are revoked with their
 * refresh and access tokens and the upstream tokens kept for them (revokeGrant deletes those in
 * every store, and /upstream/token judges the grant), then the session ends with its own kept
 * upstream tokens (deleteSession). A sign-out that left them working would end nothing an attacker holding a refresh token
 * cares about (RFC 7009 §2.1: revoking a grant revokes what was issued from it; OpenID Connect
 * RP-Initiated Logout 1.0 §2 expects the user's session at the provider to end). Grants approved in
 * other sign-ins (another browser) and remembered consents stay: withdrawing those is the Withdraw
 * button. Returns the cookie that clears the session.
 */
async function signOut(ctx: ServerContext, session: CurrentSession): Promise<string> {
  const now = ctx.now();
  const grants = await ctx.store.listGrants({
    userId: session.user.id,
    sessionHash: session.record.idHash,
    active: true,
  });
  let revoked = 0;
  for (const grant of grants) {
    if (grant.revokedAt === undefined && (await ctx.store.revokeGrant(grant.grantId, now))) {
      revoked++;
      ctx.audit?.({ type: "grant_revoked", client_id: grant.clientId, grant_id: grant.grantId, by: "user" });
    }
  }
  const cookie = await endSession(ctx, session);
  ctx.audit?.({ type: "signed_out", user_id: session.user.id, grants_revoked: revoked });
  return cookie;
}

async function submitAccount(request: Request, ctx: ServerContext): Promise<Response> {
  const form = await readPageForm(request);
  const session = await currentSession(request, ctx);
  const here = issuerPath(ctx, ENDPOINT_PATHS.account);
  if (!session) return seeOther(here);
  if (!csrfMatches(form.get("csrf"), accountCsrf(session))) return csrfFailurePage();
  const action = form.get("action");
  if (action === "logout") return seeOther(`${here}?done=${SIGNED_OUT}`, [await signOut(ctx, session)]);
  if (action === "revoke") {
    const clientId = form.get("client_id");
    if (clientId === undefined)
      return errorPage({ status: 400, title: "Nothing to withdraw", message: "No application was named." });
    await ctx.store.revokeConsent(session.user.id, clientId, form.get("redirect_uri"));
    const now = ctx.now();
    ctx.audit?.({ type: "consent_revoked", client_id: clientId, user_id: session.user.id, by: "user" });
    for (const grant of await ctx.store.listGrants({ userId: session.user.id, clientId })) {
      if (grant.revokedAt === undefined && (await ctx.store.revokeGrant(grant.grantId, now)))
        ctx.audit?.({ type: "grant_revoked", client_id: clientId, grant_id: grant.grantId, by: "user" });
    }
    return seeOther(here);
  }
  if (action === "revoke-grant") {
    const grantId = form.get("grant_id");
    if (grantId === undefined)
      return errorPage({ status: 400, title: "Nothing to withdraw", message: "No authorization was named." });
    // Only the signed-in user's own grant: another user's grant id (or a made-up one) changes nothing.
    const grant = await ctx.store.getGrant(grantId);
    if (grant?.userId !== session.user.id) {
      return errorPage({
        status: 404,
        title: "No such authorization",
        message: "This authorization does not exist, or it is not yours.",
      });
    }
    if (grant.revokedAt === undefined && (await ctx.store.revokeGrant(grant.grantId, ctx.now()))) {
      ctx.audit?.({ type: "grant_revoked", client_id: grant.clientId, grant_id: grant.grantId, by: "user" });
    }
    return seeOther(here);
  }
  return errorPage({
    status: 400,
    title: "Unknown action",
    message: "This form sent an action this page does not know.",
  });
}
