/**
 * The account page (/account) and grants no consent covers: a grant approved on the device page
 * (RFC 8628 §3.3) has no redirect URI, so it is listed on its own (client, scopes in words, the day
 * granted, "on a device") and withdrawn by its grant id, which revokes its tokens at once and is
 * audited (`grant_revoked`, by "user"). Withdrawing a consent audits each grant it revokes too.
 * Hostile: another user's grant id, a made-up one, a forged CSRF token, a signed-out browser.
 * Over real HTTP on loopback, then in Chromium with a screenshot of the page.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/core/audit.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { launchChromium } from "../../support/browser.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  RESOURCE,
  redeem,
  refresh,
  signIn,
  startFlowServer,
  tokenRequest,
  USERNAME,
} from "../support/flow-server.js";
import { hiddenFields, PASSWORD } from "./harness.js";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const DEVICE_CLIENT = "tv-app";
const CODE_CLIENT = "cli";
const CODE_REDIRECT = "http://127.0.0.1/callback";
const SCREENSHOT_DIR = process.env.GATEHOUSE_SCREENSHOT_DIR ?? "/tmp/gatehouse-pages";

let server: FlowServer;
let audit: AuditEvent[];

beforeEach(async () => {
  audit = [];
  server = await startFlowServer({
    clients: [
      publicClient({
        clientId: DEVICE_CLIENT,
        clientName: "Living-room TV",
        redirectUris: [],
        responseTypes: [],
        grantTypes: [DEVICE_GRANT, "refresh_token"],
      }),
      publicClient({ clientId: CODE_CLIENT, clientName: "Notes CLI" }),
    ],
    extra: {
      scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Change your notes" },
      onAuditEvent: (event) => {
        audit.push(event);
      },
    },
  });
  await server.store.createUser({
    id: "u2",
    username: "bob",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
});

afterEach(async () => {
  await server.close();
});

function post(path: string, params: Record<string, string>) {
  return fetch(`${server.issuer}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params).toString(),
  });
}

/** A browser-like agent signed in as `username` through the login page. */
async function signedIn(username: string): Promise<Agent> {
  const agent = new Agent(server.issuer);
  const start = await agent.get("/device");
  expect(start.status).toBe(303);
  const login = start.headers.get("location")!;
  const fields = hiddenFields(await (await agent.get(login)).text());
  const done = await agent.post("/login", { ...fields, username, password: PASSWORD });
  expect(done.status).toBe(303);
  return agent;
}

/** A device asks, `agent`'s user approves on /device, the device polls: its tokens and grant id. */
async function deviceGrant(agent: Agent, scope = "notes:read notes:write") {
  const started = await post("/device_authorization", {
    client_id: DEVICE_CLIENT,
    resource: RESOURCE,
    scope,
  });
  expect(started.status).toBe(200);
  const { device_code, user_code } = (await started.json()) as { device_code: string; user_code: string };
  const entry = await agent.get("/device");
  const confirm = await agent.post("/device", { ...hiddenFields(await entry.text()), user_code });
  expect(confirm.status).toBe(200);
  const decided = await agent.post("/device", { ...hiddenFields(await confirm.text()), decision: "approve" });
  expect(decided.status).toBe(200);
  const tokens = await tokenRequest(server.issuer, {
    grant_type: DEVICE_GRANT,
    device_code,
    client_id: DEVICE_CLIENT,
  });
  expect(tokens.status).toBe(200);
  const grants = await server.store.listGrants({ clientId: DEVICE_CLIENT, active: true });
  const newest = grants.sort((a, b) => b.createdAt - a.createdAt)[0]!;
  return { refreshToken: tokens.body.refresh_token!, grantId: newest.grantId };
}

/** The hidden fields of each form on the account page. */
async function accountForms(agent: Agent): Promise<{ html: string; forms: Record<string, string>[] }> {
  const page = await agent.get("/account");
  expect(page.status).toBe(200);
  const html = await page.text();
  const postForms = (text: string) =>
    [...text.matchAll(/<form method="post" action="\/account">([\s\S]*?)<\/form>/g)].map((m) =>
      hiddenFields(m[1]!),
    );
  // Each Withdraw button opens a review (a GET that changes nothing) carrying the form that acts.
  const reviews = [...html.matchAll(/<form method="get" action="\/account">([\s\S]*?)<\/form>/g)].map((m) =>
    hiddenFields(m[1]!),
  );
  const forms = postForms(html);
  for (const review of reviews) {
    const reviewed = await agent.get(`/account?${new URLSearchParams(review)}`);
    forms.push(...postForms(await reviewed.text()));
  }
  return { html, forms };
}

function revokedBy(event: AuditEvent): boolean {
  return event.type === "grant_revoked" && event.by === "user";
}

describe("account page: grants made on a device", () => {
  it("lists the device grant with its scopes in words, and withdrawing it ends its tokens at once", async () => {
    const alice = await signedIn(USERNAME);
    const { refreshToken, grantId } = await deviceGrant(alice);

    const { html, forms } = await accountForms(alice);
    const row = html.match(/<tr data-testid="grant-row"[\s\S]*?<\/tr>/)?.[0] ?? "";
    expect(row).toContain("Living-room TV");
    expect(row).toContain("on a device · granted ");
    expect(row).toMatch(/granted <time datetime="[^"]+">\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC<\/time>/);
    expect(row).toContain('data-scope="notes:read">Read your notes <code>notes:read</code>');
    expect(row).toContain('data-scope="notes:write">Change your notes <code>notes:write</code>');
    const withdraw = forms.find((f) => f.action === "revoke-grant")!;
    expect(withdraw.grant_id).toBe(grantId);

    expect((await alice.post("/account", { ...withdraw, csrf: "forged" })).status).toBe(403);
    expect((await server.store.getGrant(grantId))!.revokedAt).toBeUndefined();
    expect(audit.filter(revokedBy)).toEqual([]);

    const done = await alice.post("/account", withdraw);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/account");
    expect((await server.store.getGrant(grantId))!.revokedAt).toBeDefined();
    const refused = await refresh(server.issuer, DEVICE_CLIENT, refreshToken);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe("invalid_grant");
    expect(audit.filter(revokedBy)).toEqual([
      expect.objectContaining({
        type: "grant_revoked",
        client_id: DEVICE_CLIENT,
        grant_id: grantId,
        by: "user",
      }),
    ]);
    const after = await accountForms(alice);
    expect(after.html).not.toContain('data-testid="grant-row"');
    expect(after.html).toContain('data-testid="no-consents"');

    // Withdrawn twice (an old tab): nothing more happens, no second event.
    expect((await alice.post("/account", withdraw)).status).toBe(303);
    expect(audit.filter(revokedBy)).toHaveLength(1);
  });

  it("refuses another user's grant id and a made-up one, changing nothing; a signed-out post does nothing", async () => {
    const alice = await signedIn(USERNAME);
    const { refreshToken, grantId } = await deviceGrant(alice);
    const bob = await signedIn("bob");
    const { forms, html } = await accountForms(bob);
    expect(html).not.toContain(grantId);
    const csrf = forms.find((f) => f.action === "logout")!.csrf!;
    for (const id of [grantId, "not-a-grant"]) {
      const answer = await bob.post("/account", { csrf, action: "revoke-grant", grant_id: id });
      expect(answer.status).toBe(404);
      expect(await answer.text()).not.toContain(grantId);
    }
    expect((await bob.post("/account", { csrf, action: "revoke-grant" })).status).toBe(400);
    expect((await bob.post("/account", { csrf, action: "revoke-grant", grant_id: "" })).status).toBe(400);
    const anonymous = new Agent(server.issuer);
    expect(
      (await anonymous.post("/account", { csrf, action: "revoke-grant", grant_id: grantId })).status,
    ).toBe(303);
    expect((await server.store.getGrant(grantId))!.revokedAt).toBeUndefined();
    expect((await refresh(server.issuer, DEVICE_CLIENT, refreshToken)).status).toBe(200);
    expect(audit.filter((e) => e.type === "grant_revoked")).toEqual([]);
  });

  it("shows a code-flow consent's scopes in words; withdrawing it audits each grant it revokes", async () => {
    const alice = new Agent(server.issuer);
    const attempt = { clientId: CODE_CLIENT, redirectUri: CODE_REDIRECT, scope: "notes:read" };
    const code = await approve(alice, await signIn(alice, attempt));
    expect((await redeem(server.issuer, CODE_CLIENT, code, CODE_REDIRECT)).status).toBe(200);
    const [grant] = await server.store.listGrants({ clientId: CODE_CLIENT, active: true });

    const { html, forms } = await accountForms(alice);
    const row = html.match(/<tr data-testid="consent-row">[\s\S]*?<\/tr>/)?.[0] ?? "";
    expect(row).toContain("Notes CLI");
    expect(row).toContain("returns to 127.0.0.1");
    expect(row).toContain('data-scope="notes:read">Read your notes <code>notes:read</code>');
    expect(row).not.toContain("on a device");
    // A consent covers the client's grants: they are not listed a second time.
    expect(html).not.toContain('data-testid="grant-row"');

    const withdraw = forms.find((f) => f.action === "revoke" && f.client_id === CODE_CLIENT)!;
    expect((await alice.post("/account", withdraw)).status).toBe(303);
    expect(audit.filter((e) => e.type === "consent_revoked")).toHaveLength(1);
    expect(audit.filter(revokedBy)).toEqual([
      expect.objectContaining({ client_id: CODE_CLIENT, grant_id: grant!.grantId, by: "user" }),
    ]);
  });
});

describe("account page with a device grant, in Chromium", () => {
  it("shows the device row and withdraws it from the button", async () => {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    const alice = await signedIn(USERNAME);
    const { grantId } = await deviceGrant(alice);
    const code = await approve(
      alice,
      await signIn(alice, { clientId: CODE_CLIENT, redirectUri: CODE_REDIRECT, scope: "notes:read" }),
    );
    expect((await redeem(server.issuer, CODE_CLIENT, code, CODE_REDIRECT)).status).toBe(200);
    const browser = await launchChromium();
    try {
      const context = await browser.newContext({ viewport: { width: 900, height: 800 } });
      const session = alice.cookies.get("gatehouse_session")!;
      await context.addCookies([{ name: "gatehouse_session", value: session, url: server.issuer }]);
      const page = await context.newPage();
      await page.goto(`${server.issuer}/account`);
      const device = page.getByTestId("grant-row");
      await expect(device.textContent()).resolves.toContain("on a device");
      await expect(page.getByTestId("consent-row").textContent()).resolves.toContain("Read your notes");
      await page.screenshot({ path: join(SCREENSHOT_DIR, "account-device-grant.png"), fullPage: true });
      // The Withdraw button does not break mid-word, and the rows keep it on the right.
      const button = device.getByRole("button", { name: "Withdraw" });
      const box = (await button.boundingBox())!;
      expect(box.height).toBeLessThan(50);
      await button.click();
      // The review: nothing changed yet; its own button withdraws.
      await page.waitForURL((u) => u.searchParams.get("review") === "withdraw-grant");
      expect((await server.store.getGrant(grantId))!.revokedAt).toBeUndefined();
      await page.screenshot({
        path: join(SCREENSHOT_DIR, "account-device-grant-review.png"),
        fullPage: true,
      });
      await page.getByTestId("review").getByRole("button", { name: "Withdraw", exact: true }).click();
      await page.waitForURL(`${server.issuer}/account`);
      expect(await page.getByTestId("grant-row").count()).toBe(0);
      expect((await server.store.getGrant(grantId))!.revokedAt).toBeDefined();
      await page.screenshot({
        path: join(SCREENSHOT_DIR, "account-device-grant-withdrawn.png"),
        fullPage: true,
      });
    } finally {
      await browser.close();
    }
  });
});
