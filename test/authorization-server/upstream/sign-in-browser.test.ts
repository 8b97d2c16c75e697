/**
 * Sign-in through upstream providers in Chromium, end to end: an MCP client (dynamically
 * registered, PKCE) sends the browser to Gatehouse's `/authorize`; the login page offers the
 * providers; the user signs in at oidc-provider (a real OpenID Connect provider) or at a
 * GitHub-style OAuth 2 server, comes back through the callback to Gatehouse's consent page (always
 * shown for such a client, also the second time), and the client redeems the code and refreshes.
 * Then every failure page a user can meet, each screenshotted to /tmp/upstream-*.png.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../../support/browser.js";
import {
  type Gatehouse,
  type GithubLike,
  HOSTILE_TEXT,
  type McpClient,
  type RealOidcProvider,
  registerMcpClient,
  type ScriptedOidc,
  startGatehouse,
  startGithubLike,
  startRealOidcProvider,
  startScriptedOidc,
  UPSTREAM_CLIENT_ID,
  UPSTREAM_CLIENT_SECRET,
} from "./support.js";

let browser: Browser;
let corp: RealOidcProvider;
let github: GithubLike;
let scripted: ScriptedOidc;
let gatehouse: Gatehouse;
let client: McpClient;
let downIssuer: string;

beforeAll(async () => {
  browser = await launchChromium();
  github = await startGithubLike();
  github.users.set("octo", {
    id: 583231,
    login: "octo",
    name: "Octo Cat",
    emails: [{ email: "octo@example.com", primary: true, verified: true }],
    orgs: ["gatehouse-dev"],
  });
  github.users.set("outsider", {
    id: 99,
    login: "outsider",
    emails: [{ email: "outsider@example.com", primary: true, verified: true }],
    orgs: ["another-org"],
  });
  scripted = await startScriptedOidc();
  const down = await startScriptedOidc();
  downIssuer = down.issuer;
  await down.close();
  gatehouse = await startGatehouse(async (issuer) => {
    corp = await startRealOidcProvider([`${issuer}/upstream/corp/callback`], {
      unverified: { email: "unverified@example.com", email_verified: false },
      eve: { email: "eve@evil.example", email_verified: true },
    });
    return {
      providers: [
        {
          id: "corp",
          kind: "oidc",
          displayName: "Corp SSO",
          issuer: corp.issuer,
          clientId: UPSTREAM_CLIENT_ID,
          clientSecret: UPSTREAM_CLIENT_SECRET,
          createAccounts: true,
          admission: { emailDomains: ["example.com"] },
        },
        github.providerOptions({
          createAccounts: true,
          admission: { githubOrganizations: ["gatehouse-dev"] },
        }),
        {
          id: "partners",
          kind: "oidc",
          displayName: "Partner SSO",
          issuer: scripted.issuer,
          clientId: UPSTREAM_CLIENT_ID,
          clientSecret: UPSTREAM_CLIENT_SECRET,
        },
        {
          id: "down",
          kind: "oidc",
          displayName: "Old SSO",
          issuer: downIssuer,
          clientId: "x",
          clientSecret: "y",
        },
      ],
    };
  });
  client = await registerMcpClient(gatehouse.url);
});
afterAll(async () => {
  await browser?.close();
  await gatehouse?.close();
  await corp?.close();
  await github?.close();
  await scripted?.close();
});

async function newContext(): Promise<BrowserContext> {
  // The providers' certificates come from the test CA, which this browser does not know.
  return browser.newContext({ ignoreHTTPSErrors: true });
}

/** Captures the authorization response at the MCP client's redirect URI (never reached over the network). */
async function captureRedirect(page: Page): Promise<() => Promise<URL>> {
  let resolve: (url: URL) => void = () => {};
  const reached = new Promise<URL>((r) => {
    resolve = r;
  });
  await page.route(`${client.redirectUri}**`, async (route) => {
    resolve(new URL(route.request().url()));
    await route.fulfill({ status: 200, contentType: "text/plain", body: "back at the MCP client" });
  });
  return () => reached;
}

async function signInAtCorp(page: Page, login: string): Promise<void> {
  await page.getByRole("button", { name: "Continue with Corp SSO" }).click();
  await page.waitForURL((u) => u.origin === corp.issuer);
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill("anything");
  await page.getByRole("button", { name: "Sign-in" }).click();
  // oidc-provider asks its own consent for Gatehouse (its client) the first time.
  await page.waitForURL((u) => u.origin !== corp.issuer || u.pathname.startsWith("/interaction"));
  if (new URL(page.url()).origin === corp.issuer)
    await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL((u) => u.origin === gatehouse.url);
}

async function signInAtGithub(page: Page, login: string, decision: "Authorize" | "Cancel" = "Authorize") {
  await page.getByRole("button", { name: "Continue with GitHub" }).click();
  await page.waitForURL((u) => u.origin === github.url);
  await page.locator('input[name="login"]').fill(login);
  await page.getByRole("button", { name: decision }).click();
  await page.waitForURL((u) => u.origin === gatehouse.url);
}

describe("the MCP client's flow through an upstream sign-in", () => {
  it("OpenID Connect: /authorize → login page → oidc-provider → consent → code → tokens → refresh", async () => {
    const context = await newContext();
    const page = await context.newPage();
    const redirect = await captureRedirect(page);
    await page.goto(client.authorizeUrl("flow-1"));
    expect(new URL(page.url()).pathname).toBe("/login");
    await expect(page.getByTestId("client-name").textContent()).resolves.toBe("Notes Agent");
    await expect(page.getByTestId("upstream-providers").locator("button").allTextContents()).resolves.toEqual(
      [
        "Continue with Corp SSO",
        "Continue with GitHub",
        "Continue with Partner SSO",
        "Continue with Old SSO",
      ],
    );
    await page.screenshot({ path: "/tmp/upstream-login.png", fullPage: true });
    await signInAtCorp(page, "ada");
    // Back at Gatehouse: its own consent page for this dynamically registered client.
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByRole("heading").first().textContent()).resolves.toContain("Notes Agent");
    await expect(page.getByTestId("username").textContent()).resolves.toBe("corp:ada");
    await page.screenshot({ path: "/tmp/upstream-consent.png", fullPage: true });
    await page.getByRole("button", { name: "Allow" }).click();
    const response = await redirect();
    expect(response.searchParams.get("state")).toBe("flow-1");
    expect(response.searchParams.get("iss")).toBe(gatehouse.url);
    const tokens = await client.redeem(response.searchParams.get("code")!);
    expect(tokens.status).toBe(200);
    expect(tokens.body.token_type).toBe("Bearer");
    const identity = await gatehouse.store.getUpstreamIdentity("corp", "ada");
    expect(identity).toMatchObject({ email: "ada@example.com", emailVerified: true });
    const claims = JSON.parse(
      Buffer.from(String(tokens.body.access_token).split(".")[1]!, "base64url").toString(),
    );
    expect(claims.sub).toBe(identity!.userId);
    expect(claims.aud).toBe("https://notes.example/mcp");
    // Refresh rotation is Gatehouse's as for any sign-in: the new token works, and once it has
    // been used the old one is spent (inside the race window only an unused successor keeps it).
    const refreshed = await client.refresh(String(tokens.body.refresh_token));
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(tokens.body.refresh_token);
    expect((await client.refresh(String(refreshed.body.refresh_token))).status).toBe(200);
    expect((await client.refresh(String(tokens.body.refresh_token))).status).toBe(400);
    // Nothing went upstream with a resource parameter.
    expect(corp.requests.some((r) => r.params.has("resource"))).toBe(false);
    await context.close();
  });

  it("the consent page is shown again after the next upstream sign-in for the same client (never skipped)", async () => {
    const context = await newContext();
    const page = await context.newPage();
    const redirect = await captureRedirect(page);
    await page.goto(client.authorizeUrl("flow-2"));
    await signInAtCorp(page, "ada");
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("requested-scopes").textContent()).resolves.toContain(
      "It asks again for what you allowed before",
    );
    await page.getByRole("button", { name: "Allow" }).click();
    expect((await redirect()).searchParams.get("state")).toBe("flow-2");
    await context.close();
  });

  it("GitHub style (tokens form-encoded, no ID token, organisation rule): login → consent → code", async () => {
    github.alwaysFormEncoded = true;
    const context = await newContext();
    const page = await context.newPage();
    const redirect = await captureRedirect(page);
    try {
      await page.goto(client.authorizeUrl("flow-gh"));
      await signInAtGithub(page, "octo");
      expect(new URL(page.url()).pathname).toBe("/consent");
      await expect(page.getByTestId("username").textContent()).resolves.toBe("github:octo");
      await page.getByRole("button", { name: "Allow" }).click();
      const code = (await redirect()).searchParams.get("code")!;
      expect((await client.redeem(code)).status).toBe(200);
      const identity = await gatehouse.store.getUpstreamIdentity("github", "583231");
      expect(identity).toMatchObject({
        email: "octo@example.com",
        emailVerified: true,
        displayName: "Octo Cat",
      });
      const tokenRequest = github.requests.find((r) => r.path === "/login/oauth/access_token");
      expect(tokenRequest?.accept).toContain("application/json");
      expect(tokenRequest?.params.get("code_verifier")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    } finally {
      github.alwaysFormEncoded = false;
      await context.close();
    }
  });
});

describe("the login page without local passwords", () => {
  it("shows only the provider buttons", async () => {
    const only = await startGatehouse(() => ({
      providers: [github.providerOptions()],
      localPasswords: false,
    }));
    const context = await newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${only.url}/login`);
      await expect(page.getByRole("button").allTextContents()).resolves.toEqual(["Continue with GitHub"]);
      await expect(page.locator('input[type="password"]').count()).resolves.toBe(0);
      await page.screenshot({ path: "/tmp/upstream-login-no-passwords.png", fullPage: true });
    } finally {
      await context.close();
      await only.close();
    }
  });
});

describe("failure pages (screenshots in /tmp/upstream-*.png)", () => {
  async function failureAt(name: string, run: (page: Page) => Promise<void>) {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${gatehouse.url}/login`);
    await run(page);
    await page.screenshot({ path: `/tmp/upstream-${name}.png`, fullPage: true });
    const title = await page.locator("h1").textContent();
    const message = await page.getByTestId("error-message").textContent();
    // No session came of it.
    await page.goto(`${gatehouse.url}/account`);
    const signedOut = await page.locator("h1").textContent();
    const xss = await page.evaluate(() => (window as unknown as { __xss?: unknown }).__xss);
    await context.close();
    return { title, message, signedOut, xss };
  }

  it("the user cancelled at the provider", async () => {
    const r = await failureAt("cancelled", (page) => signInAtGithub(page, "octo", "Cancel"));
    expect(r.title).toBe("Sign-in cancelled");
    expect(r.message).toContain("The sign-in at GitHub was cancelled");
    expect(r.signedOut).toBe("You are not signed in");
  });

  it("a GitHub account outside the admitted organisations", async () => {
    const r = await failureAt("not-admitted-org", (page) => signInAtGithub(page, "outsider"));
    expect(r.title).toBe("Not allowed to sign in here");
    expect(r.signedOut).toBe("You are not signed in");
  });

  it("an e-mail address the provider has not verified, under an e-mail domain rule", async () => {
    const r = await failureAt("email-not-verified", (page) => signInAtCorp(page, "unverified"));
    expect(r.title).toBe("E-mail address not verified");
    expect(r.signedOut).toBe("You are not signed in");
  });

  it("a verified address in a domain that is not admitted", async () => {
    const r = await failureAt("not-admitted-domain", (page) => signInAtCorp(page, "eve"));
    expect(r.title).toBe("Not allowed to sign in here");
    expect(await gatehouse.store.getUpstreamIdentity("corp", "eve")).toBeUndefined();
  });

  it("no account and no account creation", async () => {
    const r = await failureAt("no-account", async (page) => {
      await page.getByRole("button", { name: "Continue with Partner SSO" }).click();
    });
    expect(r.title).toBe("No account here");
  });

  it("an ID token whose nonce is another sign-in's", async () => {
    scripted.claims = (c) => ({ ...c, nonce: "not-this-one" });
    try {
      const r = await failureAt("nonce-mismatch", async (page) => {
        await page.getByRole("button", { name: "Continue with Partner SSO" }).click();
      });
      expect(r.message).toContain("does not belong to this sign-in");
    } finally {
      scripted.claims = (c) => c;
    }
  });

  it("an ID token from another issuer", async () => {
    scripted.claims = (c) => ({ ...c, iss: "https://elsewhere.example" });
    try {
      const r = await failureAt("wrong-issuer", async (page) => {
        await page.getByRole("button", { name: "Continue with Partner SSO" }).click();
      });
      expect(r.message).toContain("was not issued for this server");
    } finally {
      scripted.claims = (c) => c;
    }
  });

  it("a provider error with script in its description: shown as text only, never run", async () => {
    scripted.authorizeAnswer = { error: "access_denied", error_description: HOSTILE_TEXT };
    try {
      const r = await failureAt("hostile-error", async (page) => {
        await page.getByRole("button", { name: "Continue with Partner SSO" }).click();
      });
      expect(r.title).toBe("Sign-in cancelled");
      expect(r.message).not.toContain("script");
      expect(r.xss).toBeUndefined();
    } finally {
      scripted.authorizeAnswer = undefined;
    }
  });

  it("a state that matches no sign-in", async () => {
    const r = await failureAt("state-mismatch", async (page) => {
      await page.goto(`${gatehouse.callbackUrl("corp")}?code=abc&state=forged-state`);
    });
    expect(r.title).toBe("This sign-in could not be verified");
  });

  it("a provider that cannot be reached", async () => {
    const r = await failureAt("unreachable", async (page) => {
      await page.getByRole("button", { name: "Continue with Old SSO" }).click();
    });
    expect(r.title).toBe("Sign-in provider unreachable");
  });
});
