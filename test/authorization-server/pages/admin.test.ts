/**
 * The admin page over HTTP (fetch, redirects by hand): who may see it, what it lists, and what
 * its three buttons do to real grants, consents and clients of a complete authorization server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, hiddenFields, obtainCode, redeemCode, refreshGrant, tokenSet } from "../../support/flow.js";
import {
  type AdminServer,
  CLIENT_ID,
  METADATA_CLIENT_ID,
  obtainGrant,
  REDIRECT_URI,
  RESOURCE,
  signInForAdmin,
  startAdminServer,
  tryRefresh,
} from "./admin-server.js";

const XSS_NAME = `<script>window.__xss=1</script><img src=x onerror="alert(1)">"'&`;

let t: AdminServer;
/** The administrator's signed-in browser (one login for the whole file: login attempts are rate-limited). */
let adminBrowser: Browser;
/** alice's browser, signed in by her first flow. */
let aliceBrowser: Browser;
let dynamicClientId: string;

beforeAll(async () => {
  t = await startAdminServer();
  const signedIn = await signInForAdmin(t, t.admin);
  expect(signedIn.location).toBe("/admin");
  adminBrowser = signedIn.browser;
  aliceBrowser = new Browser();
  const registered = await fetch(`${t.url}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: XSS_NAME,
      redirect_uris: ["http://127.0.0.1:9/callback"],
      token_endpoint_auth_method: "none",
    }),
  });
  expect(registered.status).toBe(201);
  dynamicClientId = ((await registered.json()) as { client_id: string }).client_id;
});

afterAll(async () => {
  await t?.close();
});

async function adminPage(
  browser = adminBrowser,
): Promise<{ status: number; html: string; headers: Headers }> {
  const response = await browser.request(`${t.url}/admin`);
  return { status: response.status, html: await response.text(), headers: response.headers };
}

/** The hidden fields of the admin form whose hidden inputs include `name=value`. */
function formWith(html: string, name: string, value: string): Record<string, string> {
  for (const form of html.split("<form").slice(1)) {
    const fields = hiddenFields(`<form${form.split("</form>")[0]}`);
    if (fields[name] === value) return fields;
  }
  throw new Error(`no admin form with ${name}`);
}

/**
 * The POST form that acts for the table button whose hidden inputs include `name=value`: the
 * button (a GET form) opens a review, and the review carries the form (admin-confirm.test.ts).
 */
async function reviewedForm(
  name: string,
  value: string,
  browser = adminBrowser,
): Promise<Record<string, string>> {
  return reviewOf(formWith((await adminPage(browser)).html, name, value), browser);
}

async function reviewOf(
  button: Record<string, string>,
  browser = adminBrowser,
): Promise<Record<string, string>> {
  const review = await browser.request(`${t.url}/admin?${new URLSearchParams(button)}`);
  return formWith(await review.text(), "action", button.review!);
}

describe("who may see the admin page", () => {
  it("without a session: 303 to the login page, which returns to /admin after sign-in", async () => {
    const browser = new Browser();
    const start = await browser.request(`${t.url}/admin`);
    expect(start.status).toBe(303);
    expect(start.headers.get("location")).toBe("/login?return=%2Fadmin");
    const login = await browser.request(`${t.url}/login?return=%2Fadmin`);
    const fields = hiddenFields(await login.text());
    expect(fields.return).toBe("/admin");
  });

  it("login return paths other than /admin are ignored (no open redirect)", async () => {
    for (const target of [
      "https://evil.example/",
      "//evil.example/admin",
      "/admin/../logout",
      "/admin?x=1",
    ]) {
      const browser = new Browser();
      const login = await browser.request(`${t.url}/login?return=${encodeURIComponent(target)}`);
      expect(login.status).toBe(200);
      const fields = hiddenFields(await login.text());
      expect(fields.return, target).toBeUndefined();
    }
    // A forged field in the POST is ignored too: the sign-in ends at the account page.
    const browser = new Browser();
    const fields = hiddenFields(await (await browser.request(`${t.url}/login`)).text());
    const done = await browser.postForm(`${t.url}/login`, {
      ...fields,
      return: "https://evil.example/",
      username: t.user.username,
      password: t.user.password,
    });
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/account");
  });

  it("a signed-in user who is not an administrator gets 403, for GET and POST", async () => {
    const { browser, location } = await signInForAdmin(t, t.user, aliceBrowser);
    expect(location).toBe("/admin");
    const page = await adminPage(browser);
    expect(page.status).toBe(403);
    expect(page.html).toContain("Administrators only");
    expect(page.html).not.toContain("notes-cli");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const { grant } = await obtainGrant(t, t.user, aliceBrowser);
    const post = await browser.postForm(`${t.url}/admin`, {
      action: "revoke-grant",
      grant_id: grant.grantId,
    });
    expect(post.status).toBe(403);
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeUndefined();
  });

  it("security headers on the page and on its redirects: no framing, no caching, no script", async () => {
    const page = await adminPage();
    expect(page.status).toBe(200);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain("script-src");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.headers.get("referrer-policy")).toBe("no-referrer");
    expect(page.html).not.toMatch(/<script/i);
    const redirect = await new Browser().request(`${t.url}/admin`);
    expect(redirect.headers.get("x-frame-options")).toBe("DENY");
    expect(redirect.headers.get("cache-control")).toBe("no-store");
  });

  it("methods other than GET and POST get 405 with Allow", async () => {
    const response = await adminBrowser.request(`${t.url}/admin`, { method: "PUT" });
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("GET, POST");
  });
});

describe("what the admin page lists", () => {
  it("clients with their source, users without hashes, grants and consents", async () => {
    const { grant } = await obtainGrant(t, t.user, aliceBrowser);
    const { html, status } = await adminPage();
    expect(status).toBe(200);
    const row = (id: string) => html.split("<tr").find((r) => r.includes(`data-client-id="${id}"`)) ?? "";
    expect(row(CLIENT_ID)).toContain("pre-registered");
    expect(row(CLIENT_ID)).toContain("app.example");
    expect(row(METADATA_CLIENT_ID)).toContain("metadata document");
    expect(row(dynamicClientId)).toContain("dynamic registration");
    // Users: names and roles, never a password hash.
    expect(html).toContain(t.admin.username);
    expect(html).toContain(t.user.username);
    expect(html).not.toContain("scrypt$");
    const grantRow = html.split("<tr").find((r) => r.includes(`data-grant-id="${grant.grantId}"`)) ?? "";
    expect(grantRow).toContain('data-status="active"');
    expect(grantRow).toContain("alice");
    expect(grantRow).toContain("notes:read");
    expect(grantRow).toContain(RESOURCE);
    const consentRow = html
      .split("<tr")
      .find((r) => r.includes('data-testid="consent-row"') && r.includes("alice"));
    expect(consentRow).toContain(REDIRECT_URI);
  });

  it("renders a hostile client name as text (escaped), never as markup", async () => {
    const { html } = await adminPage();
    expect(html).not.toContain("<script>window.__xss");
    expect(html).not.toContain("<img src=x");
    expect(html).toContain(
      "&lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;",
    );
  });
});

describe("the admin page's buttons", () => {
  it("revoking a grant ends it: the refresh token then fails at /token with invalid_grant", async () => {
    const { grant, refreshToken } = await obtainGrant(t, t.user, aliceBrowser);
    const fields = await reviewedForm("grant_id", grant.grantId);
    expect(fields.action).toBe("revoke-grant");
    const done = await adminBrowser.postForm(`${t.url}/admin`, fields);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/admin?done=grant-revoked");
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeDefined();
    expect(await tryRefresh(t, refreshToken)).toEqual({ status: 400, error: "invalid_grant" });
    const after = await adminBrowser.request(`${t.url}${done.headers.get("location")}`);
    const html = await after.text();
    expect(html).toContain("Grant revoked");
    const row = html.split("<tr").find((r) => r.includes(`data-grant-id="${grant.grantId}"`)) ?? "";
    expect(row).toContain('data-status="revoked"');
    expect(row).not.toContain("<form");
  });

  it("CSRF: a POST without the token, or with another session's token, changes nothing (403)", async () => {
    const { grant, refreshToken } = await obtainGrant(t, t.user, aliceBrowser);
    const fields = await reviewedForm("grant_id", grant.grantId);
    const { csrf, ...withoutToken } = fields;
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const missing = await adminBrowser.postForm(`${t.url}/admin`, withoutToken);
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain("Request refused");
    // A second administrator session (another browser) has a different token; it is not accepted here.
    const other = await signInForAdmin(t, t.admin);
    const otherFields = await reviewedForm("grant_id", grant.grantId, other.browser);
    expect(otherFields.csrf).not.toBe(csrf);
    const crossed = await adminBrowser.postForm(`${t.url}/admin`, { ...fields, csrf: otherFields.csrf! });
    expect(crossed.status).toBe(403);
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeUndefined();
    // The refresh token still works (and rotates).
    expect((await tryRefresh(t, refreshToken)).status).toBe(200);
  });

  it("revoking a consent makes the next authorization ask again", async () => {
    await obtainGrant(t, t.user, aliceBrowser);
    const html = (await adminPage()).html;
    const row = html
      .split("<tr")
      .find(
        (r) => r.includes('data-testid="consent-row"') && r.includes("alice") && r.includes(REDIRECT_URI),
      );
    expect(row).toBeDefined();
    const fields = await reviewOf(hiddenFields(row!));
    expect(fields.action).toBe("revoke-consent");
    const done = await adminBrowser.postForm(`${t.url}/admin`, fields);
    expect(done.headers.get("location")).toBe("/admin?done=consent-revoked");
    expect(await t.store.getConsent(t.user.id, CLIENT_ID, REDIRECT_URI)).toBeUndefined();
    // alice is still signed in; without consent the flow stops at the consent page again.
    const start = await aliceBrowser.request(
      `${t.url}/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: CLIENT_ID,
        redirect_uri: REDIRECT_URI,
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        resource: RESOURCE,
        scope: "notes:read",
        state: "s",
      })}`,
    );
    expect(start.status).toBe(303);
    expect(new URL(start.headers.get("location")!, t.url).pathname).toBe("/consent");
    const consentPage = await aliceBrowser.request(new URL(start.headers.get("location")!, t.url).href);
    expect(consentPage.status).toBe(200);
  });

  it("deleting a client revokes its grants and consents and removes it", async () => {
    // A client of its own, so the other tests keep theirs.
    await t.store.upsertClient({
      ...(await t.store.getClient(CLIENT_ID))!,
      clientId: "doomed-client",
      clientName: "Doomed",
    });
    const options = {
      instanceFor: () => t.url,
      clientId: "doomed-client",
      redirectUri: REDIRECT_URI,
      resource: RESOURCE,
      scope: "notes:read offline_access",
      user: t.user,
      browser: aliceBrowser,
    };
    const tokens = await tokenSet(await redeemCode(t.url, options, await obtainCode(options)));
    const [grant] = await t.store.listGrants({ clientId: "doomed-client" });
    expect(grant?.revokedAt).toBeUndefined();
    expect(await t.store.getConsent(t.user.id, "doomed-client", REDIRECT_URI)).toBeDefined();
    const fields = await reviewedForm("client_id", "doomed-client");
    expect(fields.action).toBe("delete-client");
    const done = await adminBrowser.postForm(`${t.url}/admin`, fields);
    expect(done.headers.get("location")).toBe("/admin?done=client-deleted");
    expect(await t.store.getClient("doomed-client")).toBeUndefined();
    expect((await t.store.getGrant(grant!.grantId))?.revokedAt).toBeDefined();
    expect(await t.store.getConsent(t.user.id, "doomed-client", REDIRECT_URI)).toBeUndefined();
    const refresh = await refreshGrant(t.url, "doomed-client", tokens.refresh_token!);
    expect(refresh.status).not.toBe(200);
    expect((await adminPage()).html).not.toContain('data-client-id="doomed-client"');
  });

  it("an unknown action or a missing id is refused without change; a vanished record says so", async () => {
    const { grant } = await obtainGrant(t, t.user, aliceBrowser);
    const { csrf } = await reviewedForm("grant_id", grant.grantId);
    const unknown = await adminBrowser.postForm(`${t.url}/admin`, { csrf: csrf!, action: "drop-everything" });
    expect(unknown.status).toBe(400);
    const missing = await adminBrowser.postForm(`${t.url}/admin`, { csrf: csrf!, action: "revoke-grant" });
    expect(missing.status).toBe(400);
    const gone = await adminBrowser.postForm(`${t.url}/admin`, {
      csrf: csrf!,
      action: "revoke-grant",
      grant_id: "no-such-grant",
    });
    expect(gone.status).toBe(303);
    expect(gone.headers.get("location")).toBe("/admin?done=not-found");
  });
});
