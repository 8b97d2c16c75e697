/**
 * Issue 26: the admin page could not disable, enable, remove a user or change the administrator
 * role. Each user row now has buttons that open a review (a GET: nothing changes) saying what will
 * happen; its POST form (CSRF token) acts through user-accounts.ts. Disabling revokes the user's
 * grants (their refresh token then fails) and ends their sessions; the last enabled administrator
 * is not offered the change and a forged POST is refused. Over HTTP, then Chromium at 1280 and 375 px.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/core/audit.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { launchChromium } from "../../support/browser.js";
import { Browser, hiddenFields } from "../../support/flow.js";
import {
  type AdminServer,
  obtainGrant,
  PASSWORD,
  signInForAdmin,
  startAdminServer,
  tryRefresh,
} from "./admin-server.js";

let t: AdminServer;
let admin: Browser;
const events: AuditEvent[] = [];

beforeAll(async () => {
  t = await startAdminServer({ onAuditEvent: (e) => void events.push(e) });
  admin = (await signInForAdmin(t, t.admin)).browser;
});
afterAll(async () => {
  await t?.close();
});

async function get(browser: Browser, path: string): Promise<{ status: number; html: string }> {
  const response = await browser.request(`${t.url}${path}`);
  return { status: response.status, html: await response.text() };
}

/** The review of `change` for `userId`, as the row's button opens it. */
async function review(userId: string, change: string) {
  const page = await get(admin, "/admin");
  const row = page.html.split('data-testid="user-row"').find((r) => r.includes(`data-user-id="${userId}"`));
  expect(row, "the user's row").toBeDefined();
  const form = row!.split("<form").find((f) => f.includes(`name="change" value="${change}"`));
  expect(form, `a ${change} button`).toBeDefined();
  expect(form).toContain('method="get"');
  return get(admin, `/admin?${new URLSearchParams(hiddenFields(form!))}`);
}

/** Posts the review's action form; returns where the page sent the browser. */
async function act(html: string): Promise<string> {
  const form = html
    .split("<form")
    .find((f) => f.includes('method="post"') && f.includes('value="change-user"'));
  expect(form, "the review's action form").toBeDefined();
  const done = await admin.postForm(`${t.url}/admin`, hiddenFields(form!));
  expect(done.status).toBe(303);
  return done.headers.get("location") ?? "";
}

describe("user accounts on the admin page", () => {
  it("disable: the review changes nothing and says what happens; its form disables, revokes the grant and ends the sign-in", async () => {
    const alice = new Browser();
    const { grant, refreshToken } = await obtainGrant(t, t.user, alice);
    const page = await review(t.user.id, "disable");
    expect(page.status).toBe(200);
    expect(page.html).toContain("Disable alice?");
    expect(page.html).toContain("cannot sign in until enabled again");
    expect(page.html).toContain("Their active grant is revoked");
    expect(page.html).toMatch(/until it expires, at most 300 s/);
    expect((await t.store.getUser(t.user.id))?.disabledAt).toBeUndefined();
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeUndefined();

    expect(await act(page.html)).toContain("done=user-disable");
    expect((await t.store.getUser(t.user.id))?.disabledAt).toBeDefined();
    expect((await t.store.getGrant(grant.grantId))?.revokedAt).toBeDefined();
    expect(await tryRefresh(t, refreshToken)).toEqual({ status: 400, error: "invalid_grant" });
    expect((await get(alice, "/account")).html).not.toContain('data-testid="username"');
    const listed = await get(admin, "/admin?done=user-disable");
    expect(listed.html).toContain("User disabled: they cannot sign in");
    expect(listed.html).toMatch(/data-testid="user-status">disabled <time/);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: "user_changed",
        user_id: t.user.id,
        change: "disable",
        by: "admin",
        admin_id: t.admin.id,
        grants_revoked: 1,
        sessions_ended: 1,
      }),
    );

    expect(await act((await review(t.user.id, "enable")).html)).toContain("done=user-enable");
    expect((await t.store.getUser(t.user.id))?.disabledAt).toBeUndefined();
  });

  it("the last enabled administrator is shown why instead of a button, and a forged POST changes nothing", async () => {
    for (const change of ["disable", "remove-admin", "remove"]) {
      const page = await review(t.admin.id, change);
      expect(page.html).toContain("is the last enabled administrator");
      const section = page.html.split('data-testid="review"')[1]!.split("</section>")[0]!;
      expect(section).not.toContain('method="post"');
    }
    const csrf = hiddenFields((await review(t.user.id, "disable")).html.split('method="post"')[1]!).csrf!;
    const forged = await admin.postForm(`${t.url}/admin`, {
      csrf,
      action: "change-user",
      user_id: t.admin.id,
      change: "disable",
    });
    expect(forged.headers.get("location")).toContain("done=last-admin");
    expect((await t.store.getUser(t.admin.id))?.disabledAt).toBeUndefined();
    // Without the CSRF token nothing happens either.
    const noCsrf = await admin.postForm(`${t.url}/admin`, {
      action: "change-user",
      user_id: t.user.id,
      change: "remove",
    });
    expect(noCsrf.status).toBe(403);
    expect(await t.store.getUser(t.user.id)).toBeDefined();
  });

  it("make admin, remove the role, remove a user: each through its review", async () => {
    const bob = { id: randomUUID(), username: "bob", password: PASSWORD };
    await t.store.createUser({
      id: bob.id,
      username: bob.username,
      passwordHash: await hashPassword(PASSWORD),
      isAdmin: false,
      createdAt: Date.now(),
    });
    expect(await act((await review(bob.id, "make-admin")).html)).toContain("done=user-make-admin");
    expect((await t.store.getUser(bob.id))?.isAdmin).toBe(true);
    // Now the first administrator may step down.
    expect(await act((await review(t.admin.id, "remove-admin")).html)).toContain("done=user-remove-admin");
    expect((await t.store.getUser(t.admin.id))?.isAdmin).toBe(false);
    // And is refused the page from now on.
    expect((await get(admin, "/admin")).status).toBe(403);
    const bobBrowser = (await signInForAdmin(t, bob)).browser;
    admin = bobBrowser;
    expect(await act((await review(t.admin.id, "make-admin")).html)).toContain("done=user-make-admin");
    const removal = await review(bob.id, "remove");
    expect(removal.html).toContain("The account is deleted with its consents");
    expect(await act(removal.html)).toContain("done=user-remove");
    expect(await t.store.getUser(bob.id)).toBeUndefined();
    admin = (await signInForAdmin(t, t.admin)).browser;
  });
});

describe("the users table and a review in Chromium, at 1280 and 375 px", () => {
  it("fits the screen and its review's button disables", async () => {
    const carol = { id: randomUUID(), username: "carol.with-a-long-name@example.com" };
    await t.store.createUser({
      ...carol,
      passwordHash: await hashPassword(PASSWORD),
      isAdmin: false,
      createdAt: Date.now(),
    });
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
        await page.getByTestId("users").screenshot({ path: `/tmp/admin-users-${width}.png` });
        await page.locator(`[data-user-id="${carol.id}"]`).getByRole("button", { name: "Disable…" }).click();
        await page.waitForURL((u) => u.searchParams.get("change") === "disable");
        const box = await page.getByTestId("review").boundingBox();
        expect(box!.x).toBeGreaterThanOrEqual(0);
        expect(box!.x + box!.width).toBeLessThanOrEqual(width);
        await page.screenshot({ path: `/tmp/admin-user-review-${width}.png` });
        if (width === 375) {
          await page.getByTestId("review").getByRole("button", { name: "Disable user" }).click();
          await page.waitForURL((u) => u.searchParams.get("done") === "user-disable");
          expect((await t.store.getUser(carol.id))?.disabledAt).toBeDefined();
        }
        await context.close();
      }
    } finally {
      await chromium.close();
    }
  }, 60_000);
});
