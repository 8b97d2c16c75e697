/**
 * Login, consent and account pages over real HTTP (SECURITY.md "Consent and login pages"): headers,
 * cookies, CSRF, browser binding, rate limits, what a decision stores and where it redirects.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerContext } from "../../../src/authorization-server/core/context.js";
import { SORTABLE_ID } from "../../../src/authorization-server/core/ids.js";
import { handleConsent } from "../../../src/authorization-server/pages/consent.js";
import {
  LOGIN_ATTEMPTS_PER_ADDRESS,
  LOGIN_ATTEMPTS_PER_USER,
  LOGIN_WINDOW_MS,
} from "../../../src/authorization-server/pages/login.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { StorageUnavailableError } from "../../../src/storage/contract.js";
import { formFor, reviewQuery } from "../../support/page-forms.js";
import {
  Agent,
  authorizeUrl,
  type Harness,
  hiddenFields,
  PASSWORD,
  RESOURCE,
  reachConsent,
  startHarness,
  XSS_NAME,
} from "./harness.js";

let h: Harness;

/** reachConsent as a fresh user for a fresh client (no shared consents or rate-limit counters). */
async function freshConsent(agent: Agent, params: Record<string, string | undefined> = {}) {
  const user = await h.newUser();
  const client_id = params.client_id ?? (await h.newClient());
  const result = await reachConsent(agent, authorizeUrl(h.url, { ...params, client_id }), user);
  return { ...result, user, clientId: client_id };
}

beforeAll(async () => {
  h = await startHarness();
  await h.addClient({
    clientId: "no-refresh",
    redirectUris: ["https://app.example/cb"],
    grantTypes: ["authorization_code"],
  });
  await h.addClient({ clientId: "v6", redirectUris: ["http://[::1]/cb"] });
  await h.addClient({
    clientId: "xss",
    source: "dynamic",
    clientName: XSS_NAME,
    redirectUris: ["https://xss.example/cb"],
  });
});
afterAll(async () => {
  await h?.close();
});

function expectSecurityHeaders(response: Response): void {
  const csp = response.headers.get("content-security-policy")!;
  for (const part of [
    "default-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "img-src 'self' data:",
  ]) {
    expect(csp).toContain(part);
  }
  expect(csp).toMatch(/style-src 'sha256-[A-Za-z0-9+/]+=*'/);
  expect(csp).toMatch(/form-action 'self'/);
  expect(csp).not.toContain("unsafe-inline");
  expect(response.headers.get("x-frame-options")).toBe("DENY");
  expect(response.headers.get("referrer-policy")).toBe("no-referrer");
  expect(response.headers.get("x-content-type-options")).toBe("nosniff");
  expect(response.headers.get("cache-control")).toBe("no-store");
}

/** Redeems a code straight from storage to read what was stored for it. */
async function storedCode(code: string) {
  const now = Date.now();
  const result = await h.store.redeemAuthorizationCode(sha256Base64url(code), now, () => undefined, {
    accessToken: { jti: `j-${code.slice(0, 8)}`, createdAt: now, expiresAt: now + 1000 },
    grantExpiresAt: now + 10_000,
  });
  if (result.status !== "issued") throw new Error(`code not redeemable: ${result.status}`);
  return result.code;
}

describe("security headers on every page and redirect", () => {
  it("login, consent, account, error pages and 303s", async () => {
    const agent = new Agent(h.url);
    const start = await agent.get(authorizeUrl(h.url, {}));
    expectSecurityHeaders(start);
    const login = await agent.get(start.headers.get("location")!);
    expect(login.status).toBe(200);
    expectSecurityHeaders(login);
    const html = await login.text();
    expect(html).toContain('<input type="password" id="password" name="password"');
    expect(html).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)[^"]*\.(js|css)/);
    const { fields } = await freshConsent(agent, {});
    const consent = await agent.get(`/consent?interaction=${fields.interaction}`);
    expectSecurityHeaders(consent);
    // Chromium applies form-action to the redirect after the POST: the client's origin is named.
    expect(consent.headers.get("content-security-policy")).toContain(
      "form-action 'self' https://app.example",
    );
    expectSecurityHeaders(await agent.get("/account"));
    expectSecurityHeaders(await agent.get("/consent?interaction=nope"));
    expectSecurityHeaders(await agent.post("/consent", { ...fields, decision: "approve" }));
  });

  it("an IPv6 loopback redirect (not expressible as a CSP host) falls back to its scheme", async () => {
    const agent = new Agent(h.url);
    const { fields } = await freshConsent(agent, { client_id: "v6", redirect_uri: "http://[::1]:4711/cb" });
    const consent = await agent.get(`/consent?interaction=${fields.interaction}`);
    expect(consent.headers.get("content-security-policy")).toContain("form-action 'self' http:;");
  });
});

describe("cookies", () => {
  it("plain-http loopback development: no __Host- prefix, no Secure", async () => {
    const agent = new Agent(h.url);
    const { fields } = await freshConsent(agent, {});
    // The session, and the binding of the interaction in progress (one cookie per interaction).
    expect([...agent.cookies.keys()].sort()).toEqual([
      `gatehouse_interaction_${fields.interaction}`,
      "gatehouse_session",
    ]);
  });

  it("secure cookies: __Host- prefix, Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", async () => {
    const secure = await startHarness({ secureCookies: true });
    try {
      const agent = new Agent(secure.url);
      const start = await agent.get(authorizeUrl(secure.url, {}));
      const [binding] = start.headers.getSetCookie();
      expect(binding).toMatch(
        /^__Host-gatehouse_interaction_[A-Za-z0-9_-]{22}=[A-Za-z0-9_-]{43}\.[0-9a-z]+; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=600$/,
      );
      const page = await agent.get(start.headers.get("location")!);
      const done = await agent.post("/login", {
        ...hiddenFields(await page.text()),
        username: "alice",
        password: PASSWORD,
      });
      expect(done.status).toBe(303);
      const [session] = done.headers.getSetCookie();
      expect(session).toMatch(
        /^__Host-gatehouse_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=\d+$/,
      );
      expect(session).not.toMatch(/domain=/i);
      // The server reads only the prefixed names.
      const consent = await agent.get(done.headers.get("location")!);
      expect(consent.status).toBe(200);
    } finally {
      await secure.close();
    }
  });

  it("the session is stored only as a hash and is fresh on every login (no fixation)", async () => {
    const agent = new Agent(h.url);
    const { user } = await freshConsent(agent, {});
    const first = agent.cookies.get("gatehouse_session")!;
    expect(await h.store.getSession(sha256Base64url(first), Date.now())).toMatchObject({ userId: user.id });
    expect(await h.store.getSession(first, Date.now())).toBeUndefined();
    expect((await agent.get("/login")).status).toBe(303); // already signed in
    // An attacker-chosen session value planted in the browser is never adopted.
    const planted = "P".repeat(43);
    agent.cookies.set("gatehouse_session", planted);
    const login = await agent.get("/login");
    expect(login.status).toBe(200);
    const done = await agent.post("/login", {
      ...hiddenFields(await login.text()),
      username: user.username,
      password: PASSWORD,
    });
    expect(done.status).toBe(303);
    const issued = agent.cookies.get("gatehouse_session")!;
    expect(issued).not.toBe(planted);
    expect(issued).not.toBe(first);
  });
});

describe("login", () => {
  it("wrong password and unknown user get the same answer and no session", async () => {
    const answers: string[] = [];
    for (const username of ["alice", "nobody-here"]) {
      const agent = new Agent(h.url);
      const start = await agent.get(authorizeUrl(h.url, {}));
      const page = await agent.get(start.headers.get("location")!);
      const response = await agent.post("/login", {
        ...hiddenFields(await page.text()),
        username,
        password: "wrong",
      });
      expect(response.status).toBe(400);
      expect(response.headers.getSetCookie()).toEqual([]);
      const html = await response.text();
      answers.push(/data-testid="login-error">([^<]*)</.exec(html)![1]!);
      expect(html).not.toContain('wrong"'); // the password is never echoed
    }
    expect(answers[0]).toBe(answers[1]);
  });

  it("a missing or wrong CSRF token is refused", async () => {
    const agent = new Agent(h.url);
    const start = await agent.get(authorizeUrl(h.url, {}));
    const page = await agent.get(start.headers.get("location")!);
    const fields = hiddenFields(await page.text());
    for (const csrf of [undefined, "forged", `${fields.csrf}x`]) {
      const response = await agent.post("/login", {
        ...fields,
        csrf,
        username: "csrf-user",
        password: PASSWORD,
      });
      expect(response.status).toBe(403);
      expect(response.headers.getSetCookie()).toEqual([]);
    }
    // Without an interaction: the account login's token is bound to the browser cookie.
    const other = new Agent(h.url);
    const accountLogin = await other.get("/login");
    const accountFields = hiddenFields(await accountLogin.text());
    const foreign = new Agent(h.url);
    const refused = await foreign.post("/login", { ...accountFields, username: "alice", password: PASSWORD });
    expect(refused.status).toBe(403);
    const ok = await other.post("/login", { ...accountFields, username: "alice", password: PASSWORD });
    expect(ok.status).toBe(303);
    expect(ok.headers.get("location")).toBe("/account");
  });

  /**
   * Puts the harness's clock one second into a rate-limit window, running at real pace: the test
   * never straddles a window boundary, whenever it runs and however slowly.
   */
  function atWindowStart(ctx: ServerContext): void {
    const offset = (Date.now() % LOGIN_WINDOW_MS) - 1000;
    ctx.now = () => Date.now() - offset;
  }

  async function attempt(url: string, username: string, password = "guess"): Promise<Response> {
    const agent = new Agent(url);
    const page = await agent.get("/login");
    return agent.post("/login", { ...hiddenFields(await page.text()), username, password });
  }

  it(`is rate-limited per username (${LOGIN_ATTEMPTS_PER_USER} per window) with a 429 page`, async () => {
    const limited = await startHarness();
    atWindowStart(limited.ctx);
    try {
      const statuses: number[] = [];
      for (let i = 0; i <= LOGIN_ATTEMPTS_PER_USER; i++) {
        const agent = new Agent(limited.url);
        const page = await agent.get("/login");
        const r = await agent.post("/login", {
          ...hiddenFields(await page.text()),
          username: "Alice",
          password: "guess",
        });
        statuses.push(r.status);
      }
      expect(statuses.slice(0, LOGIN_ATTEMPTS_PER_USER).every((s) => s === 400)).toBe(true);
      expect(statuses.at(-1)).toBe(429);
      // Even the right password is refused now (usernames compare case-insensitively for the limit).
      const agent = new Agent(limited.url);
      const page = await agent.get("/login");
      const r = await agent.post("/login", {
        ...hiddenFields(await page.text()),
        username: "alice",
        password: PASSWORD,
      });
      expect(r.status).toBe(429);
      expect(r.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(r.headers.getSetCookie()).toEqual([]);
    } finally {
      await limited.close();
    }
  }, 120_000);

  it(`is rate-limited per client address (${LOGIN_ATTEMPTS_PER_ADDRESS} per window)`, async () => {
    const limited = await startHarness();
    atWindowStart(limited.ctx);
    try {
      let last = 0;
      for (let i = 0; i <= LOGIN_ATTEMPTS_PER_ADDRESS; i++) {
        const agent = new Agent(limited.url);
        const page = await agent.get("/login");
        const r = await agent.post("/login", {
          ...hiddenFields(await page.text()),
          username: `user-${i}`,
          password: "guess",
        });
        last = r.status;
        if (i < LOGIN_ATTEMPTS_PER_ADDRESS) expect(r.status).toBe(400);
      }
      expect(last).toBe(429);
    } finally {
      await limited.close();
    }
  }, 180_000);

  it("the username limit is a sliding window: attempts on both sides of a window boundary add up", async () => {
    const limited = await startHarness();
    const boundary = Math.ceil(Date.now() / LOGIN_WINDOW_MS) * LOGIN_WINDOW_MS;
    let now = boundary - 2000;
    limited.ctx.now = () => now;
    try {
      const before = LOGIN_ATTEMPTS_PER_USER - 4;
      const statuses: number[] = [];
      for (let i = 0; i < before; i++) statuses.push((await attempt(limited.url, "alice")).status);
      now = boundary + 1000; // a fixed window would start counting from zero here
      for (let i = before; i <= LOGIN_ATTEMPTS_PER_USER; i++) {
        statuses.push((await attempt(limited.url, "alice")).status);
      }
      expect(statuses).toEqual([...Array(LOGIN_ATTEMPTS_PER_USER).fill(400), 429]);
      // Retry-After is the time until the earlier attempts have slid far enough out, not a guess.
      const refused = await attempt(limited.url, "alice", PASSWORD);
      expect(refused.status).toBe(429);
      const wait = Number(refused.headers.get("retry-after"));
      expect(wait).toBeGreaterThan(1);
      expect(wait).toBeLessThanOrEqual((2 * LOGIN_WINDOW_MS) / 1000);
      now += wait * 1000;
      expect((await attempt(limited.url, "alice", PASSWORD)).status).toBe(303);
    } finally {
      await limited.close();
    }
  }, 120_000);
});

describe("consent decisions", () => {
  it("approve: consent stored per user/client/redirect URI, one code (hash only), 303 with code, state, iss", async () => {
    const agent = new Agent(h.url);
    const state = "keep me exactly ü &";
    const { fields, user, clientId } = await freshConsent(agent, {
      scope: "notes:read offline_access",
      state,
    });
    const response = await agent.post("/consent", { ...fields, decision: "approve" });
    expect(response.status).toBe(303);
    const location = new URL(response.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe("https://app.example/cb");
    expect(location.searchParams.get("state")).toBe(state);
    expect(location.searchParams.get("iss")).toBe(h.url);
    const code = location.searchParams.get("code")!;
    const record = await storedCode(code);
    expect(record.codeHash).toBe(sha256Base64url(code));
    expect(record).toMatchObject({
      clientId,
      userId: user.id,
      redirectUri: "https://app.example/cb",
      scopes: ["notes:read", "offline_access"],
      resource: RESOURCE,
      codeChallengeMethod: "S256",
      refreshAllowed: true,
    });
    expect(record.expiresAt - record.createdAt).toBe(60_000);
    expect(record.grantId).toMatch(SORTABLE_ID);
    expect(await h.store.getConsent(user.id, clientId, "https://app.example/cb")).toMatchObject({
      scopes: expect.arrayContaining(["notes:read", "offline_access"]),
    });
  });

  it("refresh follows the refresh policy: declared refresh_token grant, or offline_access for a client that declared no grant types", async () => {
    for (const [clientId, scope, expected] of [
      [await h.newClient(), "notes:write", true],
      [await h.newClient({ grantTypes: [] }), "notes:write", false],
      [await h.newClient({ grantTypes: [] }), "notes:write offline_access", true],
      ["no-refresh", "notes:read offline_access", false],
    ] as const) {
      const agent = new Agent(h.url);
      const { fields } = await freshConsent(agent, { client_id: clientId, scope });
      const response = await agent.post("/consent", { ...fields, decision: "approve" });
      const code = new URL(response.headers.get("location")!).searchParams.get("code")!;
      expect((await storedCode(code)).refreshAllowed).toBe(expected);
    }
  });

  it("deny: error=access_denied with state and iss, nothing stored", async () => {
    const agent = new Agent(h.url);
    const { fields, user } = await freshConsent(agent, {
      client_id: "no-refresh",
      scope: "notes:admin",
      state: "d",
    });
    const response = await agent.post("/consent", { ...fields, decision: "deny" });
    const q = new URL(response.headers.get("location")!).searchParams;
    expect(q.get("error")).toBe("access_denied");
    expect(q.get("state")).toBe("d");
    expect(q.get("iss")).toBe(h.url);
    expect(q.has("code")).toBe(false);
    expect(await h.store.getConsent(user.id, "no-refresh", "https://app.example/cb")).toBeUndefined();
  });

  it("a decision is taken once: a double submit gets a page, not a second code", async () => {
    const agent = new Agent(h.url);
    const { fields } = await freshConsent(agent, { scope: "notes:admin" });
    const [a, b] = await Promise.all([
      agent.post("/consent", { ...fields, decision: "approve" }),
      agent.post("/consent", { ...fields, decision: "approve" }),
    ]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([303, 400]);
    const again = await agent.post("/consent", { ...fields, decision: "approve" });
    expect(again.status).toBe(400);
    expect(again.headers.get("location")).toBeNull();
  });

  it("CSRF: missing, wrong, or from another interaction → 403, interaction left intact", async () => {
    const agent = new Agent(h.url);
    const first = await freshConsent(agent, { client_id: "no-refresh", scope: "notes:write" });
    const second = await freshConsent(agent, { client_id: "no-refresh", scope: "notes:admin" });
    for (const csrf of [undefined, "", "forged", second.fields.csrf]) {
      const r = await agent.post("/consent", { ...first.fields, csrf, decision: "approve" });
      expect(r.status).toBe(403);
      expect(r.headers.get("location")).toBeNull();
    }
    expect(await h.store.getInteraction(first.fields.interaction!, Date.now())).toBeDefined();
    expect((await agent.post("/consent", { ...first.fields, decision: "approve" })).status).toBe(303);
  });

  it("another browser cannot use the continuation, even with the right CSRF token and its own session", async () => {
    const victim = new Agent(h.url);
    const { fields } = await freshConsent(victim, { client_id: "no-refresh", scope: "notes:read" });
    const attacker = new Agent(h.url);
    await freshConsent(attacker, { client_id: "no-refresh", scope: "notes:write" });
    const r = await attacker.post("/consent", { ...fields, decision: "approve" });
    expect(r.status).toBe(403);
    expect(await r.text()).toContain("Wrong browser");
    expect((await attacker.get(`/consent?interaction=${fields.interaction}`)).status).toBe(403);
  });

  it("the signed-in user must be the one who saw the page", async () => {
    const agent = new Agent(h.url);
    const { fields } = await freshConsent(agent, { client_id: "no-refresh", scope: "notes:admin" });
    // Another account signs in in the same browser (another tab).
    const login = await agent.get("/account");
    const csrf = hiddenFields(await login.text()).csrf!;
    await agent.post("/account", { csrf, action: "logout" });
    const page = await agent.get("/login");
    const other = await h.newUser();
    await agent.post("/login", {
      ...hiddenFields(await page.text()),
      username: other.username,
      password: PASSWORD,
    });
    const r = await agent.post("/consent", { ...fields, decision: "approve" });
    expect(r.status).toBe(403);
    expect(r.headers.get("location")).toBeNull();
  });

  it("no session → the consent page sends the browser to the login page", async () => {
    const agent = new Agent(h.url);
    const start = await agent.get(authorizeUrl(h.url, {}));
    const id = new URL(start.headers.get("location")!, h.url).searchParams.get("interaction")!;
    const r = await agent.get(`/consent?interaction=${id}`);
    expect(r.status).toBe(303);
    expect(r.headers.get("location")).toBe(`/login?interaction=${id}`);
  });

  it("an unknown or malformed interaction id gets a page", async () => {
    const agent = new Agent(h.url);
    for (const id of ["", "x", "A".repeat(22), "../../etc"]) {
      const r = await agent.get(`/consent?interaction=${encodeURIComponent(id)}`);
      expect(r.status).toBe(400);
      expect(r.headers.get("location")).toBeNull();
    }
  });

  it("names the client's host (metadata document URL, else client_uri) and the redirect host", async () => {
    await h.addClient({
      clientId: "https://meta.example/client.json",
      source: "metadata-document",
      clientName: "Meta Tool",
      clientUri: "https://elsewhere.example/",
      redirectUris: ["https://cb.meta-tool.example/done"],
    });
    await h.addClient({
      clientId: "vendor-app",
      clientName: "Vendor App",
      clientUri: "https://vendor.example/about",
      redirectUris: ["https://app.example/cb"],
    });
    const hostsOf = (html: string) => ({
      client: /data-testid="client-host">([^<]*)</.exec(html)?.[1],
      redirect: /data-testid="redirect-host">([^<]*)</.exec(html)?.[1],
      warning: html.includes('data-testid="localhost-warning"'),
    });
    const meta = await freshConsent(new Agent(h.url), {
      client_id: "https://meta.example/client.json",
      redirect_uri: "https://cb.meta-tool.example/done",
    });
    expect(hostsOf(meta.html)).toEqual({
      client: "meta.example",
      redirect: "cb.meta-tool.example",
      warning: false,
    });
    const vendor = await freshConsent(new Agent(h.url), { client_id: "vendor-app" });
    expect(hostsOf(vendor.html)).toEqual({
      client: "vendor.example",
      redirect: "app.example",
      warning: false,
    });
    const local = await freshConsent(new Agent(h.url), {
      client_id: "v6",
      redirect_uri: "http://[::1]:1234/cb",
    });
    expect(hostsOf(local.html)).toEqual({ client: undefined, redirect: "[::1]:1234", warning: true });
  });

  it("a script-bearing client name is escaped in the HTML", async () => {
    const agent = new Agent(h.url);
    const { html } = await freshConsent(agent, { client_id: "xss", redirect_uri: "https://xss.example/cb" });
    expect(html).not.toContain("<script>window");
    expect(html).not.toContain("<img src=x");
    expect(html).toContain("&lt;script&gt;window.__xss=1&lt;/script&gt;");
    expect(html).toContain("registered itself");
  });

  it("other methods get 405; storage outage gets 503", async () => {
    expect((await fetch(`${h.url}/consent`, { method: "DELETE" })).status).toBe(405);
    const failing = new Proxy(h.store, {
      get(target, prop, receiver) {
        if (prop === "getInteraction") return () => Promise.reject(new StorageUnavailableError("db down"));
        return Reflect.get(target, prop, receiver);
      },
    });
    const ctx: ServerContext = { ...h.ctx, store: failing };
    const r = await handleConsent(new Request(`${h.url}/consent?interaction=${"A".repeat(22)}`), ctx, {});
    expect(r.status).toBe(503);
    expect(await r.text()).not.toContain("db down");
  });
});

describe("account page (/account)", () => {
  it("lists consents, withdraws one (revoking its grants), and signs out", async () => {
    const agent = new Agent(h.url);
    const { fields, user } = await freshConsent(agent, {
      client_id: "v6",
      redirect_uri: "http://[::1]:9999/cb",
    });
    const approved = await agent.post("/consent", { ...fields, decision: "approve" });
    const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;
    const grantId = (await storedCode(code)).grantId;
    expect((await h.store.getGrant(grantId))!.revokedAt).toBeUndefined();

    const page = await agent.get("/account");
    const html = await page.text();
    expect(html).toContain('data-testid="consent-row"');
    const rowFields = [...html.matchAll(/<form method="post" action="\/account">([\s\S]*?)<\/form>/g)].map(
      (m) => hiddenFields(m[1]!),
    );
    // The row's button opens a review (nothing changes); the review's form withdraws.
    const review = await (
      await agent.get(`/account?${reviewQuery(html, "withdraw", { client_id: "v6" })}`)
    ).text();
    expect(await h.store.getConsent(user.id, "v6", "http://[::1]/cb")).toBeDefined();
    const revoke = formFor(review, "revoke").fields;
    expect(revoke.redirect_uri).toBe("http://[::1]/cb");
    expect((await agent.post("/account", { ...revoke, csrf: "forged" })).status).toBe(403);
    expect(await h.store.getConsent(user.id, "v6", "http://[::1]/cb")).toBeDefined();
    const done = await agent.post("/account", revoke);
    expect(done.status).toBe(303);
    expect(await h.store.getConsent(user.id, "v6", "http://[::1]/cb")).toBeUndefined();
    expect((await h.store.getGrant(grantId))!.revokedAt).toBeDefined();

    const signOut = rowFields.find((f) => f.action === "logout")!;
    const session = agent.cookies.get("gatehouse_session")!;
    const out = await agent.post("/account", signOut);
    expect(out.status).toBe(303);
    expect(out.headers.getSetCookie()[0]).toMatch(/^gatehouse_session=; .*Max-Age=0/);
    expect(await h.store.getSession(sha256Base64url(session), Date.now())).toBeUndefined();
    // The answer to the sign-out says so; the account page alone says only that nobody is signed in.
    expect(await (await agent.get(out.headers.get("location")!)).text()).toContain("You are signed out");
    const later = await (await agent.get("/account")).text();
    expect(later).toContain("You are not signed in");
    expect(later).not.toContain("signed out");
  });

  it("/logout, the page's first address, still works: GET → 303 /account, the sign-out POST signs out", async () => {
    const agent = new Agent(h.url);
    await freshConsent(agent);
    const old = await agent.get("/logout");
    expect(old.status).toBe(303);
    expect(old.headers.get("location")).toBe("/account");
    expectSecurityHeaders(old);
    const { fields } = formFor(await (await agent.get("/account")).text(), "logout");
    expect((await agent.post("/logout", { ...fields, csrf: "forged" })).status).toBe(403);
    const session = agent.cookies.get("gatehouse_session")!;
    const out = await agent.post("/logout", { ...fields, action: "logout" });
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/account?done=signed-out");
    expect(await h.store.getSession(sha256Base64url(session), Date.now())).toBeUndefined();
    expect((await fetch(`${h.url}/logout`, { method: "DELETE" })).status).toBe(405);
  });
});
