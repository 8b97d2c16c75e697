/**
 * The user's side of an authorization, as a native MCP client arranges it (RFC 8252): a loopback
 * listener for the redirect, and a real Chromium that the client "opens" on the authorization URL,
 * where the test user signs in (when not already signed in) and approves the consent page.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { BrowserContext, Page } from "playwright-core";
import type { TestUser } from "./harness.js";

/** One authorization as the browser went through it. */
export interface BrowserVisit {
  authorizationUrl: URL;
  /** The login page was shown (false when the browser was still signed in). */
  login: boolean;
  /** The consent page's newly requested and already granted scopes (empty when it was not shown). */
  requested: string[];
  granted: string[];
}

/**
 * A one-path loopback HTTP listener (RFC 8252 §7.3) that hands each callback URL it receives to
 * whoever waits for it, and shows the browser a plain "you can close this window" page.
 */
export class LoopbackRedirect {
  readonly #server: Server;
  readonly #received: URL[] = [];
  readonly #waiting: ((url: URL) => void)[] = [];
  readonly uri: string;

  private constructor(server: Server, uri: string) {
    this.#server = server;
    this.uri = uri;
    server.on("request", (req, res) => {
      const url = new URL(req.url ?? "/", uri);
      if (url.pathname !== new URL(uri).pathname) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end("<!doctype html><title>Signed in</title><p>You can close this window.</p>");
      const waiter = this.#waiting.shift();
      if (waiter) waiter(url);
      else this.#received.push(url);
    });
  }

  static async start(): Promise<LoopbackRedirect> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return new LoopbackRedirect(server, `http://127.0.0.1:${port}/callback`);
  }

  /** The next callback URL (one already received, or the next to arrive). */
  next(): Promise<URL> {
    const ready = this.#received.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

function scopesIn(page: Page, testId: string): Promise<string[]> {
  return page
    .locator(`[data-testid="${testId}"] [data-scope]`)
    .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope") ?? ""));
}

/**
 * A person at the browser: signs in as `user` when asked, approves every consent page, and stops
 * once the browser has been sent to `redirectUri`. Any other page (an error page of the
 * authorization server, for instance) fails the visit with that page's message.
 */
export class ChromiumUser {
  readonly visits: BrowserVisit[] = [];

  constructor(
    readonly context: BrowserContext,
    readonly user: TestUser,
  ) {}

  async authorize(authorizationUrl: URL, redirectUri: string): Promise<BrowserVisit> {
    const visit: BrowserVisit = { authorizationUrl, login: false, requested: [], granted: [] };
    this.visits.push(visit);
    const page = await this.context.newPage();
    // A missing button should fail the visit with the page's text, well before the test's timeout.
    page.setDefaultTimeout(10_000);
    const atRedirect = (u: URL) => u.href.startsWith(redirectUri);
    try {
      await page.goto(authorizationUrl.href);
      for (let step = 0; step < 6; step++) {
        const here = new URL(page.url());
        if (atRedirect(here)) return visit;
        const leave = (u: URL) => u.href !== here.href;
        if (here.pathname === "/login") {
          visit.login = true;
          await page.getByLabel("Username").fill(this.user.username);
          await page.getByLabel("Password").fill(this.user.password);
          await page.getByRole("button", { name: "Sign in" }).click();
          await page.waitForURL(leave);
        } else if (here.pathname === "/consent") {
          visit.requested = await scopesIn(page, "requested-scopes");
          visit.granted = await scopesIn(page, "granted-scopes");
          await page.getByRole("button", { name: "Allow" }).click();
          await page.waitForURL(leave);
        } else {
          throw new Error("not a login or consent page");
        }
      }
      throw new Error("the browser did not reach the redirect URI within 6 pages");
    } catch (error) {
      // Where the browser is and what it shows (never the URL's query: it may carry a code).
      const here = new URL(page.url());
      const text = await page
        .locator("body")
        .innerText({ timeout: 1000 })
        .catch(() => "");
      throw new Error(
        `the browser stopped at ${here.origin}${here.pathname} (${(error as Error).message}); ` +
          `the page says: ${text.replace(/\s+/g, " ").slice(0, 400)}`,
        { cause: error },
      );
    } finally {
      await page.close();
    }
  }
}

/**
 * What a native client does between "open the browser" and "the code arrived": `open` is the
 * client's `redirectToAuthorization` (or `userAgent`), `callback` resolves with the URL the
 * loopback listener received, or fails with what went wrong in the browser.
 */
export class AuthorizationHandoff {
  /** How many times the client sent the user to the browser. */
  opened = 0;
  #pending: Promise<URL> | undefined;

  constructor(
    readonly user: ChromiumUser,
    readonly redirect: LoopbackRedirect,
  ) {}

  open(authorizationUrl: URL): void {
    this.opened++;
    const arrived = this.redirect.next();
    const visited = this.user.authorize(authorizationUrl, this.redirect.uri);
    const pending = visited.then(() => arrived);
    // Awaited by `callback`; a test that fails before then must not also report it as unhandled.
    pending.catch(() => {});
    this.#pending = pending;
  }

  async callback(): Promise<URL> {
    const pending = this.#pending;
    this.#pending = undefined;
    if (!pending) throw new Error("the client never sent the user to the browser");
    return pending;
  }
}

/**
 * The application's half of the redirect (OAuth 2.1 §4.1.2, §7.12 for `state`): the code, once the
 * callback carries the `state` the application sent and no `error`.
 */
export function codeFromCallback(callback: URL, expectedState: string | undefined): string {
  const error = callback.searchParams.get("error");
  if (error) {
    const description = callback.searchParams.get("error_description");
    throw new Error(`the authorization server answered ${error}${description ? `: ${description}` : ""}`);
  }
  if (expectedState !== undefined && callback.searchParams.get("state") !== expectedState) {
    throw new Error("the callback's state is not the one this authorization sent");
  }
  const code = callback.searchParams.get("code");
  if (!code) throw new Error("the callback carries no code");
  return code;
}
