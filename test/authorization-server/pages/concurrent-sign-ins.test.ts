/**
 * Several sign-ins at once in one browser, in real Chromium: a desktop host starting two MCP
 * servers at launch, or a client that opens one tab per server, sends the browser to `/authorize`
 * twice before either answer arrives. Each interaction must stay bound to this browser (a
 * continuation link opened elsewhere is still refused) without one binding replacing the other.
 *
 * The server holds each pair of `/authorize` requests until both have arrived, so both leave the
 * browser before either answer sets a cookie: the overlap is certain, not left to timing.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Endpoint } from "../../../src/authorization-server/core/context.js";
import { handleAuthorize } from "../../../src/authorization-server/endpoints/authorize.js";
import { handleConsent } from "../../../src/authorization-server/pages/consent.js";
import { handleLogin } from "../../../src/authorization-server/pages/login.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { launchChromium } from "../../support/browser.js";
import { authorizeUrl, type Harness, startHarness } from "./harness.js";

let h: Harness;
let server: ListeningServer;
let client: ListeningServer;
let browser: Browser;
let callback: string;

/** `/authorize` requests wait here until `expected` of them have arrived, then all go on. */
const barrier = { expected: 0, waiting: [] as Array<() => void> };
function holdAuthorizeRequests(count: number): void {
  barrier.expected = count;
  barrier.waiting = [];
}

beforeAll(async () => {
  client = await listen(async () => {
    return new Response("<!doctype html><title>client</title><p id=ok>client got the response</p>", {
      headers: { "content-type": "text/html" },
    });
  });
  callback = `${client.url}/callback`;
  h = await startHarness({ redirectUris: [callback] });
  const routes: Record<string, Endpoint> = {
    "/authorize": handleAuthorize,
    "/login": handleLogin,
    "/consent": handleConsent,
  };
  // The harness's endpoints and context behind a server that can hold /authorize; page links are
  // paths under the issuer, so the browser stays on this origin.
  server = await listen(async (request, info) => {
    const path = new URL(request.url).pathname;
    const route = routes[path];
    if (!route) return new Response("not found", { status: 404 });
    if (path === "/authorize" && barrier.expected > 0) {
      await new Promise<void>((resolve) => {
        barrier.waiting.push(resolve);
        if (barrier.waiting.length === barrier.expected) {
          barrier.expected = 0;
          for (const go of barrier.waiting.splice(0)) go();
        }
      });
    }
    return route(request, h.ctx, info ?? {});
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await Promise.all([server?.close(), client?.close(), h?.close()]);
});

function flowUrl(clientId: string, state: string): string {
  return authorizeUrl(server.url, {
    client_id: clientId,
    redirect_uri: callback,
    state,
    scope: "notes:read",
  });
}

/** Where a page stands: the callback's `state`, or the title of the page it is stuck on. */
async function finish(page: Page, user: { username: string; password: string }): Promise<string> {
  if (new URL(page.url()).pathname === "/login") {
    if ((await page.getByLabel("Username").count()) === 0)
      return `stuck: ${await page.locator("h1").textContent()}`;
    await page.getByLabel("Username").fill(user.username);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
  }
  if (new URL(page.url()).pathname !== "/consent") return `stuck: ${await page.locator("h1").textContent()}`;
  await page.getByRole("button", { name: "Allow" }).click();
  await page.waitForURL((u) => u.href.startsWith(`${callback}?`) || u.pathname === "/consent", {
    timeout: 15_000,
  });
  const url = new URL(page.url());
  if (!url.href.startsWith(`${callback}?`)) return `stuck: ${await page.locator("h1").textContent()}`;
  expect(url.searchParams.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
  return url.searchParams.get("state") ?? "no state";
}

/** Two authorizations (two clients, as two MCP servers) started together in `context`, both finished. */
async function twoAtOnce(context: BrowserContext, round: number): Promise<string[]> {
  const [first, second] = [
    await h.newClient({ redirectUris: [callback] }),
    await h.newClient({ redirectUris: [callback] }),
  ];
  const user = await h.newUser();
  const pages = [await context.newPage(), await context.newPage()];
  holdAuthorizeRequests(2);
  await Promise.all([
    pages[0]!.goto(flowUrl(first, `a-${round}`)),
    pages[1]!.goto(flowUrl(second, `b-${round}`)),
  ]);
  // One after the other, as a person would: the second tab's sign-in form was loaded before the
  // first one signed in.
  const outcomes = [await finish(pages[0]!, user), await finish(pages[1]!, user)];
  await Promise.all(pages.map((p) => p.close()));
  return outcomes;
}

const ROUNDS = 10;
/** Each round is two sign-ins in Chromium; generous, since timings are never asserted. */
const TIMEOUT_MS = 240_000;

describe("two sign-ins started together in one browser", () => {
  it(
    "both complete in a fresh profile, round after round",
    async () => {
      const outcomes: string[][] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const context = await browser.newContext();
        outcomes.push(await twoAtOnce(context, round));
        await context.close();
      }
      expect(outcomes).toEqual(Array.from({ length: ROUNDS }, (_, round) => [`a-${round}`, `b-${round}`]));
    },
    TIMEOUT_MS,
  );

  it(
    "both complete round after round in the same profile, which keeps no binding cookie after",
    async () => {
      const context = await browser.newContext();
      const outcomes: string[][] = [];
      for (let round = 0; round < ROUNDS; round++) outcomes.push(await twoAtOnce(context, round));
      expect(outcomes).toEqual(Array.from({ length: ROUNDS }, (_, round) => [`a-${round}`, `b-${round}`]));
      // Each finished interaction's binding cookie is cleared with its answer.
      const left = (await context.cookies(server.url)).filter((c) => c.name.includes("interaction"));
      expect(left).toEqual([]);
      await context.close();
    },
    TIMEOUT_MS,
  );

  it(
    "a continuation link of either opened in another browser is still refused",
    async () => {
      const context = await browser.newContext();
      const pages = [await context.newPage(), await context.newPage()];
      holdAuthorizeRequests(2);
      const [first, second] = [
        await h.newClient({ redirectUris: [callback] }),
        await h.newClient({ redirectUris: [callback] }),
      ];
      await Promise.all([
        pages[0]!.goto(flowUrl(first, "mine-1")),
        pages[1]!.goto(flowUrl(second, "mine-2")),
      ]);
      const other = await browser.newContext();
      const stranger = await other.newPage();
      for (const page of pages) {
        const response = await stranger.goto(page.url());
        expect(response!.status()).toBe(403);
        await expect(stranger.locator("h1").textContent()).resolves.toBe("Wrong browser");
        expect(await stranger.locator("form").count()).toBe(0);
      }
      // The browser that started them still can.
      const user = await h.newUser();
      expect([await finish(pages[0]!, user), await finish(pages[1]!, user)]).toEqual(["mine-1", "mine-2"]);
      await Promise.all([context.close(), other.close()]);
    },
    TIMEOUT_MS,
  );
});
