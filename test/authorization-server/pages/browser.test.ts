/**
 * The login and consent pages in real headless Chromium, against the endpoints served on
 * 127.0.0.1, with a local "client" server receiving the redirect (SECURITY.md "Consent and login
 * pages").
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import type { ClientRecord } from "../../../src/storage/contract.js";
import { launchChromium, openFramingPage } from "../../support/browser.js";
import { authorizeUrl, type Harness, startHarness, XSS_NAME } from "./harness.js";

let h: Harness;
let client: ListeningServer;
let attacker: ListeningServer;
let browser: Browser;
let callback: string;
const received: URL[] = [];
let framedUrl = "";

beforeAll(async () => {
  client = await listen(async (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/callback") received.push(url);
    return new Response("<!doctype html><title>client</title><p id=ok>client got the response</p>", {
      headers: { "content-type": "text/html" },
    });
  });
  callback = `${client.url}/callback`;
  // Same site as the server (127.0.0.1, another port), so SameSite=Lax cookies would flow into a frame.
  attacker = await listen(async () => {
    const page = `<!doctype html><title>attacker</title>
<iframe id="target" src="${framedUrl}" width="600" height="600"></iframe>
<iframe id="control" src="${client.url}/framable" width="200" height="200"></iframe>`;
    return new Response(page, { headers: { "content-type": "text/html" } });
  });
  h = await startHarness({ redirectUris: [callback] });
  await h.addClient({
    clientId: "xss-dyn",
    source: "dynamic",
    clientName: XSS_NAME,
    redirectUris: [callback],
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([h?.close(), client?.close(), attacker?.close()]);
});

function flowUrl(params: Record<string, string | undefined> = {}): string {
  return authorizeUrl(h.url, { redirect_uri: callback, ...params });
}

/** Signs in on the login page, as a fresh user unless one is given (no shared rate-limit counters). */
async function signIn(page: Page, user?: { id: string; username: string; password: string }) {
  const who = user ?? (await h.newUser());
  await page.getByLabel("Username").fill(who.username);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  return who;
}

async function waitForCallback(page: Page): Promise<URLSearchParams> {
  await page.waitForURL((u) => u.href.startsWith(`${callback}?`), { timeout: 15_000 });
  await expect(page.locator("#ok").textContent()).resolves.toBe("client got the response");
  return new URL(page.url()).searchParams;
}

/** A fresh pre-registered client per test, so no test leans on consents another one granted. */
let clientCounter = 0;
async function freshClient(
  extra: Partial<
    Pick<ClientRecord, "source" | "clientName" | "tokenEndpointAuthMethod" | "clientSecretHash">
  > = {},
): Promise<string> {
  const clientId = `app-${++clientCounter}`;
  await h.addClient({ clientId, redirectUris: [callback], ...extra });
  return clientId;
}

/** A first approval in a new page of `context`; returns the user it signed in as. */
async function approveInNewPage(context: BrowserContext, clientId: string, scope: string) {
  const page = await context.newPage();
  await page.goto(flowUrl({ client_id: clientId, scope }));
  const user = await signIn(page);
  await page.getByRole("button", { name: "Allow" }).click();
  await waitForCallback(page);
  await page.close();
  return user;
}

describe("the code flow in Chromium", () => {
  it("login → consent → redirect with code, state and iss reaching the client", async () => {
    const context = await browser.newContext();
    const clientId = await freshClient();
    const page = await context.newPage();
    const state = `state-${"z".repeat(300)}-ä&=`;
    await page.goto(flowUrl({ client_id: clientId, state, scope: "notes:read notes:write" }));
    expect(new URL(page.url()).pathname).toBe("/login");
    await signIn(page);
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("client-name").textContent()).resolves.toBe("Notes Desktop");
    await expect(page.getByTestId("redirect-host").textContent()).resolves.toBe(new URL(callback).host);
    // Every redirect URI of this client is on loopback: the page warns.
    await expect(page.getByTestId("localhost-warning").count()).resolves.toBe(1);
    await expect(page.getByTestId("requested-scopes").textContent()).resolves.toContain("Read your notes");
    await page.screenshot({ path: "/tmp/consent.png", fullPage: true });
    const before = received.length;
    await page.getByRole("button", { name: "Allow" }).click();
    const q = await waitForCallback(page);
    expect(q.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get("state")).toBe(state);
    expect(q.get("iss")).toBe(h.url);
    expect(received.length).toBe(before + 1);
    expect(received.at(-1)!.searchParams.get("code")).toBe(q.get("code"));
    await context.close();
  });

  it("a second authorization of a public loopback client shows the consent page pre-filled (RFC 8252 §8.6)", async () => {
    const context = await browser.newContext();
    const clientId = await freshClient();
    await approveInNewPage(context, clientId, "notes:read");
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: clientId, state: "second", scope: "notes:read" }));
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("requested-scopes").textContent()).resolves.toContain(
      "It asks again for what you allowed before",
    );
    const granted = await page
      .getByTestId("granted-scopes")
      .locator("li")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope")));
    expect(granted).toEqual(["notes:read"]);
    await page.screenshot({ path: "/tmp/consent-again.png", fullPage: true });
    await page.getByRole("button", { name: "Allow" }).click();
    const q = await waitForCallback(page);
    expect(q.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get("state")).toBe("second");
    await context.close();
  });

  it("a second authorization of a client that authenticates at the token endpoint is silent", async () => {
    const context = await browser.newContext();
    const clientId = await freshClient({
      tokenEndpointAuthMethod: "client_secret_basic",
      clientSecretHash: sha256Base64url("a-secret-only-the-client-knows"),
    });
    await approveInNewPage(context, clientId, "notes:read");
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: clientId, state: "second", scope: "notes:read" }));
    const q = await waitForCallback(page);
    expect(q.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get("state")).toBe("second");
    await context.close();
  });

  it("step-up: the consent page asks only for the new scope and lists the granted one apart", async () => {
    const context = await browser.newContext();
    const clientId = await freshClient();
    const user = await approveInNewPage(context, clientId, "notes:read");
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: clientId, state: "step", scope: "notes:read offline_access" }));
    expect(new URL(page.url()).pathname).toBe("/consent");
    const requested = await page
      .getByTestId("requested-scopes")
      .locator("li")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope")));
    expect(requested).toEqual(["offline_access"]);
    const granted = await page
      .getByTestId("granted-scopes")
      .locator("li")
      .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope")));
    expect(granted).toEqual(["notes:read"]);
    await page.getByRole("button", { name: "Allow" }).click();
    const q = await waitForCallback(page);
    expect(q.get("state")).toBe("step");
    const consent = await h.store.getConsent(user.id, clientId, callback);
    expect(new Set(consent!.scopes)).toEqual(new Set(["notes:read", "offline_access"]));
    await context.close();
  });

  it("framing the login or consent page from another loopback origin is blocked", async () => {
    const context = await browser.newContext();
    const clientId = await freshClient();
    const page = await context.newPage();
    // A live interaction for this very browser, so only the framing rules can stop the form.
    await page.goto(flowUrl({ client_id: clientId }));
    const loginUrl = page.url();
    await signIn(page);
    expect(new URL(page.url()).pathname).toBe("/consent");
    for (const target of [page.url(), loginUrl, `${h.url}/login`, `${h.url}/account`]) {
      framedUrl = target;
      // The control frame from another origin renders, so only the framing rules stop this one.
      const { page: framing, target: framed } = await openFramingPage(context, `${attacker.url}/`);
      const frame = framed!;
      expect(frame).toBeDefined();
      await frame.waitForLoadState().catch(() => {});
      expect(
        await frame
          .locator("form")
          .count()
          .catch(() => 0),
      ).toBe(0);
      expect(
        await frame
          .locator("button")
          .count()
          .catch(() => 0),
      ).toBe(0);
      await framing.close();
    }
    await context.close();
  });
});

describe("hostile cases in Chromium", () => {
  it("deny → error=access_denied with state and iss", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: await freshClient(), state: "deny-me" }));
    await signIn(page);
    await page.getByRole("button", { name: "Deny" }).click();
    const q = await waitForCallback(page);
    expect(q.get("error")).toBe("access_denied");
    expect(q.get("code")).toBeNull();
    expect(q.get("state")).toBe("deny-me");
    expect(q.get("iss")).toBe(h.url);
    await context.close();
  });

  it("works with JavaScript disabled", async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: await freshClient(), state: "nojs" }));
    await signIn(page);
    await page.getByRole("button", { name: "Allow" }).click();
    const q = await waitForCallback(page);
    expect(q.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get("state")).toBe("nojs");
    await context.close();
  });

  it("a wrong or missing CSRF token is refused", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(flowUrl({ client_id: await freshClient(), state: "csrf" }));
    await signIn(page);
    const consentUrl = page.url();
    await page.locator('input[name="csrf"]').evaluate((el) => {
      (el as HTMLInputElement).value = "forged";
    });
    await page.getByRole("button", { name: "Allow" }).click();
    await expect(page.getByTestId("error-message").textContent()).resolves.toContain("security token");
    expect(new URL(page.url()).origin).toBe(h.url);

    await page.goto(consentUrl);
    await page.locator('input[name="csrf"]').evaluate((el) => el.remove());
    await page.getByRole("button", { name: "Allow" }).click();
    await expect(page.getByTestId("error-message").textContent()).resolves.toContain("security token");
    expect(received.some((u) => u.searchParams.get("state") === "csrf")).toBe(false);
    await context.close();
  });

  it("the consent continuation URL opened in another browser does not work", async () => {
    const victim = await browser.newContext();
    const page = await victim.newPage();
    await page.goto(flowUrl({ client_id: await freshClient(), state: "bound" }));
    const loginUrl = page.url();
    const user = await signIn(page);
    const consentUrl = page.url();

    const other = await browser.newContext();
    const stranger = await other.newPage();
    for (const url of [consentUrl, loginUrl]) {
      const response = await stranger.goto(url);
      expect(response!.status()).toBe(403);
      await expect(stranger.locator("h1").textContent()).resolves.toBe("Wrong browser");
      expect(await stranger.locator("form").count()).toBe(0);
    }
    // Even signed in as the same user, the other browser cannot approve.
    await stranger.goto(`${h.url}/login`);
    await signIn(stranger, user);
    const response = await stranger.goto(consentUrl);
    expect(response!.status()).toBe(403);
    expect(received.some((u) => u.searchParams.get("state") === "bound")).toBe(false);
    await Promise.all([victim.close(), other.close()]);
  });

  it("a script-bearing client_name renders as text", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    let dialogs = 0;
    page.on("dialog", (d) => {
      dialogs++;
      void d.dismiss();
    });
    await page.goto(flowUrl({ client_id: "xss-dyn", state: "xss" }));
    await signIn(page);
    await expect(page.getByTestId("client-name").textContent()).resolves.toBe(XSS_NAME);
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(await page.locator("main script, main img").count()).toBe(0);
    // Self-registered, localhost-only: the warning is there.
    await expect(page.getByTestId("localhost-warning").count()).resolves.toBe(1);
    expect(dialogs).toBe(0);
    await context.close();
  });
});
