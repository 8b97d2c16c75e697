/**
 * Every page a user meets in one sign-in, in real Chromium, with the client's own loopback
 * listener (RFC 8252 §7.3) as the redirect target: login, consent (first time, again pre-filled,
 * step-up), the callback page after Deny and after Allow, the account page and an error page.
 * Each is saved to SCREENSHOT_DIR for a person to look at, and the checks here pin what the
 * screenshots are for: the callback page tells denied from approved, the login page names the
 * server, the account page's buttons do not break mid-word.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LoopbackListener, startLoopbackListener } from "../../../src/client/index.js";
import { launchChromium } from "../../support/browser.js";
import { authorizeUrl, type Harness, startHarness } from "./harness.js";

/** Where the screenshots go (override with GATEHOUSE_SCREENSHOT_DIR). */
const SCREENSHOT_DIR = process.env.GATEHOUSE_SCREENSHOT_DIR ?? "/tmp/gatehouse-pages";
const CLIENT_ID = "notes-cli";
/** A long name with no spaces: the worst case for the account page's table. */
const LONG_NAME = "Notes-Command-Line-Companion-For-Very-Long-Names-Indeed";

let h: Harness;
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** The user the first test signs in as; the browser keeps the session for the rest. */
let signedIn: { id: string } | undefined;
const listeners: LoopbackListener[] = [];

beforeAll(async () => {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  h = await startHarness();
  // A public loopback client, as the command line registers itself (port chosen per login).
  await h.addClient({ clientId: CLIENT_ID, redirectUris: ["http://127.0.0.1/callback"] });
  await h.addClient({
    clientId: "long-name",
    clientName: LONG_NAME,
    redirectUris: ["https://app.example/cb"],
  });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 900, height: 800 } });
  page = await context.newPage();
});

afterAll(async () => {
  await Promise.all(listeners.map((l) => l.close()));
  await browser?.close();
  await h?.close();
});

async function shoot(name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** A fresh listener waiting for `state`, checking iss against the harness's issuer. */
async function listenFor(state: string): Promise<{ listener: LoopbackListener; callback: Promise<string> }> {
  const listener = await startLoopbackListener({ timeoutMs: 30_000 });
  listeners.push(listener);
  const callback = listener.waitForCallback(state, { issuer: h.url, issParameterSupported: true });
  return { listener, callback };
}

async function startFlow(state: string, scope: string) {
  const waiting = await listenFor(state);
  await page.goto(
    authorizeUrl(h.url, { client_id: CLIENT_ID, redirect_uri: waiting.listener.redirectUri, state, scope }),
  );
  return waiting;
}

describe("every page, screenshotted", () => {
  it("login (naming the server), first consent, Deny → the callback page says denied", async () => {
    const user = await h.newUser();
    signedIn = user;
    const { callback } = await startFlow("first", "notes:read");
    expect(new URL(page.url()).pathname).toBe("/login");
    await expect(page.getByTestId("issuer-host").textContent()).resolves.toBe(new URL(h.url).host);
    await shoot("01-login");
    await page.getByLabel("Username").fill(user.username);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("localhost-warning").textContent()).resolves.toContain(
      "it returns to 127.0.0.1",
    );
    await shoot("02-consent-first");
    await page.getByRole("button", { name: "Deny" }).click();
    expect(new URL(await callback).searchParams.get("error")).toBe("access_denied");
    await expect(page.locator("h1").textContent()).resolves.toBe("Access denied");
    await expect(page.getByTestId("outcome").textContent()).resolves.toContain("You denied the access");
    await shoot("03-callback-denied");
  });

  it("Allow → the callback page says approved; again → consent pre-filled; more → step-up", async () => {
    const approved = await startFlow("second", "notes:read offline_access");
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("requested-scopes").textContent()).resolves.toContain("Stay signed in");
    await page.getByRole("button", { name: "Allow" }).click();
    expect(new URL(await approved.callback).searchParams.get("code")).toBeTruthy();
    await expect(page.locator("h1").textContent()).resolves.toBe("Access approved");
    await shoot("04-callback-approved");

    const again = await startFlow("third", "notes:read offline_access");
    await expect(page.getByTestId("requested-scopes").textContent()).resolves.toContain(
      "It asks again for what you allowed before",
    );
    await shoot("05-consent-again");
    await again.listener.close();

    const stepUp = await startFlow("fourth", "notes:read notes:write offline_access");
    const requested = await page
      .getByTestId("requested-scopes")
      .locator("li")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope")));
    expect(requested).toEqual(["notes:write"]);
    await shoot("06-consent-step-up");
    await stepUp.listener.close();
  });

  it("the account page, its Withdraw buttons on one line even at phone width", async () => {
    // A consent for a client with an unbreakable long name, so the table is under pressure.
    const now = Date.now();
    await h.store.grantConsent({
      userId: signedIn!.id,
      clientId: "long-name",
      redirectUri: "https://app.example/cb",
      scopes: ["notes:read", "offline_access"],
      createdAt: now,
      updatedAt: now,
    });
    for (const [name, width] of [
      ["07-account", 900],
      ["07-account-narrow", 360],
    ] as const) {
      await page.setViewportSize({ width, height: 800 });
      await page.goto(`${h.url}/account`);
      const buttons = page.getByRole("button", { name: "Withdraw" });
      expect(await buttons.count()).toBe(2);
      const lines = await buttons.evaluateAll((els) =>
        els.map((b) => {
          const style = getComputedStyle(b);
          const content = b.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
          return Math.round(content / parseFloat(style.lineHeight));
        }),
      );
      expect(lines).toEqual([1, 1]);
      await shoot(name);
    }
    await page.setViewportSize({ width: 900, height: 800 });
  });

  it("an error page", async () => {
    await page.goto(`${h.url}/consent?interaction=${"A".repeat(22)}`);
    await expect(page.locator("h1").count()).resolves.toBe(1);
    await shoot("08-error");
  });
});
