/**
 * Issue 26: the admin page's destructive buttons (revoke a grant, revoke a consent, delete a
 * client) acted on one click, and the notice after a revocation said its access tokens "no longer
 * work", which is not true at a resource server that verifies JWTs itself. Now each button opens a
 * review (a GET: nothing changes) that says exactly what will happen, with the access-token
 * lifetime in seconds, and a POST form (CSRF token) that acts, or Cancel. No script is involved.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../../support/browser.js";
import { Browser, hiddenFields } from "../../support/flow.js";
import {
  type AdminServer,
  CLIENT_ID,
  obtainGrant,
  REDIRECT_URI,
  signInForAdmin,
  startAdminServer,
  tryRefresh,
} from "./admin-server.js";

let t: AdminServer;
let admin: Browser;
/** alice's browser, signed in by her first flow. */
const user = new Browser();

beforeAll(async () => {
  t = await startAdminServer();
  admin = (await signInForAdmin(t, t.admin)).browser;
});
afterAll(async () => {
  await t?.close();
});

async function get(path: string): Promise<{ status: number; html: string }> {
  const response = await admin.request(`${t.url}${path}`);
  return { status: response.status, html: await response.text() };
}

/** The forms of a page: method, action and hidden fields. */
function forms(
  html: string,
): { method: string; action: string; fields: Record<string, string>; button: string }[] {
  return html
    .split("<form")
    .slice(1)
    .map((chunk) => {
      const form = `<form${chunk.split("</form>")[0]}`;
      return {
        method: /method="([^"]+)"/.exec(form)?.[1] ?? "get",
        action: /action="([^"]+)"/.exec(form)?.[1] ?? "",
        fields: hiddenFields(form),
        button: /<button[^>]*>([^<]*)<\/button>/.exec(form)?.[1] ?? "",
      };
    });
}

/** Follows the table's button for `name=value`: a GET form to the review. */
async function review(name: string, value: string): Promise<{ status: number; html: string }> {
  const button = forms((await get("/admin")).html).find((f) => f.fields[name] === value);
  expect(button, `a button for ${name}=${value}`).toBeDefined();
  expect(button!.method).toBe("get");
  expect(button!.fields.csrf).toBeUndefined();
  return get(`${button!.action}?${new URLSearchParams(button!.fields)}`);
}

describe("destructive admin actions are reviewed first", () => {
  it("revoke grant: the review changes nothing and says what happens, with the access-token lifetime; its form acts", async () => {
    const { grant, refreshToken } = await obtainGrant(t, t.user, user);
    const page = await review("grant_id", grant.grantId);
    expect(page.status).toBe(200);
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeUndefined();
    expect(page.html).toContain('data-testid="review"');
    expect(page.html).toContain("refresh tokens stop working at once");
    expect(page.html).toMatch(/until it expires, at most 300 s/);
    expect(page.html).toContain("introspection");
    expect(page.html).not.toMatch(/<script/i);
    const act = forms(page.html).find((f) => f.method === "post" && f.fields.action === "revoke-grant");
    expect(act?.fields.grant_id).toBe(grant.grantId);
    expect(act?.fields.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(page.html).toContain('data-testid="cancel"');

    const done = await admin.postForm(`${t.url}/admin`, act!.fields);
    expect(done.status).toBe(303);
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeDefined();
    expect(await tryRefresh(t, refreshToken)).toEqual({ status: 400, error: "invalid_grant" });
    const notice = (await get(done.headers.get("location")!)).html;
    expect(notice).not.toContain("refresh and access tokens no longer work");
    expect(notice).toMatch(/at most 300 s/);
  });

  it("revoke consent and delete client: reviewed, nothing changed until the review's form is sent", async () => {
    await obtainGrant(t, t.user, user);
    const consentReview = await review("redirect_uri", REDIRECT_URI);
    expect(consentReview.html).toContain("asked again");
    expect(await t.store.getConsent(t.user.id, CLIENT_ID, REDIRECT_URI)).toBeDefined();

    const clientReview = await review("client_id", CLIENT_ID);
    expect(clientReview.html).toContain("active grant");
    expect(await t.store.getClient(CLIENT_ID)).toBeDefined();
    const act = forms(clientReview.html).find(
      (f) => f.method === "post" && f.fields.action === "delete-client",
    );
    expect(act?.fields.client_id).toBe(CLIENT_ID);
  });

  it("a review of a record that is gone says so and offers nothing to send", async () => {
    const page = await get("/admin?review=revoke-grant&grant_id=no-such-grant");
    expect(page.status).toBe(200);
    expect(page.html).toContain("Nothing changed: that record no longer exists.");
    expect(forms(page.html).some((f) => f.method === "post" && f.fields.grant_id === "no-such-grant")).toBe(
      false,
    );
  });
});

describe("the events list", () => {
  it("names users by username, not by their id", async () => {
    const html = (await get("/admin")).html;
    const events = html.split("<tr").filter((r) => r.includes('data-testid="event-row"'));
    const logins = events.filter((r) => r.includes('data-event-type="login_succeeded"'));
    expect(logins.some((r) => r.includes(`user ${t.admin.username}`))).toBe(true);
    for (const id of [t.admin.id, t.user.id]) expect(events.join("")).not.toContain(id);
  });
});

describe("the review in Chromium, at 1280 and 375 px", () => {
  it("reads as one block above the lists, fits the narrow screen, and its button revokes", async () => {
    const { grant } = await obtainGrant(t, t.user, user);
    const chromium = await launchChromium();
    try {
      for (const width of [1280, 375]) {
        const context = await chromium.newContext({ viewport: { width, height: 900 } });
        const page = await context.newPage();
        await page.goto(`${t.url}/admin`);
        await page.getByLabel("Username").fill(t.admin.username);
        await page.getByLabel("Password").fill(t.admin.password);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.waitForURL((u) => u.pathname === "/admin");
        await page
          .locator(`[data-grant-id="${grant.grantId}"]`)
          .getByRole("button", { name: "Revoke grant" })
          .click();
        await page.waitForURL((u) => u.searchParams.get("review") === "revoke-grant");
        const box = await page.getByTestId("review").boundingBox();
        expect(box!.x).toBeGreaterThanOrEqual(0);
        expect(box!.x + box!.width).toBeLessThanOrEqual(width);
        await page.screenshot({ path: `/tmp/admin-review-${width}.png` });
        if (width === 375) {
          await page.getByTestId("review").getByRole("button", { name: "Revoke grant" }).click();
          await page.waitForURL((u) => u.searchParams.get("done") === "grant-revoked");
          await page.screenshot({ path: "/tmp/admin-revoked-375.png" });
          expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeDefined();
        }
        await context.close();
      }
    } finally {
      await chromium.close();
    }
  }, 60_000);
});
