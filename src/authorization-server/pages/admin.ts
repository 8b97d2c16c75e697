/**
 * The admin page (`/admin`): clients, users, grants and consents, with revoke, delete and account
 * buttons.
 */
import type {
  ClientRecord,
  ClientSource,
  ConsentRecord,
  GrantRecord,
  UserChange,
  UserRecord,
} from "../../storage/contract.js";
import { csrfFailurePage } from "../browser/bound-interaction.js";
import { errorPage } from "../browser/error-page.js";
import { readPageForm } from "../browser/form.js";
import { formPage } from "../browser/form-page.js";
import { html, page, type SafeHtml } from "../browser/html.js";
import { csrfMatches, csrfToken, issuerPath } from "../browser/interaction.js";
import { htmlResponse, seeOther } from "../browser/security-headers.js";
import { type CurrentSession, currentSession } from "../browser/session.js";
import { AUDIT_EVENTS_PER_CLIENT, type AuditEvent } from "../core/audit.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS } from "../core/paths.js";
import { changeAccount } from "../core/user-accounts.js";

/**
 * The admin page at `/admin`: every client (and where it came from), user, grant and consent in
 * storage, with buttons to revoke a grant, revoke a consent and delete a client.
 *
 * It reuses the browser side's pieces: the session cookie (a signed-in user with `isAdmin`), the
 * login page (`/login?return=/admin`, same password check and rate limits), session-bound CSRF
 * tokens on every POST, 303 after each change, the pages' security headers (no framing, no
 * script, no caching, no referrer) and one escaping function for every value shown
 * (SECURITY.md "Consent and login pages"). Nothing here fetches a client metadata document: the
 * lists come from storage only.
 */
export const handleAdmin: Endpoint = formPage({
  where: "admin",
  show: showAdmin,
  submit: submitAdmin,
  useInstead: "Use the buttons on the admin page.",
});

/** Rows shown per list (newest first); the heading says when a list is longer. */
export const ADMIN_MAX_ROWS = 500;

/**
 * What revoking a grant does to the tokens already issued, said exactly (issue 26): the store
 * marks every refresh and access token of the grant revoked, so a refresh fails (invalid_grant)
 * and introspection (RFC 7662 §2.2) answers inactive at once; but a resource server that verifies
 * the JWT itself (RFC 9068) sees nothing of it and accepts an access token until its `exp`.
 */
function tokenConsequences(ctx: ServerContext): string {
  const ttl = ctx.options.accessTokenTtlSeconds;
  return (
    "Its refresh tokens stop working at once, and introspection answers inactive for its access tokens. " +
    `A resource server that verifies access tokens itself (JWT) accepts one already issued until it expires, at most ${ttl} s from now (the access-token lifetime).`
  );
}

/** The actions the page's forms send, and the notice shown after each (fixed text, never echoed input). */
function notices(ctx: ServerContext) {
  const ttl = ctx.options.accessTokenTtlSeconds;
  return {
    "grant-revoked": `Grant revoked: its refresh tokens no longer work; access tokens already issued stop working at resource servers that verify them themselves when they expire, at most ${ttl} s from now.`,
    "consent-revoked": "Consent revoked: the user will be asked again next time.",
    "client-deleted": `Client deleted, with its grants and consents. Access tokens already issued to it expire within ${ttl} s.`,
    "not-found": "Nothing changed: that record no longer exists.",
    "user-disable": `User disabled: they cannot sign in, their grants are revoked and their sessions ended. Access tokens already issued stay valid at resource servers that verify them themselves until they expire, at most ${ttl} s from now.`,
    "user-enable":
      "User enabled: they can sign in again. Grants revoked when they were disabled stay revoked.",
    "user-make-admin": "The user is now an administrator.",
    "user-remove-admin": "The user is no longer an administrator.",
    "user-remove": `User removed, with their consents and upstream sign-in links; their grants are revoked. Access tokens already issued expire within ${ttl} s.`,
    "last-admin":
      "Nothing changed: that user is the last enabled administrator. Make another user an administrator first.",
  } as const;
}
type Notice = keyof ReturnType<typeof notices>;

function adminPath(ctx: ServerContext, notice?: Notice): string {
  return issuerPath(ctx, ENDPOINT_PATHS.admin, notice ? { done: notice } : undefined);
}

/** CSRF token of the admin forms, derived from the session cookie (like the account page's). */
function adminCsrf(session: CurrentSession): string {
  return csrfToken(session.cookieValue, "admin");
}

/**
 * The signed-in administrator, or the response to send instead: a 303 to the login page (which
 * returns here) without a session, a 403 for a user who is not an administrator.
 */
async function requireAdmin(request: Request, ctx: ServerContext): Promise<CurrentSession | Response> {
  const session = await currentSession(request, ctx);
  const here = issuerPath(ctx, ENDPOINT_PATHS.admin);
  if (!session) return seeOther(issuerPath(ctx, ENDPOINT_PATHS.login, { return: here }));
  if (!session.user.isAdmin) {
    ctx.log.warn("admin_forbidden", { user_id: session.user.id });
    const body = html`<h1>Administrators only</h1>
<p class="error" data-testid="error-message">You are signed in as <strong>${session.user.username}</strong>,
which is not an administrator account.</p>
<p><a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">Your account</a> (sign out there to sign in as someone else).</p>`;
    return htmlResponse(page("Administrators only", body), { status: 403 });
  }
  return session;
}

const SOURCE_LABELS: Record<ClientSource, string> = {
  preregistered: "pre-registered",
  "metadata-document": "metadata document",
  dynamic: "dynamic registration",
};

/** `2026-01-02 03:04 UTC`, in a `<time>` element (server-rendered: no script on the page). */
function when(ms: number | undefined, precision: { seconds?: boolean } = {}): SafeHtml | string {
  if (ms === undefined || !Number.isFinite(ms)) return "—";
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, precision.seconds ? 19 : 16).replace("T", " ")} UTC</time>`;
}

function hostOf(uri: string): string {
  try {
    return new URL(uri).host || uri;
  } catch {
    return uri;
  }
}

function clientLabel(clients: Map<string, ClientRecord>, clientId: string): SafeHtml {
  const name = clients.get(clientId)?.clientName?.trim();
  return name
    ? html`<span class="name">${name.slice(0, 200)}</span><br><code>${clientId}</code>`
    : html`<code>${clientId}</code>`;
}

function userLabel(users: Map<string, UserRecord>, userId: string | undefined): SafeHtml | string {
  if (userId === undefined) return html`<span class="muted">none (client credentials)</span>`;
  const user = users.get(userId);
  return user ? user.username : html`<code>${userId}</code> <span class="muted">(deleted)</span>`;
}

function scopeList(scopes: readonly string[]): SafeHtml {
  return scopes.length ? html`${scopes.map((s, i) => html`${i ? " " : ""}<code>${s}</code>`)}` : html`—`;
}

/** A POST form with the CSRF token, an action and the fields naming the record. */
function actionForm(
  ctx: ServerContext,
  csrf: string,
  action: string,
  fields: Record<string, string>,
  label: string,
): SafeHtml {
  return html`<form method="post" action="${adminPath(ctx)}">
<input type="hidden" name="csrf" value="${csrf}">
<input type="hidden" name="action" value="${action}">
${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
<button type="submit">${label}</button></form>`;
}

/**
 * A destructive action's button in a table: a GET form to its review (`?review=`), which changes
 * nothing; the review page carries the POST form that acts. One click never deletes or revokes,
 * and no script is needed to ask (the pages run none).
 */
function reviewButton(
  ctx: ServerContext,
  review: Review,
  fields: Record<string, string>,
  label: string,
): SafeHtml {
  return html`<form method="get" action="${adminPath(ctx)}">
<input type="hidden" name="review" value="${review}">
${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`)}
<button type="submit">${label}…</button></form>`;
}

const REVIEWS = ["revoke-grant", "revoke-consent", "delete-client", "change-user"] as const;
type Review = (typeof REVIEWS)[number];

const USER_CHANGES: readonly UserChange[] = ["disable", "enable", "make-admin", "remove-admin", "remove"];
const isUserChange = (value: string | null | undefined): value is UserChange =>
  USER_CHANGES.includes(value as UserChange);

/** The review's title, button and consequences of each account change (user-accounts.ts does it). */
function userChangeText(
  ctx: ServerContext,
  change: UserChange,
  name: string,
  activeGrants: number,
): { title: string; button: string; consequences: string } {
  const ttl = ctx.options.accessTokenTtlSeconds;
  const ended =
    activeGrants === 0
      ? "They have no active grant; every session of theirs ends."
      : `Their ${activeGrants === 1 ? "active grant is" : `${activeGrants} active grants are`} revoked and every session of theirs ends: ` +
        "refresh tokens stop working at once and introspection answers inactive, but a resource server that verifies access tokens itself (JWT) " +
        `accepts one already issued until it expires, at most ${ttl} s from now (the access-token lifetime).`;
  switch (change) {
    case "disable":
      return {
        title: `Disable ${name}?`,
        button: "Disable user",
        consequences: `${name} cannot sign in until enabled again, and no code or device approval already given is redeemed for them. ${ended} Their consents stay.`,
      };
    case "enable":
      return {
        title: `Enable ${name}?`,
        button: "Enable user",
        consequences: `${name} can sign in again. Grants revoked when they were disabled stay revoked.`,
      };
    case "make-admin":
      return {
        title: `Make ${name} an administrator?`,
        button: "Make administrator",
        consequences: `${name} can then use this page: see every client, user, grant and consent, revoke, delete and change accounts.`,
      };
    case "remove-admin":
      return {
        title: `Take the administrator role from ${name}?`,
        button: "Remove administrator role",
        consequences: `${name} can no longer use this page. Their sign-in and grants stay.`,
      };
    default:
      return {
        title: `Remove ${name}?`,
        button: "Remove user",
        consequences: `The account is deleted with its consents and upstream sign-in links; the username can be given to someone else. ${ended}`,
      };
  }
}

/** Whether this change would take the last enabled administrator away (then it is not offered). */
function losesLastAdmin(user: UserRecord, change: UserChange, users: Map<string, UserRecord>): boolean {
  if (change !== "disable" && change !== "remove" && change !== "remove-admin") return false;
  const enabledAdmins = [...users.values()].filter((u) => u.isAdmin && u.disabledAt === undefined);
  return user.isAdmin && user.disabledAt === undefined && enabledAdmins.length <= 1;
}

/**
 * The review of one destructive action: what it will do, said exactly, the POST form that does it
 * (CSRF token) and Cancel; undefined when the record is gone.
 */
async function reviewSection(
  ctx: ServerContext,
  csrf: string,
  params: URLSearchParams,
  clients: Map<string, ClientRecord>,
  users: Map<string, UserRecord>,
): Promise<SafeHtml | undefined> {
  const review = params.get("review") as Review;
  // A form like the action's, so the two buttons sit side by side at their own width.
  const cancel = html`<form method="get" action="${adminPath(ctx)}"><button type="submit" data-testid="cancel">Cancel</button></form>`;
  const section = (title: string, what: SafeHtml, consequences: SafeHtml, form: SafeHtml) =>
    html`<section class="review" data-testid="review"><h2>${title}</h2>${what}${consequences}
<div class="actions">${form}${cancel}</div></section>`;
  if (review === "revoke-grant") {
    const grant = await ctx.store.getGrant(params.get("grant_id") ?? "");
    if (!grant || grant.revokedAt !== undefined) return undefined;
    return section(
      "Revoke this grant?",
      html`<p>${clientLabel(clients, grant.clientId)} for ${userLabel(users, grant.userId)}: ${scopeList(grant.scopes)} on <code>${grant.resource}</code>, granted ${when(grant.createdAt)}.</p>`,
      html`<p data-testid="consequences">${tokenConsequences(ctx)}</p>`,
      actionForm(ctx, csrf, "revoke-grant", { grant_id: grant.grantId }, "Revoke grant"),
    );
  }
  if (review === "revoke-consent") {
    const userId = params.get("user_id") ?? "";
    const clientId = params.get("client_id") ?? "";
    const redirectUri = params.get("redirect_uri") ?? "";
    const consent = await ctx.store.getConsent(userId, clientId, redirectUri);
    if (!consent) return undefined;
    return section(
      "Revoke this consent?",
      html`<p>${userLabel(users, userId)} allowed ${clientLabel(clients, clientId)} (redirect <code>${redirectUri}</code>): ${scopeList(consent.scopes)}.</p>`,
      html`<p data-testid="consequences">The user will be asked again on the client's next authorization. Grants already issued stay until they are revoked.</p>`,
      actionForm(
        ctx,
        csrf,
        "revoke-consent",
        { user_id: userId, client_id: clientId, redirect_uri: redirectUri },
        "Revoke consent",
      ),
    );
  }
  if (review === "delete-client") {
    const client = clients.get(params.get("client_id") ?? "");
    if (!client) return undefined;
    const active = (await ctx.store.listGrants({ clientId: client.clientId })).filter(
      (g) => g.revokedAt === undefined && g.expiresAt > ctx.now(),
    ).length;
    return section(
      "Delete this client?",
      html`<p>${clientLabel(clients, client.clientId)} (${SOURCE_LABELS[client.source] ?? client.source}), with ${active} active grant${active === 1 ? "" : "s"} and its consents.</p>`,
      html`<p data-testid="consequences">Its grants are revoked: ${tokenConsequences(ctx)} A client from the server's configuration comes back when it restarts; a metadata-document client is fetched again on its next request.</p>`,
      actionForm(ctx, csrf, "delete-client", { client_id: client.clientId }, "Delete client"),
    );
  }
  if (review === "change-user") {
    const user = users.get(params.get("user_id") ?? "");
    const change = params.get("change");
    if (!user || !isUserChange(change)) return undefined;
    const active = (await ctx.store.listGrants({ userId: user.id, active: true })).filter(
      (g) => g.expiresAt > ctx.now(),
    ).length;
    const text = userChangeText(ctx, change, user.username, active);
    // The store refuses it anyway (storage/rules.ts judgeUserChange); the review says why first.
    if (losesLastAdmin(user, change, users)) {
      return section(
        text.title,
        html`<p>${user.username} (${userRole(user)}).</p>`,
        html`<p class="error" data-testid="consequences">${user.username} is the last enabled administrator: nobody could use this page afterwards. Make another user an administrator first.</p>`,
        html``,
      );
    }
    return section(
      text.title,
      html`<p>${user.username} (${userRole(user)}), created ${when(user.createdAt)}.</p>`,
      html`<p data-testid="consequences">${text.consequences}</p>`,
      actionForm(ctx, csrf, "change-user", { user_id: user.id, change }, text.button),
    );
  }
  return undefined;
}

function userRole(user: UserRecord): string {
  const role = user.isAdmin ? "administrator" : "user";
  return user.disabledAt === undefined ? role : `${role}, disabled`;
}

/** The account buttons of a user's row, a cell each (aligned down the table), each opening its review. */
function userButtons(ctx: ServerContext, user: UserRecord): SafeHtml {
  const button = (change: UserChange, label: string) =>
    html`<td>${reviewButton(ctx, "change-user", { user_id: user.id, change }, label)}</td>`;
  return html`${user.disabledAt === undefined ? button("disable", "Disable") : button("enable", "Enable")}
${user.isAdmin ? button("remove-admin", "Remove admin") : button("make-admin", "Make admin")}
${button("remove", "Remove")}`;
}

function heading(title: string, total: number, testId: string): SafeHtml {
  return html`<h2 data-testid="${testId}">${title} (${total})${
    total > ADMIN_MAX_ROWS ? html` <span class="muted">showing the newest ${ADMIN_MAX_ROWS}</span>` : ""
  }</h2>`;
}

/**
 * The fields of an audit event besides its type, time and client, as `name value` pairs; a
 * `user_id` or `admin_id` is shown as the user's name (the id stays in the log), as the other lists
 * show users.
 */
function eventDetails(event: AuditEvent, users: Map<string, UserRecord>): SafeHtml {
  const rest = Object.entries(event).filter(([k]) => k !== "type" && k !== "at" && k !== "client_id");
  return rest.length
    ? html`${rest.map(([k, v], i) =>
        (k === "user_id" || k === "admin_id") && typeof v === "string"
          ? html`${i ? " · " : ""}${k === "admin_id" ? "by administrator" : "user"} ${userLabel(users, v)}`
          : html`${i ? " · " : ""}${k} <code>${String(v)}</code>`,
      )}`
    : html`—`;
}

/**
 * The audit events section: one client's recent events when the page was asked for them
 * (`?client=`), else the newest of any kind. The trail is this instance's memory (audit.ts): after
 * a restart, or on another instance, the JSON log has the rest.
 */
function eventsSection(
  ctx: ServerContext,
  clients: Map<string, ClientRecord>,
  users: Map<string, UserRecord>,
  selected: string | undefined,
): SafeHtml {
  const trail = ctx.auditTrail;
  const events = trail ? (selected === undefined ? trail.recent() : trail.forClient(selected)) : [];
  const title =
    selected === undefined
      ? html`Recent events`
      : html`Recent events of ${clientLabel(clients, selected)} <a href="${adminPath(ctx)}#events">(all clients)</a>`;
  const rows = events.map(
    (e) => html`<tr data-testid="event-row" data-event-type="${e.type}">
<td class="nowrap">${when(e.at, { seconds: true })}</td><td class="nowrap"><code>${e.type}</code></td>
<td>${"client_id" in e && e.client_id !== undefined ? clientLabel(clients, e.client_id) : "—"}</td>
<td>${eventDetails(e, users)}</td></tr>`,
  );
  return html`<h2 id="events" data-testid="events-heading">${title}</h2>
<p class="muted">Kept in this server process's memory (the newest ${AUDIT_EVENTS_PER_CLIENT} per client); the log has every event.</p>
${
  rows.length
    ? html`<div class="table-scroll"><table data-testid="events"><thead><tr><th>Time</th><th>Event</th><th>Client</th><th>Details</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : html`<p class="muted" data-testid="events-empty">No events yet.</p>`
}`;
}

function newestFirst<T>(items: T[], time: (item: T) => number): T[] {
  return [...items].sort((a, b) => time(b) - time(a)).slice(0, ADMIN_MAX_ROWS);
}

function grantStatus(grant: GrantRecord, now: number): { label: string; active: boolean } {
  if (grant.revokedAt !== undefined) return { label: "revoked", active: false };
  if (grant.expiresAt <= now) return { label: "expired", active: false };
  return { label: "active", active: true };
}

async function showAdmin(request: Request, ctx: ServerContext): Promise<Response> {
  const session = await requireAdmin(request, ctx);
  if (session instanceof Response) return session;
  const [clientList, userList, grantList, consentList] = await Promise.all([
    ctx.store.listClients(),
    ctx.store.listUsers(),
    ctx.store.listGrants(),
    ctx.store.listConsents(),
  ]);
  const clients = new Map(clientList.map((c) => [c.clientId, c]));
  const users = new Map(userList.map((u) => [u.id, u]));
  const csrf = adminCsrf(session);
  const now = ctx.now();
  const params = new URL(request.url).searchParams;
  const texts = notices(ctx);
  const reviewing = REVIEWS.includes(params.get("review") as Review);
  const review = reviewing ? await reviewSection(ctx, csrf, params, clients, users) : undefined;
  const done = reviewing && !review ? "not-found" : params.get("done");
  const notice = done !== null && Object.hasOwn(texts, done) ? texts[done as Notice] : undefined;
  const selectedClient = params.get("client") ?? undefined;

  const clientRows = newestFirst(clientList, (c) => c.createdAt).map(
    (c) => html`<tr data-testid="client-row" data-client-id="${c.clientId}">
<td>${clientLabel(clients, c.clientId)}</td>
<td class="nowrap" data-testid="client-source">${SOURCE_LABELS[c.source] ?? c.source}</td>
<td>${[...new Set(c.redirectUris.map(hostOf))].join(", ") || "—"}</td>
<td class="nowrap">${when(c.createdAt)}</td>
<td class="nowrap">${when(c.lastUsedAt)}</td>
<td class="nowrap"><a data-testid="client-events-link" href="${issuerPath(ctx, ENDPOINT_PATHS.admin, { client: c.clientId })}#events">Events</a></td>
<td>${reviewButton(ctx, "delete-client", { client_id: c.clientId }, "Delete client")}</td></tr>`,
  );
  const userRows = [...userList]
    .sort((a, b) => a.username.localeCompare(b.username))
    .slice(0, ADMIN_MAX_ROWS)
    .map(
      (u) => html`<tr data-testid="user-row" data-user-id="${u.id}"><td>${u.username}</td>
<td>${u.isAdmin ? "admin" : "—"}</td>
<td class="nowrap" data-testid="user-status">${u.disabledAt === undefined ? "enabled" : html`disabled ${when(u.disabledAt)}`}</td>
<td class="nowrap">${when(u.createdAt)}</td>${userButtons(ctx, u)}</tr>`,
    );
  const grantRows = newestFirst(grantList, (g) => g.createdAt).map((g) => {
    const status = grantStatus(g, now);
    return html`<tr data-testid="grant-row" data-grant-id="${g.grantId}" data-status="${status.label}">
<td>${clientLabel(clients, g.clientId)}</td>
<td class="nowrap">${userLabel(users, g.userId)}</td>
<td>${scopeList(g.scopes)}</td>
<td><code>${g.resource}</code></td>
<td class="nowrap">${when(g.createdAt)}</td>
<td class="nowrap">${when(g.expiresAt)}</td>
<td class="nowrap">${status.label === "revoked" ? html`revoked ${when(g.revokedAt)}` : status.label}</td>
<td>${status.active ? reviewButton(ctx, "revoke-grant", { grant_id: g.grantId }, "Revoke grant") : ""}</td></tr>`;
  });
  const consentRows = newestFirst(consentList, (c: ConsentRecord) => c.updatedAt).map(
    (c) => html`<tr data-testid="consent-row">
<td class="nowrap">${userLabel(users, c.userId)}</td>
<td>${clientLabel(clients, c.clientId)}</td>
<td><code>${c.redirectUri}</code></td>
<td>${scopeList(c.scopes)}</td>
<td class="nowrap">${when(c.updatedAt)}</td>
<td>${reviewButton(
      ctx,
      "revoke-consent",
      { user_id: c.userId, client_id: c.clientId, redirect_uri: c.redirectUri },
      "Revoke consent",
    )}</td></tr>`,
  );

  const table = (head: string[], rows: SafeHtml[], empty: string, testId: string) =>
    rows.length
      ? html`<div class="table-scroll"><table data-testid="${testId}"><thead><tr>${head.map(
          (h) => html`<th>${h}</th>`,
        )}</tr></thead><tbody>${rows}</tbody></table></div>`
      : html`<p class="muted" data-testid="${testId}-empty">${empty}</p>`;

  const body = html`<h1>Gatehouse administration</h1>
<p class="muted">Signed in as <strong data-testid="username">${session.user.username}</strong> ·
<a href="${issuerPath(ctx, ENDPOINT_PATHS.account)}">your account and sign out</a> · issuer <code>${ctx.options.issuer}</code></p>
${notice ? html`<p class="notice" role="status" data-testid="notice">${notice}</p>` : ""}
${review ?? ""}
${heading("Clients", clientList.length, "clients-heading")}
<p class="muted">Each button opens a review of what it will do; nothing changes until you confirm there. Deleting a client revokes its grants and consents. Clients from the server's configuration come back when it restarts;
a metadata-document client is fetched again on its next request.</p>
${table(["Client", "Source", "Redirect hosts", "Created", "Last used", "", ""], clientRows, "No clients.", "clients")}
${eventsSection(ctx, clients, users, selectedClient)}
${heading("Grants", grantList.length, "grants-heading")}
${table(
  ["Client", "User", "Scopes", "Resource", "Created", "Expires", "Status", ""],
  grantRows,
  "No grants.",
  "grants",
)}
${heading("Consents", consentList.length, "consents-heading")}
<p class="muted">Revoking a grant stops its refresh tokens at once; its access tokens last until they expire (at most ${ctx.options.accessTokenTtlSeconds} s) at resource servers that verify them themselves. Revoking a consent makes the user decide again on the next request; grants already issued stay until revoked.</p>
${table(["User", "Client", "Redirect URI", "Scopes", "Updated", ""], consentRows, "No consents.", "consents")}
${heading("Users", userList.length, "users-heading")}
<p class="muted">Add users and reset passwords with <code>gatehouse users</code>. Disabling or removing a user revokes their grants and ends their sessions;
the last enabled administrator cannot be disabled, removed or lose the role.</p>
${table(["Username", "Role", "Status", "Created", "", "", ""], userRows, "No users.", "users")}`;
  return htmlResponse(page("Gatehouse administration", body, { wide: true }));
}

function missingField(name: string): Response {
  return errorPage({
    status: 400,
    title: "Nothing to change",
    message: `The form did not name the record to change (${name} missing).`,
  });
}

async function submitAdmin(request: Request, ctx: ServerContext): Promise<Response> {
  const form = await readPageForm(request);
  const session = await requireAdmin(request, ctx);
  if (session instanceof Response) return session;
  if (!csrfMatches(form.get("csrf"), adminCsrf(session))) {
    ctx.log.warn("admin_csrf_refused", { user_id: session.user.id });
    return csrfFailurePage();
  }
  const now = ctx.now();
  const admin = session.user.id;
  switch (form.get("action")) {
    case "revoke-grant": {
      const grantId = form.get("grant_id");
      if (grantId === undefined) return missingField("grant_id");
      const grant = await ctx.store.getGrant(grantId);
      if (!grant) return seeOther(adminPath(ctx, "not-found"));
      // Revokes the grant with every refresh and access token of it (RFC 7009 §2.1 semantics).
      await ctx.store.revokeGrant(grantId, now);
      ctx.log.info("admin_grant_revoked", { admin_id: admin, client_id: grant.clientId, grant_id: grantId });
      ctx.audit?.({ type: "grant_revoked", client_id: grant.clientId, grant_id: grantId, by: "admin" });
      return seeOther(adminPath(ctx, "grant-revoked"));
    }
    case "revoke-consent": {
      const userId = form.get("user_id");
      const clientId = form.get("client_id");
      const redirectUri = form.get("redirect_uri");
      if (userId === undefined) return missingField("user_id");
      if (clientId === undefined) return missingField("client_id");
      if (redirectUri === undefined) return missingField("redirect_uri");
      const removed = await ctx.store.revokeConsent(userId, clientId, redirectUri);
      ctx.log.info("admin_consent_revoked", { admin_id: admin, client_id: clientId, user_id: userId });
      if (removed > 0)
        ctx.audit?.({ type: "consent_revoked", client_id: clientId, user_id: userId, by: "admin" });
      return seeOther(adminPath(ctx, removed > 0 ? "consent-revoked" : "not-found"));
    }
    case "delete-client": {
      const clientId = form.get("client_id");
      if (clientId === undefined) return missingField("client_id");
      // Grants first: a deleted client must leave no working refresh token behind, and no consent
      // that would approve it silently if the same id comes back (a metadata document, say).
      for (const grant of await ctx.store.listGrants({ clientId })) {
        if (grant.revokedAt === undefined) await ctx.store.revokeGrant(grant.grantId, now);
      }
      for (const consent of await ctx.store.listConsents()) {
        if (consent.clientId === clientId) await ctx.store.revokeConsent(consent.userId, clientId);
      }
      const deleted = await ctx.store.deleteClient(clientId);
      ctx.log.info("admin_client_deleted", { admin_id: admin, client_id: clientId });
      if (deleted) ctx.audit?.({ type: "client_deleted", client_id: clientId, by: "admin" });
      return seeOther(adminPath(ctx, deleted ? "client-deleted" : "not-found"));
    }
    case "change-user": {
      const userId = form.get("user_id");
      const change = form.get("change");
      if (userId === undefined) return missingField("user_id");
      if (!isUserChange(change)) return missingField("change");
      const result = await changeAccount(ctx.store, userId, change, now);
      if (result.status === "not_found") return seeOther(adminPath(ctx, "not-found"));
      if (result.status === "last_admin") return seeOther(adminPath(ctx, "last-admin"));
      ctx.log.info("admin_user_changed", { admin_id: admin, user_id: userId, change });
      ctx.audit?.({
        type: "user_changed",
        user_id: userId,
        change,
        by: "admin",
        admin_id: admin,
        ...(result.ended
          ? { grants_revoked: result.ended.grants, sessions_ended: result.ended.sessions }
          : {}),
      });
      return seeOther(adminPath(ctx, `user-${change}`));
    }
    default:
      return errorPage({
        status: 400,
        title: "Unknown action",
        message: "This form sent an action the admin page does not know.",
      });
  }
}
