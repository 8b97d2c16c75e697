/**
 * Drives the authorization code flow over plain HTTP, the way a browser and a client would, against
 * one or several authorization-server instances: GET /authorize with PKCE, the login form (CSRF
 * field parsed from the page, cookies kept by hand), the consent form, the code from the redirect
 * `Location`, then /token. Each step may go to a different instance, as behind a load balancer.
 *
 * Used by the multi-instance and crash tests. `bench/scale.mjs` drives the same steps in plain
 * JavaScript (it runs on the built package, without a TypeScript loader).
 */
import { createHash, randomBytes } from "node:crypto";

/** A cookie jar shared across instances (behind one load balancer they are one origin). */
export class Browser {
  readonly cookies = new Map<string, string>();
  /** Sent as `X-Forwarded-For` (instances started with `--trust-proxy` see it as the client address). */
  constructor(readonly forwardedFor?: string) {}

  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    if (this.forwardedFor) headers.set("x-forwarded-for", this.forwardedFor);
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = line.split(";");
      const eq = pair.indexOf("=");
      if (eq < 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (value === "" || attributes.some((a) => /^\s*max-age=0\s*$/i.test(a))) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }

  postForm(url: string, form: Record<string, string>): Promise<Response> {
    return this.request(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
  }
}

/** RFC 7636 §4.1-4.2: a fresh verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

/** The hidden inputs of a page's form (name → value), entities decoded. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]!] ??= m[2]!
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&amp;/g, "&");
  }
  return out;
}

/**
 * A client's user agent on this repository's authorization pages: it follows the redirects from
 * `authorizationUrl`, signs `username` in and approves consent, and answers the URL of the first
 * redirect to `redirectUri` (the callback).
 */
export function consentingUserAgent(
  browser: Browser,
  user: { issuer: string; username: string; password: string; redirectUri: string },
): (authorizationUrl: URL) => Promise<string> {
  return async (authorizationUrl) => {
    let response = await browser.request(authorizationUrl.href);
    for (let hops = 0; hops < 6; hops++) {
      const location = response.headers.get("location");
      if (response.status === 303 || response.status === 302) {
        if (!location) throw new Error("redirect without a location");
        if (location.startsWith(user.redirectUri)) return location;
        response = await browser.request(new URL(location, user.issuer).href);
        continue;
      }
      if (response.status !== 200) throw new Error(`the authorization pages answered ${response.status}`);
      const page = await response.text();
      const fields = hiddenFields(page);
      const action = page.includes('name="password"') ? "/login" : "/consent";
      response = await browser.postForm(
        `${user.issuer}${action}`,
        action === "/login"
          ? { ...fields, username: user.username, password: user.password }
          : { ...fields, decision: "approve" },
      );
    }
    throw new Error("the authorization pages did not send the browser back to the client");
  };
}

export type FlowStep = "authorize" | "login" | "consent" | "token";

export interface FlowOptions {
  /** Base URL (`http://127.0.0.1:port`) of the instance serving each step. */
  instanceFor: (step: FlowStep) => string;
  clientId: string;
  redirectUri: string;
  resource: string;
  scope: string;
  user: { username: string; password: string };
  browser?: Browser;
}

export interface ObtainedCode {
  code: string;
  verifier: string;
  state: string;
  /** The browser that ran the flow (its cookies carry the session into a next flow). */
  browser: Browser;
}

async function expectStatus(response: Response, status: number, what: string): Promise<void> {
  if (response.status !== status) {
    const body = (await response.text()).slice(0, 300);
    throw new Error(`${what} answered ${response.status}, expected ${status}: ${body}`);
  }
}

/** Resolves a `Location` (absolute or relative to the issuer path) against the instance of the next step. */
function onInstance(location: string, base: string): string {
  const url = new URL(location, base);
  return `${base}${url.pathname}${url.search}`;
}

/**
 * /authorize → /login → /consent → redirect: returns the code, with the verifier to redeem it.
 * Throws with the step and status when anything else happens.
 */
export async function obtainCode(options: FlowOptions): Promise<ObtainedCode> {
  const browser = options.browser ?? new Browser();
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(12).toString("base64url");
  const query = new URLSearchParams({
    response_type: "code",
    client_id: options.clientId,
    redirect_uri: options.redirectUri,
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: options.resource,
    scope: options.scope,
    state,
  });
  const start = await browser.request(`${options.instanceFor("authorize")}/authorize?${query}`);
  await expectStatus(start, 303, "GET /authorize");
  let location = start.headers.get("location") ?? "";

  if (new URL(location, "http://x").pathname.endsWith("/login")) {
    const base = options.instanceFor("login");
    const page = await browser.request(onInstance(location, base));
    if (page.status === 303) {
      // Already signed in (a session from an earlier flow): the page sends us on.
      location = page.headers.get("location") ?? "";
    } else {
      await expectStatus(page, 200, "GET /login");
      const fields = hiddenFields(await page.text());
      const done = await browser.postForm(`${base}/login`, {
        ...fields,
        username: options.user.username,
        password: options.user.password,
      });
      await expectStatus(done, 303, "POST /login");
      location = done.headers.get("location") ?? "";
    }
  }
  if (new URL(location, "http://x").pathname.endsWith("/consent")) {
    const base = options.instanceFor("consent");
    const page = await browser.request(onInstance(location, base));
    if (page.status === 303) {
      // An earlier consent covers the request: straight back to the client.
      location = page.headers.get("location") ?? "";
    } else {
      await expectStatus(page, 200, "GET /consent");
      const fields = hiddenFields(await page.text());
      const done = await browser.postForm(`${base}/consent`, { ...fields, decision: "approve" });
      await expectStatus(done, 303, "POST /consent");
      location = done.headers.get("location") ?? "";
    }
  }
  if (!location.startsWith(options.redirectUri)) {
    throw new Error(
      `the flow did not end at the client's redirect URI (ended at ${new URL(location, "http://x").pathname})`,
    );
  }
  const callback = new URL(location).searchParams;
  const code = callback.get("code");
  if (!code) throw new Error(`the redirect carries no code (error=${callback.get("error")})`);
  if (callback.get("state") !== state) throw new Error("the redirect carries the wrong state");
  return { code, verifier, state, browser };
}

/** POST /token with `grant_type=authorization_code` for a public client. */
export function redeemCode(
  base: string,
  options: Pick<FlowOptions, "clientId" | "redirectUri" | "resource">,
  obtained: Pick<ObtainedCode, "code" | "verifier">,
): Promise<Response> {
  return postToken(base, {
    grant_type: "authorization_code",
    code: obtained.code,
    code_verifier: obtained.verifier,
    client_id: options.clientId,
    redirect_uri: options.redirectUri,
    resource: options.resource,
  });
}

/** POST /token with `grant_type=refresh_token` for a public client. */
export function refreshGrant(base: string, clientId: string, refreshToken: string): Promise<Response> {
  return postToken(base, { grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId });
}

export function postToken(base: string, form: Record<string, string>): Promise<Response> {
  return fetch(`${base}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams(form).toString(),
  });
}

export interface TokenSet {
  access_token: string;
  refresh_token?: string;
  token_type: string;
  expires_in: number;
  scope?: string;
}

/** Reads a 200 token response, or throws with its status and OAuth error. */
export async function tokenSet(response: Response): Promise<TokenSet> {
  const body = (await response.json()) as Record<string, unknown>;
  if (response.status !== 200 || typeof body.access_token !== "string") {
    throw new Error(`token endpoint answered ${response.status} ${String(body.error ?? "")}`);
  }
  return body as unknown as TokenSet;
}

/** The protected header of a JWT (for `kid`). */
export function jwtHeader(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split(".")[0] ?? "", "base64url").toString("utf8")) as Record<
    string,
    unknown
  >;
}
