/**
 * A real cross-origin form in real Chromium, auto-submitting an approval to the consent endpoint
 * while the victim's consent page is open. The attacker's form carries the victim's valid CSRF
 * token and interaction id (the worst case: they leaked), so only the `Origin` / `Sec-Fetch-Site`
 * check stands in the way:
 *
 * - from another port of the server's own host (127.0.0.1, the same *site*): Chromium sends the
 *   SameSite=Lax cookies along, so without the check the approval would go through;
 * - from another loopback address (127.0.0.2, another site): refused the same way.
 *
 * Afterwards the victim's own page still completes the flow (Chromium sends `Origin: null` there,
 * because the pages set `Referrer-Policy: no-referrer`, and `Sec-Fetch-Site: same-origin`).
 */
import type { Browser, Page, Request as PlaywrightRequest } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { launchChromium } from "../../support/browser.js";
import { authorizeUrl, type Harness, startHarness } from "./harness.js";

let h: Harness;
let client: ListeningServer;
let sameSiteAttacker: ListeningServer;
let crossSiteAttacker: ListeningServer;
let browser: Browser;
let callback: string;
const received: URL[] = [];
/** The form the attacker pages auto-submit (set by each test). */
let attackFields: Record<string, string> = {};

function attackPage(): Response {
  const inputs = Object.entries({ ...attackFields, decision: "approve" })
    .map(([name, value]) => `<input type="hidden" name="${name}" value="${value.replace(/"/g, "&quot;")}">`)
    .join("\n");
  const html = `<!doctype html><title>win a prize</title>
<form id="f" method="post" action="${h.url}/consent">${inputs}</form>
<script>document.getElementById("f").submit()</script>`;
  return new Response(html, { headers: { "content-type": "text/html" } });
}

beforeAll(async () => {
  client = await listen(async (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/callback") received.push(url);
    return new Response("<!doctype html><title>client</title><p id=ok>client got the response</p>", {
      headers: { "content-type": "text/html" },
    });
  });
  callback = `${client.url}/callback`;
  sameSiteAttacker = await listen(async () => attackPage());
  crossSiteAttacker = await listen(async () => attackPage(), { host: "127.0.0.2" });
  h = await startHarness({ redirectUris: [callback] });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([h?.close(), client?.close(), sameSiteAttacker?.close(), crossSiteAttacker?.close()]);
});

/** Signs a fresh user in through the login page and stops at the consent page. */
async function openConsent(page: Page, clientId: string): Promise<void> {
  await page.goto(authorizeUrl(h.url, { client_id: clientId, redirect_uri: callback, scope: "notes:read" }));
  const user = await h.newUser();
  await page.getByLabel("Username").fill(user.username);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => u.pathname === "/consent");
}

async function consentFields(page: Page): Promise<Record<string, string>> {
  const pairs = await page
    .locator('form input[type="hidden"]')
    .evaluateAll((inputs) =>
      inputs.map((i) => [(i as HTMLInputElement).name, (i as HTMLInputElement).value]),
    );
  return Object.fromEntries(pairs);
}

describe("a cross-origin form auto-submitting to /consent in Chromium", () => {
  for (const [label, attacker, expectedFetchSite] of [
    ["another port of the same host (same site: Lax cookies flow)", () => sameSiteAttacker, "same-site"],
    ["another loopback address (another site)", () => crossSiteAttacker, "cross-site"],
  ] as const) {
    it(`from ${label}: refused with the 403 page, no code reaches the client, the victim's own page still works`, async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const clientId = await h.newClient({ redirectUris: [callback] });
      await openConsent(page, clientId);
      const consentUrl = page.url();
      attackFields = await consentFields(page);
      expect(attackFields.csrf).toBeTruthy();

      const posts: PlaywrightRequest[] = [];
      page.on("request", (r) => {
        if (r.method() === "POST") posts.push(r);
      });
      const before = received.length;
      const attackerUrl = `${attacker().url}/prize`;
      const refused = page.waitForResponse(
        (r) => r.url() === `${h.url}/consent` && r.request().method() === "POST",
      );
      await page.goto(attackerUrl);
      const response = await refused;
      await page.waitForLoadState("load");

      // What Chromium really sent: the attacker's origin, and the site relation the test is about.
      const headers = await posts[0]!.allHeaders();
      expect(headers.origin).toBe(new URL(attackerUrl).origin);
      expect(headers["sec-fetch-site"]).toBe(expectedFetchSite);

      expect(response.status()).toBe(403);
      expect(page.url()).toBe(`${h.url}/consent`);
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Request refused");
      await expect(page.getByTestId("error-message").textContent()).resolves.toContain(
        "sent from another site",
      );
      await page.screenshot({ path: `/tmp/cross-site-refused-${expectedFetchSite}.png`, fullPage: true });
      expect(received.length).toBe(before);

      // The victim's own consent page, reopened, completes the flow: nothing was consumed.
      posts.length = 0;
      await page.goto(consentUrl);
      await page.getByRole("button", { name: "Allow" }).click();
      await page.waitForURL((u) => u.href.startsWith(`${callback}?`), { timeout: 15_000 });
      expect(new URL(page.url()).searchParams.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(received.length).toBe(before + 1);
      const own = await posts[0]!.allHeaders();
      expect(own["sec-fetch-site"]).toBe("same-origin");
      expect(own.origin).toBe("null");
      await context.close();
    });
  }
});
