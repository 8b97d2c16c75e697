/**
 * Defence in depth for the pages' POSTs (login, consent, account/logout, admin): a POST whose
 * `Origin` is present and not the issuer's origin, or whose `Sec-Fetch-Site` says another site,
 * is refused with a 403 page before the form is looked at, so nothing changes; a POST with neither
 * header still relies on the CSRF token. Over real HTTP against a complete authorization server.
 *
 * The forms in these tests carry VALID CSRF tokens and cookies: the headers are the only thing
 * that differs, so each refusal is this defence's and nothing else's.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crossSitePost } from "../../../src/authorization-server/browser/cross-site-post.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { Browser, hiddenFields, pkcePair } from "../../support/flow.js";
import { formFor } from "../../support/page-forms.js";
import {
  type AdminServer,
  CLIENT_ID,
  PASSWORD,
  REDIRECT_URI,
  RESOURCE,
  signInForAdmin,
  startAdminServer,
} from "../pages/admin-server.js";

let t: AdminServer;
let passwordHash: string;
/** The issuer's origin, as a browser would write it in `Origin`. */
let origin: string;

beforeAll(async () => {
  t = await startAdminServer();
  origin = new URL(t.url).origin;
  passwordHash = await hashPassword(PASSWORD);
});
afterAll(async () => {
  await t?.close();
});

/** Header sets a cross-site (or unknown) sender produces; every one must be refused. */
function hostileHeaders(): [string, Record<string, string>][] {
  const port = Number(new URL(t.url).port);
  return [
    ["an Origin of another site", { origin: "http://evil.example" }],
    [
      "an Origin of another port on the issuer's host",
      { origin: `http://127.0.0.1:${port === 65535 ? 1 : port + 1}` },
    ],
    ["an Origin that merely starts with the issuer's", { origin: `${origin}.evil.example` }],
    ["the issuer's host over https", { origin: origin.replace("http:", "https:") }],
    ["the issuer's origin with a trailing slash", { origin: `${origin}/` }],
    ["the issuer's origin in upper case", { origin: origin.toUpperCase() }],
    ["Sec-Fetch-Site: cross-site", { "sec-fetch-site": "cross-site" }],
    ["Sec-Fetch-Site: same-site", { "sec-fetch-site": "same-site" }],
    ["an unknown Sec-Fetch-Site", { "sec-fetch-site": "somewhere-else" }],
    ["the issuer's Origin but Sec-Fetch-Site: cross-site", { origin, "sec-fetch-site": "cross-site" }],
    ["Origin: null from a sandboxed cross-site frame", { origin: "null", "sec-fetch-site": "cross-site" }],
  ];
}

/** Header sets of this server's own pages and of clients without the headers; accepted. */
function acceptedHeaders(): [string, Record<string, string>][] {
  return [
    ["neither header (curl, older browsers)", {}],
    ["the issuer's Origin", { origin }],
    ["the issuer's Origin and Sec-Fetch-Site: same-origin", { origin, "sec-fetch-site": "same-origin" }],
    // Our pages send Referrer-Policy: no-referrer, so browsers send `Origin: null` on our own forms.
    ["Origin: null with Sec-Fetch-Site: same-origin", { origin: "null", "sec-fetch-site": "same-origin" }],
    ["Sec-Fetch-Site: none (a request the user made directly)", { "sec-fetch-site": "none" }],
  ];
}

function post(browser: Browser, path: string, form: Record<string, string>, headers: Record<string, string>) {
  return browser.request(`${t.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(form).toString(),
  });
}

async function expectRefused(response: Response, what: string): Promise<void> {
  expect(response.status, what).toBe(403);
  expect(response.headers.get("location"), what).toBeNull();
  expect(response.headers.getSetCookie(), what).toEqual([]);
  expect(response.headers.get("content-type"), what).toContain("text/html");
  expect(response.headers.get("x-frame-options"), what).toBe("DENY");
  const html = await response.text();
  expect(html, what).toContain("sent from another site");
  expect(html, what).not.toContain("csrf");
}

async function newUser(): Promise<{ id: string; username: string; password: string }> {
  const user = { id: randomUUID(), username: `u-${randomUUID().slice(0, 8)}`, password: PASSWORD };
  await t.store.createUser({
    id: user.id,
    username: user.username,
    passwordHash,
    isAdmin: false,
    createdAt: Date.now(),
  });
  return user;
}

/** GET /authorize then the login page: the browser holds the interaction cookie; returns the login form. */
async function startFlow(browser: Browser): Promise<Record<string, string>> {
  const query = new URLSearchParams({
    response_type: "code",
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: "notes:read",
    state: "s-1",
  });
  // The client sends the browser here from its own site: GETs are navigations and stay allowed.
  const start = await browser.request(`${t.url}/authorize?${query}`, {
    headers: { origin: "http://client.example", "sec-fetch-site": "cross-site" },
  });
  expect(start.status).toBe(303);
  const login = await browser.request(new URL(start.headers.get("location")!, t.url).href, {
    headers: { "sec-fetch-site": "cross-site" },
  });
  expect(login.status).toBe(200);
  return hiddenFields(await login.text());
}

/** Signs a fresh user in and opens the consent page; returns its form and the user. */
async function atConsent(browser: Browser) {
  const user = await newUser();
  const loginForm = await startFlow(browser);
  const done = await post(
    browser,
    "/login",
    { ...loginForm, username: user.username, password: user.password },
    {},
  );
  expect(done.status).toBe(303);
  const consent = await browser.request(new URL(done.headers.get("location")!, t.url).href);
  expect(consent.status).toBe(200);
  return { user, form: hiddenFields(await consent.text()) };
}

describe("consent POSTs", () => {
  it("refuses every cross-site approval (403 page, no redirect, no code, no consent stored); the form still works after", async () => {
    const browser = new Browser();
    const { user, form } = await atConsent(browser);
    for (const [what, headers] of hostileHeaders()) {
      await expectRefused(await post(browser, "/consent", { ...form, decision: "approve" }, headers), what);
      // A cross-site denial would end the interaction: refused the same way.
      await expectRefused(
        await post(browser, "/consent", { ...form, decision: "deny" }, headers),
        `deny, ${what}`,
      );
    }
    expect(await t.store.listConsents(user.id)).toEqual([]);
    // Nothing was consumed: the same form, sent by the page itself, completes the flow.
    const approved = await post(
      browser,
      "/consent",
      { ...form, decision: "approve" },
      { origin, "sec-fetch-site": "same-origin" },
    );
    expect(approved.status).toBe(303);
    const location = new URL(approved.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(location.searchParams.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await t.store.listConsents(user.id)).toHaveLength(1);
  });

  it("accepts its own pages' POSTs and POSTs without the headers (the CSRF token decides those)", async () => {
    for (const [what, headers] of acceptedHeaders()) {
      const browser = new Browser();
      const { form } = await atConsent(browser);
      const approved = await post(browser, "/consent", { ...form, decision: "approve" }, headers);
      expect(approved.status, what).toBe(303);
      expect(new URL(approved.headers.get("location")!).searchParams.get("code"), what).toBeTruthy();
    }
  });

  it("without the headers, a wrong CSRF token is still refused", async () => {
    const browser = new Browser();
    const { form } = await atConsent(browser);
    const forged = await post(
      browser,
      "/consent",
      { ...form, csrf: "x".repeat(43), decision: "approve" },
      {},
    );
    expect(forged.status).toBe(403);
    expect(await forged.text()).not.toContain("sent from another site");
  });
});

describe("login, logout and admin POSTs", () => {
  it("login: a cross-site sign-in is refused and sets no session; the same form then signs in", async () => {
    const user = await newUser();
    const browser = new Browser();
    const form = await startFlow(browser);
    for (const [what, headers] of hostileHeaders()) {
      await expectRefused(
        await post(browser, "/login", { ...form, username: user.username, password: user.password }, headers),
        what,
      );
    }
    const done = await post(
      browser,
      "/login",
      { ...form, username: user.username, password: user.password },
      {
        origin,
        "sec-fetch-site": "same-origin",
      },
    );
    expect(done.status).toBe(303);
    expect(new URL(done.headers.get("location")!, t.url).pathname).toBe("/consent");
  });

  it("account page: a cross-site logout is refused and the session stays; the page's own logout works", async () => {
    const browser = new Browser();
    await atConsent(browser);
    const account = await browser.request(`${t.url}/account`);
    expect(account.status).toBe(200);
    const form = formFor(await account.text(), "logout").fields;
    for (const [what, headers] of hostileHeaders()) {
      await expectRefused(await post(browser, "/account", { ...form, action: "logout" }, headers), what);
      // The former address takes the same POSTs, so it refuses the same way.
      await expectRefused(await post(browser, "/logout", { ...form, action: "logout" }, headers), what);
    }
    const still = await browser.request(`${t.url}/account`);
    expect(await still.text()).toContain("Your account");
    const out = await post(
      browser,
      "/account",
      { ...form, action: "logout" },
      { origin, "sec-fetch-site": "same-origin" },
    );
    expect(out.status).toBe(303);
  });

  it("admin: a cross-site delete is refused and the client stays; the page's own delete works", async () => {
    const registered = await fetch(`${t.url}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Doomed",
        redirect_uris: ["http://127.0.0.1:9/cb"],
        token_endpoint_auth_method: "none",
      }),
    });
    const { client_id: clientId } = (await registered.json()) as { client_id: string };
    const { browser } = await signInForAdmin(t, t.admin);
    // The table's Delete button opens a review; its form carries the CSRF token.
    const page = await (
      await browser.request(`${t.url}/admin?review=delete-client&client_id=${clientId}`)
    ).text();
    const csrf = hiddenFields(page).csrf!;
    const form = { csrf, action: "delete-client", client_id: clientId };
    for (const [what, headers] of hostileHeaders()) {
      await expectRefused(await post(browser, "/admin", form, headers), what);
    }
    expect(await t.store.getClient(clientId)).toBeDefined();
    const deleted = await post(browser, "/admin", form, { origin, "sec-fetch-site": "same-origin" });
    expect(deleted.status).toBe(303);
    expect(await t.store.getClient(clientId)).toBeUndefined();
  });

  it("the refusal's reason names the header and at most an origin, never a path or query", () => {
    const request = (headers: Record<string, string>) =>
      new Request(`${t.url}/login`, { method: "POST", headers });
    expect(crossSitePost(request({ origin: "http://evil.example/cb?code=abc" }), t.url)).toEqual({
      header: "origin",
      value: "http://evil.example",
    });
    expect(crossSitePost(request({ origin: "not a url, code=abc" }), t.url)).toEqual({
      header: "origin",
      value: "(malformed)",
    });
    expect(crossSitePost(request({ "sec-fetch-site": "cross-site" }), t.url)).toEqual({
      header: "sec-fetch-site",
      value: "cross-site",
    });
    expect(crossSitePost(request({ origin, "sec-fetch-site": "same-origin" }), t.url)).toBeUndefined();
  });

  it("GETs are navigations: a page reached from another site still renders", async () => {
    const browser = new Browser();
    const response = await browser.request(`${t.url}/login`, {
      headers: { origin: "http://evil.example", "sec-fetch-site": "cross-site" },
    });
    expect(response.status).toBe(200);
  });
});
