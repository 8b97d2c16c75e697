/**
 * Issue 26: the account page's rows could not be told apart (three "Gatehouse CLI" rows, a one-off
 * port, no time, no resource). Each row now names the client, where it returns the browser (host
 * and, for this computer, the port), when it was approved and last authorized to the minute, and
 * the resource (by its name and URI). Withdraw opens a review (a GET that changes nothing) saying
 * what happens, and only its form (CSRF token) withdraws; another user's authorization is never
 * shown there. Over HTTP on loopback, then in Chromium at 1280 and 375 px.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { launchChromium } from "../../support/browser.js";
import { formFor, reviewQuery } from "../../support/page-forms.js";
import {
  Agent,
  approve,
  type FlowServer,
  RESOURCE,
  redeem,
  signIn,
  startFlowServer,
  USERNAME,
} from "../support/flow-server.js";
import { hiddenFields, PASSWORD } from "./harness.js";

const SCREENSHOT_DIR = process.env.GATEHOUSE_SCREENSHOT_DIR ?? "/tmp/gatehouse-pages";
const MINUTE = 60_000;
/** 2026-03-04 05:06 UTC: the first approval. */
const START = Date.UTC(2026, 2, 4, 5, 6);
const PORTS = [53_121, 53_122, 53_123];

let server: FlowServer;

beforeAll(async () => {
  server = await startFlowServer({ extra: { dynamicRegistration: { enabled: true } } });
  const agent = new Agent(server.issuer);
  // Three runs of one CLI, each registering itself with a loopback port of its own (as Gatehouse's
  // client does), a few minutes apart: three clients of one name.
  for (const [i, port] of PORTS.entries()) {
    server.clock.now = START + i * 7 * MINUTE;
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    const clientId = await server.register({
      client_name: "Gatehouse CLI",
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
    });
    const code = await approve(agent, await signIn(agent, { clientId, redirectUri, scope: "notes:read" }));
    expect((await redeem(server.issuer, clientId, code, redirectUri)).status).toBe(200);
  }
});
afterAll(async () => {
  await server?.close();
});

async function accountPage(agent: Agent): Promise<string> {
  return accountPageAt(agent, "/account");
}

async function accountPageAt(agent: Agent, path: string): Promise<string> {
  const response = await agent.get(path);
  expect(response.status).toBe(200);
  return response.text();
}

describe("account rows say which authorization is which", () => {
  it("each row: the client, the host and port it returns to, the minute it was approved, the resource", async () => {
    const agent = new Agent(server.issuer);
    const login = await agent.get("/login?return=/account");
    const done = await agent.post("/login", {
      ...hiddenFields(await login.text()),
      username: USERNAME,
      password: PASSWORD,
    });
    expect(done.status).toBe(303);
    const html = await accountPage(agent);
    const rows = html.split('data-testid="consent-row"').slice(1);
    expect(rows).toHaveLength(3);
    for (const [i, port] of PORTS.entries()) {
      const row = rows.find((r) => r.includes(`127.0.0.1:${port} (this computer)`));
      expect(row, `the row of port ${port}`).toBeDefined();
      expect(row).toContain("Gatehouse CLI");
      const approved = new Date(START + i * 7 * MINUTE).toISOString();
      expect(row).toContain(
        `approved <time datetime="${approved}">${approved.slice(0, 16).replace("T", " ")} UTC</time>`,
      );
      expect(row).toContain(`for Notes (<code>${RESOURCE}</code>)`);
    }
  });
});

async function signedInAgent(username: string): Promise<Agent> {
  const agent = new Agent(server.issuer);
  const login = await agent.get("/login?return=/account");
  const done = await agent.post("/login", {
    ...hiddenFields(await login.text()),
    username,
    password: PASSWORD,
  });
  expect(done.status).toBe(303);
  return agent;
}

describe("withdrawing is reviewed first", () => {
  it("the review changes nothing and says what happens; its form withdraws; Cancel and a forged token do not", async () => {
    const agent = await signedInAgent(USERNAME);
    const html = await accountPage(agent);
    const [consent] = (await server.store.listConsents("u1")).filter((c) =>
      c.redirectUri.includes(`:${PORTS[0]}/`),
    );
    const query = reviewQuery(html, "withdraw", { client_id: consent!.clientId });
    const review = await accountPageAt(agent, `/account?${query}`);
    expect(review).toContain('data-testid="review"');
    expect(review).toContain("Withdraw Gatehouse CLI?");
    expect(review).toContain(`returning to 127.0.0.1:${PORTS[0]} (this computer)`);
    expect(review).toContain("will have to ask you again");
    expect(review).toMatch(
      /Its active grant is revoked: refresh tokens stop working at once, but an access token already issued stays valid .* at most 300 s/,
    );
    expect(await server.store.getConsent("u1", consent!.clientId, consent!.redirectUri)).toBeDefined();
    const form = formFor(review, "revoke").fields;
    expect((await agent.post("/account", { ...form, csrf: "forged" })).status).toBe(403);
    expect(await server.store.getConsent("u1", consent!.clientId, consent!.redirectUri)).toBeDefined();
    expect((await agent.post("/account", form)).status).toBe(303);
    expect(await server.store.getConsent("u1", consent!.clientId, consent!.redirectUri)).toBeUndefined();
    const grants = await server.store.listGrants({ clientId: consent!.clientId });
    expect(grants.every((g) => g.revokedAt !== undefined)).toBe(true);
    // The row is gone, and its review now says so, with no form.
    const gone = await accountPageAt(agent, `/account?${query}`);
    expect(gone).toContain("Nothing to withdraw");
    expect(gone).not.toContain('value="revoke"');
  });

  it("another user's authorization is never reviewed: no name, no form", async () => {
    await server.store.createUser({
      id: "u-mallory",
      username: "mallory",
      passwordHash: await hashPassword(PASSWORD),
      isAdmin: false,
      createdAt: Date.now(),
    });
    const mallory = await signedInAgent("mallory");
    const [grant] = await server.store.listGrants({ userId: "u1", active: true });
    const [consent] = await server.store.listConsents("u1");
    for (const query of [
      `review=withdraw-grant&grant_id=${grant!.grantId}`,
      `review=withdraw&${new URLSearchParams({ client_id: consent!.clientId, redirect_uri: consent!.redirectUri })}`,
    ]) {
      const page = await accountPageAt(mallory, `/account?${query}`);
      expect(page).toContain("Nothing to withdraw");
      expect(page).not.toContain("Gatehouse CLI");
      expect(page).not.toContain('data-testid="review"');
    }
  });
});

describe("the account page in Chromium, at 1280 and 375 px", () => {
  it("the rows fit the screen and each shows its port and time", async () => {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    const chromium = await launchChromium();
    try {
      for (const width of [1280, 375]) {
        const context = await chromium.newContext({ viewport: { width, height: 900 } });
        const page = await context.newPage();
        await page.goto(`${server.issuer}/login?return=/account`);
        await page.getByLabel("Username").fill(USERNAME);
        await page.getByLabel("Password").fill(PASSWORD);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.waitForURL((u) => u.pathname === "/account");
        const rows = page.getByTestId("consent-row");
        const count = await rows.count();
        expect(count).toBeGreaterThanOrEqual(2);
        for (let i = 0; i < count; i++) {
          const box = await rows.nth(i).boundingBox();
          expect(box!.x).toBeGreaterThanOrEqual(0);
          expect(box!.x + box!.width).toBeLessThanOrEqual(width);
          expect(await rows.nth(i).innerText()).toMatch(/127\.0\.0\.1:5312\d \(this computer\)/);
        }
        await page.screenshot({ path: join(SCREENSHOT_DIR, `account-rows-${width}.png`), fullPage: true });
        await rows.first().getByRole("button", { name: "Withdraw…" }).click();
        await page.waitForURL((u) => u.searchParams.get("review") === "withdraw");
        const review = await page.getByTestId("review").boundingBox();
        expect(review!.x + review!.width).toBeLessThanOrEqual(width);
        await page.screenshot({ path: join(SCREENSHOT_DIR, `account-withdraw-review-${width}.png`) });
        await page.getByTestId("cancel").click();
        await page.waitForURL((u) => u.pathname === "/account" && !u.searchParams.has("review"));
        await context.close();
      }
    } finally {
      await chromium.close();
    }
  }, 60_000);
});
