/**
 * The admin page in real headless Chromium against a complete authorization server on 127.0.0.1:
 * sign-in through the login page, the lists, revoking a grant (its refresh token then fails at
 * /token), 403 for a non-administrator, a cross-site form without the CSRF token refused, and
 * framing blocked. A third "attacker" origin on 127.0.0.1 is same-site, so SameSite=Lax cookies do
 * reach the server from it: only the CSRF token and the framing headers stand in the way.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { launchChromium, openFramingPage } from "../../support/browser.js";
import { Browser as HttpBrowser } from "../../support/flow.js";
import { type AdminServer, obtainGrant, startAdminServer, tryRefresh } from "./admin-server.js";

let t: AdminServer;
let browser: Browser;
let attacker: ListeningServer;
/** What the attacker's page shows: set by each test before it navigates there. */
let attackerPage = "";
/** alice's cookie jar for the grants the tests create over HTTP. */
const alice = new HttpBrowser();

beforeAll(async () => {
  t = await startAdminServer();
  attacker = await listen(async (request) => {
    if (new URL(request.url).pathname === "/framable") {
      return new Response("<!doctype html><title>ok</title><p id=ok>framable</p>", {
        headers: { "content-type": "text/html" },
      });
    }
    return new Response(attackerPage, { headers: { "content-type": "text/html" } });
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([t?.close(), attacker?.close()]);
});

async function signInAsAdmin(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${t.url}/admin`);
  expect(new URL(page.url()).pathname).toBe("/login");
  await page.getByLabel("Username").fill(t.admin.username);
  await page.getByLabel("Password").fill(t.admin.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => u.pathname === "/admin");
  return page;
}

describe("the admin page in Chromium", () => {
  it("an administrator signs in, sees the lists and revokes a grant; its refresh token then fails", async () => {
    const { grant, refreshToken } = await obtainGrant(t, t.user, alice);
    // From another browser (sign-in): a grant of the same sign-in that covers the first would supersede it.
    await obtainGrant(t, t.user, new HttpBrowser(), "notes:write offline_access");
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await signInAsAdmin(context);
    await expect(page.getByTestId("username").textContent()).resolves.toBe(t.admin.username);
    const clientRows = page.getByTestId("client-row");
    await expect(clientRows.count()).resolves.toBeGreaterThanOrEqual(2);
    await expect(
      page.locator('[data-client-id="notes-cli"] [data-testid="client-source"]').textContent(),
    ).resolves.toBe("pre-registered");
    await expect(
      page
        .locator('[data-client-id="https://tools.example/client.json"] [data-testid="client-source"]')
        .textContent(),
    ).resolves.toBe("metadata document");
    await expect(page.getByTestId("user-row").count()).resolves.toBe(2);
    await expect(page.getByTestId("consent-row").count()).resolves.toBeGreaterThanOrEqual(1);
    const row = page.locator(`[data-grant-id="${grant.grantId}"]`);
    await expect(row.getAttribute("data-status")).resolves.toBe("active");
    await page.screenshot({ path: "/tmp/admin.png", fullPage: true });

    // The button opens a review (nothing revoked yet); its own button revokes.
    await row.getByRole("button", { name: "Revoke" }).click();
    await page.waitForURL((u) => u.searchParams.get("review") === "revoke-grant");
    await expect(row.getAttribute("data-status")).resolves.toBe("active");
    await page.getByTestId("review").getByRole("button", { name: "Revoke grant" }).click();
    await page.waitForURL((u) => u.pathname === "/admin" && u.searchParams.get("done") === "grant-revoked");
    await expect(page.getByTestId("notice").textContent()).resolves.toContain("Grant revoked");
    await expect(
      page.locator(`[data-grant-id="${grant.grantId}"]`).getAttribute("data-status"),
    ).resolves.toBe("revoked");
    await expect(page.locator(`[data-grant-id="${grant.grantId}"] button`).count()).resolves.toBe(0);
    expect(await tryRefresh(t, refreshToken)).toEqual({ status: 400, error: "invalid_grant" });

    // The client's recent audit events: the revocation just made is the newest.
    await page.locator('[data-client-id="notes-cli"] [data-testid="client-events-link"]').click();
    await page.waitForURL((u) => u.searchParams.get("client") === "notes-cli");
    const types = await page
      .getByTestId("event-row")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-event-type")));
    expect(types[0]).toBe("grant_revoked");
    expect(types).toEqual([
      "grant_revoked",
      "grant_issued",
      "consent_granted",
      "grant_issued",
      "consent_granted",
    ]);
    await page.getByTestId("events-heading").screenshot({ path: "/tmp/admin-events-heading.png" });
    await page.screenshot({ path: "/tmp/admin-events.png", fullPage: true });
    await context.close();
  });

  it("a signed-in user who is not an administrator gets 403", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${t.url}/admin`);
    await page.getByLabel("Username").fill(t.user.username);
    await page.getByLabel("Password").fill(t.user.password);
    const [response] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === "/admin" && r.request().method() === "GET"),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    expect(response.status()).toBe(403);
    await expect(page.locator("h1").textContent()).resolves.toBe("Administrators only");
    await expect(page.getByTestId("grant-row").count()).resolves.toBe(0);
    await context.close();
  });

  it("a form on another site without the CSRF token is refused and changes nothing", async () => {
    const { grant, refreshToken } = await obtainGrant(t, t.user, alice);
    const context = await browser.newContext();
    const admin = await signInAsAdmin(context);
    await admin.close();
    attackerPage = `<!doctype html><title>win a prize</title>
<form method="post" action="${t.url}/admin">
<input type="hidden" name="action" value="revoke-grant">
<input type="hidden" name="grant_id" value="${grant.grantId}">
<button type="submit">Claim prize</button></form>`;
    const page = await context.newPage();
    await page.goto(`${attacker.url}/`);
    const [response] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === "/admin"),
      page.getByRole("button", { name: "Claim prize" }).click(),
    ]);
    expect(response.status()).toBe(403);
    await expect(page.locator("h1").textContent()).resolves.toBe("Request refused");
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeUndefined();
    expect((await tryRefresh(t, refreshToken)).status).toBe(200);
    await context.close();
  });

  it("framing the admin page from another origin is blocked", async () => {
    const context = await browser.newContext();
    const admin = await signInAsAdmin(context);
    await admin.close();
    attackerPage = `<!doctype html><title>attacker</title>
<iframe id="target" src="${t.url}/admin" width="900" height="600"></iframe>
<iframe id="control" src="${attacker.url}/framable" width="200" height="200"></iframe>`;
    // The control frame from the attacker origin renders, so only the framing rules stop this one.
    const { target: frame } = await openFramingPage(context, `${attacker.url}/`);
    expect(frame).toBeDefined();
    await frame!.waitForLoadState().catch(() => {});
    expect(
      await frame!
        .locator("button, form, table")
        .count()
        .catch(() => 0),
    ).toBe(0);
    await context.close();
  });
});
