/**
 * The consent page: what the client asks for, and the user's decision.
 */
import type { ClientRecord } from "../../storage/contract.js";
import {
  type BoundInteraction,
  csrfFailurePage,
  interactionCsrf,
  interactionCsrfValid,
  loadBoundInteraction,
  releaseInteractionBinding,
} from "../browser/bound-interaction.js";
import { clientFacts, describeClient } from "../browser/client-info.js";
import { errorPage } from "../browser/error-page.js";
import { readPageForm } from "../browser/form.js";
import { formPage } from "../browser/form-page.js";
import { html, page, type SafeHtml } from "../browser/html.js";
import { authorizationResponseUrl, issueCodeAndRedirect, issuerPath } from "../browser/interaction.js";
import { htmlResponse, seeOther } from "../browser/security-headers.js";
import { type CurrentSession, currentSession } from "../browser/session.js";
import { matchRedirectUri } from "../clients/redirect-uri.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { maySkipConsent } from "../policy/consent.js";
import { OFFLINE_ACCESS } from "../policy/scopes.js";

/**
 * The consent page (SECURITY.md "Consent and login pages"; spec "Client ID Metadata Documents":
 * show `client_name`, the redirect URI's host clearly, warn on localhost-only redirect URIs).
 *
 * GET shows what the client asks for; for step-up, only the scopes not yet granted are "requested"
 * and the rest are listed as already granted. POST takes the decision: CSRF token (constant time
 * against the stored hash), the interaction's binding cookie, and the signed-in user must all match
 * the interaction; the answer deletes that cookie. Consent is stored per user, client and registered
 * redirect URI.
 */
export const handleConsent: Endpoint = formPage({
  where: "consent",
  show: showConsent,
  submit: submitConsent,
  useInstead: "Use the consent form.",
});

/** Everything the page and the decision need, checked. */
interface ConsentState {
  bound: BoundInteraction;
  session: CurrentSession;
  client: ClientRecord;
  registeredRedirectUri: string;
  /** Requested scopes not covered by the existing consent (through the hierarchy). */
  newScopes: string[];
  alreadyGranted: string[];
}

/**
 * Loads and re-checks the interaction: this browser, a signed-in user, the client still known and
 * its redirect URI still registered (a metadata document may have changed since `/authorize`).
 */
async function consentState(
  request: Request,
  ctx: ServerContext,
  interactionId: string | undefined | null,
): Promise<ConsentState | Response> {
  const bound = await loadBoundInteraction(request, ctx, interactionId);
  if (bound instanceof Response) return bound;
  const session = await currentSession(request, ctx);
  if (!session) return seeOther(issuerPath(ctx, ENDPOINT_PATHS.login, { interaction: bound.interaction.id }));
  const client = await ctx.clients.resolve(bound.interaction.clientId);
  const registered = client && matchRedirectUri(client.redirectUris, bound.interaction.redirectUri);
  if (!client || registered === undefined) {
    return errorPage({
      status: 400,
      title: "This request cannot be completed",
      message: "The application is no longer registered as it was when this request started.",
    });
  }
  const existing = await ctx.store.getConsent(session.user.id, client.clientId, registered);
  const missing = ctx.hierarchy.missing(existing?.scopes ?? [], bound.interaction.scopes);
  return {
    bound,
    session,
    client,
    registeredRedirectUri: registered,
    newScopes: bound.interaction.scopes.filter((s) => missing.has(s)),
    alreadyGranted: bound.interaction.scopes.filter((s) => !missing.has(s)),
  };
}

async function showConsent(request: Request, ctx: ServerContext): Promise<Response> {
  const state = await consentState(request, ctx, new URL(request.url).searchParams.get("interaction"));
  if (state instanceof Response) return state;
  const { bound, session, client } = state;
  if (bound.interaction.userId !== session.user.id) {
    // The page speaks for the user signed in now; POST checks it has not changed since.
    await ctx.store.setInteractionUser(bound.interaction.id, session.user.id);
  }
  if (
    state.newScopes.length === 0 &&
    state.alreadyGranted.length > 0 &&
    !bound.interaction.prompt?.includes("consent") &&
    maySkipConsent(client, bound.interaction.redirectUri)
  ) {
    // Everything was granted before (the user just signed in) to a client whose identity is
    // assured: no second question. Any other client is asked again, the page pre-filled.
    const consumed = await ctx.store.consumeInteraction(bound.interaction.id, ctx.now());
    if (!consumed) return alreadyCompleted();
    return issueCodeAndRedirect(ctx, consumed, client, approvingSession(session), [
      releaseInteractionBinding(consumed.id, ctx),
    ]);
  }
  return renderConsent(ctx, state);
}

/**
 * Words for the scopes the server itself defines, so the page never shows a bare protocol name;
 * an operator's `scopeDescriptions` entry replaces them.
 */
const BUILT_IN_SCOPE_WORDS: Readonly<Record<string, string>> = {
  [OFFLINE_ACCESS]: "Stay signed in: use this access when you are not using the application",
};

/** One scope as a list item: its words (operator's or built-in) and the protocol name. */
export function scopeItem(ctx: ServerContext, scope: string, granted: boolean): SafeHtml {
  // Own properties only: a scope named like an Object.prototype member has no words.
  const wordsIn = (table: Readonly<Record<string, string>>) =>
    Object.hasOwn(table, scope) ? table[scope] : undefined;
  const words = wordsIn(ctx.options.scopeDescriptions) ?? wordsIn(BUILT_IN_SCOPE_WORDS);
  return html`<li class="${granted ? "granted" : ""}" data-scope="${scope}">${words ?? scope}${
    words !== undefined ? html` <code>${scope}</code>` : ""
  }</li>`;
}

function renderConsent(ctx: ServerContext, state: ConsentState): Response {
  const { bound, session, client } = state;
  const interaction = bound.interaction;
  const name = describeClient(client).name;
  const resource = ctx.resources.get(interaction.resource);
  const stepUp = state.alreadyGranted.length > 0;
  const body = html`<h1><span class="name">${name}</span> wants access to your account</h1>
<p class="muted">Signed in as <strong data-testid="username">${session.user.username}</strong>.
<a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">Not you?</a></p>
${clientFacts(client, interaction.redirectUri)}
<p>Access to <strong data-testid="resource">${resource?.name ?? interaction.resource}</strong>${
    resource?.name ? html` <code>${interaction.resource}</code>` : ""
  }</p>
${
  state.newScopes.length > 0
    ? html`<h2>${stepUp ? "It now also asks to" : "It asks to"}</h2>
<ul class="scopes" data-testid="requested-scopes">${state.newScopes.map((s) => scopeItem(ctx, s, false))}</ul>`
    : stepUp
      ? html`<p data-testid="requested-scopes">It asks again for what you allowed before. Allow it only if
you started this from <span class="name">${name}</span> just now.</p>`
      : html`<p data-testid="requested-scopes">It asks only for basic access.</p>`
}
${
  stepUp
    ? html`<h2>Already allowed</h2>
<ul class="scopes" data-testid="granted-scopes">${state.alreadyGranted.map((s) => scopeItem(ctx, s, true))}</ul>`
    : ""
}
<form method="post" action="${issuerPath(ctx, ENDPOINT_PATHS.consent)}">
<input type="hidden" name="interaction" value="${interaction.id}">
<input type="hidden" name="csrf" value="${interactionCsrf(bound)}">
<div class="actions">
<button type="submit" name="decision" value="deny">Deny</button>
<button type="submit" name="decision" value="approve" class="primary">Allow</button>
</div>
</form>
<p class="muted">You can withdraw this permission at any time from <a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">your account page</a>.</p>`;
  // The form's 303 goes to the redirect URI: form-action must allow its origin (Chromium checks redirects).
  return htmlResponse(page(`Allow ${name}?`, body), { formTargets: [interaction.redirectUri] });
}

function alreadyCompleted(): Response {
  return errorPage({
    status: 400,
    title: "Already completed",
    message: "This request has already been answered. Go back to the application.",
  });
}

async function submitConsent(request: Request, ctx: ServerContext): Promise<Response> {
  const form = await readPageForm(request);
  const state = await consentState(request, ctx, form.get("interaction"));
  if (state instanceof Response) return state;
  const { bound, session, client } = state;
  if (!interactionCsrfValid(bound, form.get("csrf"))) {
    ctx.log.warn("consent_csrf_refused", { client_id: client.clientId });
    return csrfFailurePage();
  }
  // The user who saw the page must be the one deciding (no switch of account in another tab).
  if (bound.interaction.userId !== session.user.id) {
    return errorPage({
      status: 403,
      title: "Signed-in user changed",
      message:
        "You signed in as someone else while this page was open. Go back to the application and start again.",
    });
  }
  const decision = form.get("decision");
  if (decision !== "approve" && decision !== "deny") {
    return errorPage({ status: 400, title: "No decision", message: "Choose Allow or Deny." });
  }
  // Atomic: a double submit (or a race of two tabs) answers once.
  const interaction = await ctx.store.consumeInteraction(bound.interaction.id, ctx.now());
  if (!interaction) return alreadyCompleted();
  // Answered: the interaction's binding cookie goes with the answer (bound-interaction.ts).
  const released = [releaseInteractionBinding(interaction.id, ctx)];

  if (decision === "deny") {
    ctx.audit?.({ type: "consent_denied", client_id: client.clientId, user_id: session.user.id });
    return seeOther(
      authorizationResponseUrl(interaction.redirectUri, ctx, {
        error: "access_denied",
        errorDescription: "the user denied the request",
        state: interaction.state,
      }),
      released,
    );
  }
  const now = ctx.now();
  await ctx.store.grantConsent({
    userId: session.user.id,
    clientId: client.clientId,
    redirectUri: state.registeredRedirectUri,
    scopes: interaction.scopes,
    createdAt: now,
    updatedAt: now,
  });
  ctx.audit?.({ type: "consent_granted", client_id: client.clientId, user_id: session.user.id });
  return issueCodeAndRedirect(ctx, interaction, client, approvingSession(session), released);
}

function approvingSession(session: CurrentSession): { userId: string; idHash: string } {
  return { userId: session.user.id, idHash: session.record.idHash };
}
