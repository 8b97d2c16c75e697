/**
 * The whole flow against `gatehouse demo` in real Chromium: dynamic registration (RFC 7591), the
 * authorization request with PKCE S256 and `resource` (RFC 8707), login and consent in the browser,
 * the code redeemed at /token, GET and POST /notes with the access token, a refresh with rotation,
 * and the rotated refresh token refused when it comes back.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoReady, ensureBuilt, type RunningCli, startDemo, tempDir } from "../cli/helpers.js";
import { launchChromium } from "../support/browser.js";

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;
let browser: Browser;
let callback: Server;
let callbackUrl: string;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-demo-browser-");
  // A short lifetime, as someone would run it to watch a refresh happen.
  demo = await startDemo(dir.path, ["--access-token-ttl", "30"]);
  // The client's redirect target: a loopback page, as a native or CLI client would run.
  callback = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("done");
  });
  await new Promise<void>((r) => callback.listen(0, "127.0.0.1", () => r()));
  callbackUrl = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await new Promise((r) => callback?.close(r));
  await demo?.stop();
  dir?.remove();
});

function form(body: Record<string, string>): RequestInit {
  return {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(body).toString(),
  };
}

describe("the demo in a real browser", () => {
  it("registers, authorizes with login and consent, redeems the code, calls /notes and refreshes", async () => {
    const { issuer, resource, username, password } = demo.ready;

    // 1. Dynamic registration of a public client.
    const registration = await fetch(`${issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Browser flow test",
        redirect_uris: [callbackUrl],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      }),
    });
    expect(registration.status).toBe(201);
    const { client_id: clientId } = (await registration.json()) as { client_id: string };
    expect(clientId).not.toMatch(/^https:/);

    // 2. The authorization request, in Chromium.
    const verifier = randomBytes(32).toString("base64url");
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const state = randomBytes(16).toString("base64url");
    const authorize = new URL(`${issuer}/authorize`);
    authorize.search = new URLSearchParams({
      response_type: "code",
      client_id: clientId,
      redirect_uri: callbackUrl,
      code_challenge: challenge,
      code_challenge_method: "S256",
      state,
      scope: "notes:write offline_access",
      resource,
    }).toString();

    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(authorize.href);
      await page.fill("#username", username);
      await page.fill("#password", password);
      await Promise.all([
        page.waitForURL((u) => !u.pathname.endsWith("/login")),
        page.click("button[type=submit]"),
      ]);
      // The consent page names the client before anything is granted.
      await expect(page.textContent("body")).resolves.toContain("Browser flow test");
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(callbackUrl)),
        page.click('button[name="decision"][value="approve"]'),
      ]);
      const redirected = new URL(page.url());
      expect(redirected.searchParams.get("state")).toBe(state);
      // RFC 9207: the issuer rides along with the code.
      expect(redirected.searchParams.get("iss")).toBe(issuer);
      const code = redirected.searchParams.get("code");
      expect(code).toBeTruthy();

      // 3. Code + PKCE verifier at /token.
      const tokenResponse = await fetch(
        `${issuer}/token`,
        form({
          grant_type: "authorization_code",
          code: code!,
          redirect_uri: callbackUrl,
          code_verifier: verifier,
          client_id: clientId,
          resource,
        }),
      );
      expect(tokenResponse.status).toBe(200);
      expect(tokenResponse.headers.get("cache-control")).toContain("no-store");
      const tokens = (await tokenResponse.json()) as {
        access_token: string;
        refresh_token: string;
        token_type: string;
        scope: string;
        expires_in: number;
      };
      expect(tokens.token_type.toLowerCase()).toBe("bearer");
      expect(tokens.refresh_token).toBeTruthy();
      // `gatehouse demo --access-token-ttl 30` reaches the server's accessTokenTtlSeconds.
      expect(tokens.expires_in).toBe(30);
      expect(tokens.scope.split(" ")).toContain("notes:write");

      // 4. The resource: notes:write covers reading (hierarchy) and writing.
      const auth = { authorization: `Bearer ${tokens.access_token}` };
      const created = await fetch(resource, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ text: "from the browser test" }),
      });
      expect(created.status).toBe(201);
      const listed = await fetch(resource, { headers: auth });
      expect(listed.status).toBe(200);
      const { notes } = (await listed.json()) as { notes: { text: string }[] };
      expect(notes.map((n) => n.text)).toEqual(["from the browser test"]);

      // 5. Refresh: a new pair; the old refresh token is now spent.
      const refreshed = await fetch(
        `${issuer}/token`,
        form({
          grant_type: "refresh_token",
          refresh_token: tokens.refresh_token,
          client_id: clientId,
          resource,
        }),
      );
      expect(refreshed.status).toBe(200);
      const next = (await refreshed.json()) as { access_token: string; refresh_token: string };
      expect(next.refresh_token).not.toBe(tokens.refresh_token);
      const again = await fetch(resource, {
        headers: { authorization: `Bearer ${next.access_token}` },
      });
      expect(again.status).toBe(200);
      // The client moves on (uses its successor); from then on the old token is reuse, refresh race
      // window or not.
      const movedOn = await fetch(
        `${issuer}/token`,
        form({ grant_type: "refresh_token", refresh_token: next.refresh_token, client_id: clientId }),
      );
      expect(movedOn.status).toBe(200);
      const newest = (await movedOn.json()) as { refresh_token: string };
      const reused = await fetch(
        `${issuer}/token`,
        form({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: clientId }),
      );
      expect(reused.status).toBe(400);
      expect(((await reused.json()) as { error: string }).error).toBe("invalid_grant");
      // Reuse revoked the grant: the newest refresh token is dead too.
      const afterReuse = await fetch(
        `${issuer}/token`,
        form({ grant_type: "refresh_token", refresh_token: newest.refresh_token, client_id: clientId }),
      );
      expect(afterReuse.status).toBe(400);
    } finally {
      await context.close();
    }
  });
});
