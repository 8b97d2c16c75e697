/**
 * The device verification page (RFC 8628 §3.3) in real Chromium, on a real server on loopback:
 * type the code, sign in, read the confirmation, allow; the same from `verification_uri_complete`
 * (prefilled, still confirmed); and deny. The device's polls show what each answer did. Pages are
 * saved to SCREENSHOT_DIR for a person to look at.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { PASSWORD } from "./pages/harness.js";
import { type FlowServer, publicClient, RESOURCE, startFlowServer, USERNAME } from "./support/flow-server.js";

const SCREENSHOT_DIR = process.env.GATEHOUSE_SCREENSHOT_DIR ?? "/tmp/gatehouse-pages";
const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const CLIENT_ID = "tv-app";

let server: FlowServer;
let browser: Browser;

beforeAll(async () => {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  server = await startFlowServer({
    clients: [
      publicClient({
        clientId: CLIENT_ID,
        clientName: "Living-room TV",
        clientUri: "https://tv.example",
        grantTypes: [DEVICE_GRANT, "refresh_token", "authorization_code"],
      }),
    ],
    extra: { scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Change your notes" } },
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function startDevice(): Promise<{
  device_code: string;
  user_code: string;
  verification_uri_complete: string;
}> {
  const response = await fetch(`${server.issuer}/device_authorization`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ client_id: CLIENT_ID, resource: RESOURCE, scope: "notes:read notes:write" }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as {
    device_code: string;
    user_code: string;
    verification_uri_complete: string;
  };
}

async function poll(deviceCode: string): Promise<Record<string, unknown>> {
  server.clock.now += 10_000;
  const response = await fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: CLIENT_ID }),
  });
  return (await response.json()) as Record<string, unknown>;
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

async function signIn(page: Page): Promise<void> {
  await expect.poll(() => new URL(page.url()).pathname).toBe("/login");
  await page.locator("#username").fill(USERNAME);
  await page.locator("#password").fill(PASSWORD);
  await Promise.all([
    page.waitForURL((u) => u.pathname === "/device"),
    page.getByRole("button", { name: "Sign in" }).click(),
  ]);
}

/** A fresh browser context (no cookies) for one test, closed afterwards. */
async function withPage(use: (page: Page) => Promise<void>): Promise<void> {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  try {
    await use(await context.newPage());
  } finally {
    await context.close();
  }
}

describe("device verification page in Chromium", () => {
  it("type the code, sign in, confirm, allow: the device gets its tokens", async () => {
    const device = await startDevice();
    await withPage(async (page) => {
      await page.goto(`${server.issuer}/device`);
      await signIn(page);
      await shoot(page, "device-entry");
      // Typed as a person might: lower case, no dash.
      await page.getByTestId("user-code-input").fill(device.user_code.replace("-", "").toLowerCase());
      await page.getByRole("button", { name: "Continue" }).click();
      await expect.poll(() => page.getByTestId("user-code").textContent()).toBe(device.user_code);
      await shoot(page, "device-confirm");
      expect(await page.getByTestId("client-name").textContent()).toBe("Living-room TV");
      expect(await page.getByTestId("client-host").textContent()).toBe("tv.example");
      expect(await page.getByTestId("requested-scopes").innerText()).toContain("Change your notes");
      expect(await poll(device.device_code)).toMatchObject({ error: "authorization_pending" });
      await page.getByRole("button", { name: "Allow" }).click();
      await expect.poll(() => page.getByTestId("device-done").textContent()).toContain("You allowed");
      await shoot(page, "device-allowed");
      const tokens = await poll(device.device_code);
      expect(typeof tokens.access_token).toBe("string");
      expect(tokens.scope).toBe("notes:read notes:write");
    });
  });

  it("from verification_uri_complete: the code is filled in, and still needs Continue and Allow", async () => {
    const device = await startDevice();
    await withPage(async (page) => {
      await page.goto(device.verification_uri_complete);
      await signIn(page);
      expect(await page.getByTestId("user-code-input").inputValue()).toBe(device.user_code);
      await shoot(page, "device-entry-prefilled");
      // Opening the link approved nothing (RFC 8628 §5.4).
      expect(await poll(device.device_code)).toMatchObject({ error: "authorization_pending" });
      await page.getByRole("button", { name: "Continue" }).click();
      await page.getByRole("button", { name: "Allow" }).click();
      await expect.poll(() => page.getByTestId("device-done").textContent()).toContain("You allowed");
      expect(typeof (await poll(device.device_code)).access_token).toBe("string");
    });
  });

  it("deny: the device hears access_denied; a wrong code gets a clear error", async () => {
    const device = await startDevice();
    await withPage(async (page) => {
      await page.goto(`${server.issuer}/device`);
      await signIn(page);
      await page.getByTestId("user-code-input").fill("BBBB-BBBB");
      await page.getByRole("button", { name: "Continue" }).click();
      await expect
        .poll(() => page.getByTestId("device-error").textContent())
        .toContain("That code is not valid");
      await shoot(page, "device-wrong-code");
      await page.getByTestId("user-code-input").fill(device.user_code);
      await page.getByRole("button", { name: "Continue" }).click();
      await page.getByRole("button", { name: "Deny" }).click();
      await expect
        .poll(() => page.getByTestId("device-done").textContent())
        .toContain("was not given access");
      await shoot(page, "device-denied");
      expect(await poll(device.device_code)).toMatchObject({ error: "access_denied" });
    });
  });
});
