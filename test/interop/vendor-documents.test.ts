/**
 * The clients people run, as their vendors publish them (issue 21): Client ID Metadata Documents in
 * the shapes of Claude Code, a claude.ai connector and ChatGPT, served from a loopback HTTPS server
 * with a throw-away CA (hosts moved there, every other value as published), against a real
 * authorization server on loopback, with the redirect URI each client really sends. Each runs the
 * whole flow: sign-in and consent in Chromium, the code at its callback, tokens with a refresh
 * token, a refresh, and a step-up (a second authorization for a wider scope, consented in the same
 * browser session), then a refresh of the stepped-up grant.
 *
 * - Claude Code publishes `http://localhost/callback` and `http://127.0.0.1/callback` and listens on
 *   an ephemeral port (RFC 8252 §7.3: the port may vary);
 * - a claude.ai connector is a public client returning to an https callback (here a loopback HTTPS
 *   server standing in for `https://claude.ai/api/mcp/auth_callback`; matched exactly) whose
 *   `grant_types` also lists jwt-bearer, which a public client is not given;
 * - ChatGPT authenticates with RS256 `private_key_jwt`, keys at its `jwks_uri`, and lists
 *   `token_endpoint_auth_methods_supported: ["none", "private_key_jwt"]`; `none` is refused for it.
 *
 * The browser trusts the callback stand-in's certificate through `ignoreHTTPSErrors` on its own
 * context: that server is the client's, not part of what is tested. The authorization server
 * trusts the documents' CA only through the loudly named loopback opt-in.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PASSWORD, pkcePair } from "../authorization-server/pages/harness.js";
import {
  type FlowServer,
  RESOURCE,
  refresh,
  startFlowServer,
  type TokenBody,
  tokenRequest,
  USERNAME,
} from "../authorization-server/support/flow-server.js";
import { launchChromium } from "../support/browser.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../support/tls.js";
import { ChromiumUser, codeFromCallback } from "./browser-user.js";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const READ = "notes:read";
const READ_WRITE = "notes:read notes:write";

/**
 * A client's redirect endpoint: hands each callback URL to whoever waits for its `state`, so an
 * authorization that failed (and never reached the callback) cannot take another one's code.
 */
class Callbacks {
  readonly #received = new Map<string, URL>();
  readonly #waiting = new Map<string, (url: URL) => void>();

  handler(base: string) {
    return (req: IncomingMessage, res: ServerResponse) => {
      // The browser asks for a favicon too; only the redirect is the client's business.
      if ((req.url ?? "").startsWith("/favicon.ico")) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end("<!doctype html><title>Signed in</title><p>You can close this window.</p>");
      // The host the browser was sent to (localhost or 127.0.0.1), as the client sees it.
      const url = new URL(
        req.url ?? "/",
        `${new URL(base).protocol}//${req.headers.host ?? new URL(base).host}`,
      );
      const state = url.searchParams.get("state") ?? "";
      const waiter = this.#waiting.get(state);
      this.#waiting.delete(state);
      if (waiter) waiter(url);
      else this.#received.set(state, url);
    };
  }

  /** The callback that carries `state` (already received, or the next to arrive). */
  next(state: string): Promise<URL> {
    const ready = this.#received.get(state);
    this.#received.delete(state);
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => this.#waiting.set(state, resolve));
  }
}

/**
 * Claude Code's side of the redirect: an http listener on an ephemeral loopback port, on 127.0.0.1
 * and (when the machine has IPv6 loopback) ::1 too, as a browser resolving `localhost` may try either.
 */
async function loopbackListener(callbacks: Callbacks): Promise<{ port: number; close(): Promise<void> }> {
  const servers: Server[] = [];
  const first = createServer();
  await new Promise<void>((resolve) => first.listen(0, "127.0.0.1", resolve));
  servers.push(first);
  const { port } = first.address() as AddressInfo;
  const second = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      second.once("error", reject);
      second.listen(port, "::1", resolve);
    });
    servers.push(second);
  } catch {
    /* no IPv6 loopback here: 127.0.0.1 alone */
  }
  for (const s of servers) s.on("request", callbacks.handler(`http://127.0.0.1:${port}`));
  return {
    port,
    close: () =>
      Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      ).then(() => undefined),
  };
}

let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
let publicJwk: JWK;
let documents: TestHttpsServer;
let vendorCallbacks: TestHttpsServer;
const httpsCallbacks = new Callbacks();
let server: FlowServer;
let browser: Browser;
const jwksRequests: string[] = [];

const CLAUDE_CODE = "/oauth/claude-code-client-metadata";
const CLAUDE_AI = "/oauth/mcp-oauth-client-metadata";
const CHATGPT = "/oauth/chatgpt/client.json";
const CHATGPT_JWKS = "/oauth/chatgpt/jwks.json";

const claudeAiCallback = () => `${vendorCallbacks.origin}/api/mcp/auth_callback`;
const chatgptCallback = () => `${vendorCallbacks.origin}/connector_platform_oauth_redirect`;

/** The documents, with the vendors' published values and the hosts moved to loopback. */
function publishedDocument(path: string): Record<string, unknown> | undefined {
  const clientId = `${documents.origin}${path}`;
  switch (path) {
    case CLAUDE_CODE:
      return {
        client_id: clientId,
        client_name: "Claude Code",
        client_uri: "https://claude.ai",
        redirect_uris: ["http://localhost/callback", "http://127.0.0.1/callback"],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      };
    case CLAUDE_AI:
      return {
        client_id: clientId,
        client_name: "Claude",
        client_uri: "https://claude.ai",
        redirect_uris: [claudeAiCallback()],
        grant_types: ["authorization_code", "refresh_token", JWT_BEARER],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      };
    case CHATGPT:
      return {
        client_id: clientId,
        client_uri: "https://chatgpt.com/",
        redirect_uris: [chatgptCallback()],
        token_endpoint_auth_method: "private_key_jwt",
        token_endpoint_auth_methods_supported: ["none", "private_key_jwt"],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        client_name: "ChatGPT",
        token_endpoint_auth_signing_alg: "RS256",
        jwks_uri: `${documents.origin}${CHATGPT_JWKS}`,
      };
    default:
      return undefined;
  }
}

beforeAll(async () => {
  rsa = await generateKeyPair("RS256", { extractable: true });
  publicJwk = { ...(await exportJWK(rsa.publicKey)), kid: "chatgpt-1", alg: "RS256", use: "sig" };
  documents = await startTestHttpsServer((req, res) => {
    const path = req.url ?? "";
    if (path === CHATGPT_JWKS) {
      jwksRequests.push(path);
      res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=300" });
      res.end(JSON.stringify({ keys: [publicJwk] }));
      return;
    }
    const document = publishedDocument(path);
    if (!document) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=300" });
    res.end(JSON.stringify(document));
  });
  vendorCallbacks = await startTestHttpsServer((req, res) =>
    httpsCallbacks.handler(vendorCallbacks.origin)(req, res),
  );
  server = await startFlowServer({
    extra: {
      clientMetadataDocuments: { enabled: true, dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] } },
      // The jwt-bearer grant is on (ID-JAG from an identity provider), so that a public document
      // listing it is refused by the client rule, not by a server that lacks the grant.
      enterpriseAuthorization: {
        identityProviders: [
          { issuer: "https://idp.example.test", jwks: { keys: [{ ...publicJwk, kid: "idp" }] } },
        ],
      },
    },
  });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await documents?.close();
  await vendorCallbacks?.close();
});

const user = { id: "u1", username: USERNAME, password: PASSWORD };

/** A client's client authentication at /token: none, or an RS256 assertion with ChatGPT's key. */
type ClientAuth = (clientId: string) => Promise<Record<string, string>>;
const publicClient: ClientAuth = async (clientId) => ({ client_id: clientId });
const chatgptKey: ClientAuth = async (clientId) => ({
  client_id: clientId,
  client_assertion_type: ASSERTION_TYPE,
  client_assertion: await new SignJWT({})
    .setProtectedHeader({ alg: "RS256", kid: "chatgpt-1" })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(`${server.issuer}/token`)
    .setIssuedAt(Math.floor(server.clock.now / 1000))
    .setExpirationTime(Math.floor(server.clock.now / 1000) + 60)
    .setJti(randomBytes(16).toString("base64url"))
    .sign(rsa.privateKey),
});

/** An authorization request for the notes resource with PKCE (OAuth 2.1 §4.1.1). */
function authorizationUrl(p: {
  clientId: string;
  redirectUri: string;
  scope: string;
  challenge: string;
  state: string;
}): URL {
  const url = new URL(`${server.issuer}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    code_challenge: p.challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: p.scope,
    state: p.state,
  }))
    url.searchParams.set(k, v);
  return url;
}

interface Authorized {
  code: string;
  verifier: string;
  login: boolean;
  requested: string[];
}

/** /authorize in Chromium as `user`: signs in when asked, approves, and takes the code at the callback. */
async function authorizeInBrowser(
  context: BrowserContext,
  clientId: string,
  redirectUri: string,
  scope: string,
  callbacks: Callbacks,
): Promise<Authorized> {
  const { verifier, challenge } = pkcePair();
  const state = randomBytes(12).toString("base64url");
  const url = authorizationUrl({ clientId, redirectUri, scope, challenge, state });
  const arrived = callbacks.next(state);
  const visit = await new ChromiumUser(context, user).authorize(url, redirectUri);
  const callback = await arrived;
  expect(`${callback.origin}${callback.pathname}`).toBe(redirectUri.replace(/\?.*$/, ""));
  return {
    code: codeFromCallback(callback, state),
    verifier,
    login: visit.login,
    requested: visit.requested,
  };
}

async function redeem(
  clientId: string,
  redirectUri: string,
  grant: Authorized,
  auth: ClientAuth,
): Promise<{ status: number; body: TokenBody }> {
  return tokenRequest(server.issuer, {
    grant_type: "authorization_code",
    code: grant.code,
    code_verifier: grant.verifier,
    redirect_uri: redirectUri,
    resource: RESOURCE,
    ...(await auth(clientId)),
  });
}

async function refreshWith(clientId: string, refreshToken: string, auth: ClientAuth) {
  if (auth === publicClient) return refresh(server.issuer, clientId, refreshToken);
  return tokenRequest(server.issuer, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    ...(await auth(clientId)),
  });
}

function scopesOf(accessToken: string | undefined): string[] {
  return String(decodeJwt(accessToken ?? "").scope ?? "")
    .split(" ")
    .filter((s) => s !== "")
    .sort();
}

/**
 * The whole flow for one client: login and consent in a fresh Chromium profile, the code, tokens with
 * a refresh token, a refresh, a step-up to notes:write (no second login, a consent page asking for
 * the new scope), its tokens and a refresh of them.
 */
async function wholeFlow(options: {
  clientId: string;
  redirectUri: string;
  callbacks: Callbacks;
  auth: ClientAuth;
  /** Runs between the code and its redemption (a hostile attempt that must not spend the code). */
  beforeRedeem?: (grant: Authorized) => Promise<void>;
}): Promise<void> {
  const { clientId, redirectUri, callbacks, auth } = options;
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  try {
    const first = await authorizeInBrowser(context, clientId, redirectUri, READ, callbacks);
    expect(first.login).toBe(true);
    expect(first.requested).toEqual([READ]);
    await options.beforeRedeem?.(first);
    const tokens = await redeem(clientId, redirectUri, first, auth);
    expect(tokens.status, JSON.stringify(tokens.body)).toBe(200);
    expect(tokens.body.refresh_token).toEqual(expect.any(String));
    expect(scopesOf(tokens.body.access_token)).toEqual([READ]);

    const refreshed = await refreshWith(clientId, tokens.body.refresh_token!, auth);
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(tokens.body.refresh_token);
    expect(scopesOf(refreshed.body.access_token)).toEqual([READ]);

    const stepUp = await authorizeInBrowser(context, clientId, redirectUri, READ_WRITE, callbacks);
    expect(stepUp.login).toBe(false);
    expect(stepUp.requested).toContain("notes:write");
    const wider = await redeem(clientId, redirectUri, stepUp, auth);
    expect(wider.status, JSON.stringify(wider.body)).toBe(200);
    expect(scopesOf(wider.body.access_token)).toEqual(["notes:read", "notes:write"]);
    const widerRefreshed = await refreshWith(clientId, wider.body.refresh_token!, auth);
    expect(widerRefreshed.status, JSON.stringify(widerRefreshed.body)).toBe(200);
    expect(scopesOf(widerRefreshed.body.access_token)).toEqual(["notes:read", "notes:write"]);
  } finally {
    await context.close();
  }
}

async function authorizeStatus(
  clientId: string,
  redirectUri: string,
): Promise<{ status: number; location: string | null }> {
  const url = authorizationUrl({
    clientId,
    redirectUri,
    scope: READ,
    challenge: pkcePair().challenge,
    state: "s",
  });
  const response = await fetch(url, { redirect: "manual" });
  await response.body?.cancel();
  return { status: response.status, location: response.headers.get("location") };
}

describe("Claude Code (http://localhost and http://127.0.0.1 on an ephemeral port, none)", () => {
  const loopback = new Callbacks();
  let listener: Awaited<ReturnType<typeof loopbackListener>>;
  beforeAll(async () => {
    listener = await loopbackListener(loopback);
  });
  afterAll(async () => {
    await listener?.close();
  });

  it("the whole flow with redirect_uri http://localhost:<random port>/callback", async () => {
    await wholeFlow({
      clientId: `${documents.origin}${CLAUDE_CODE}`,
      redirectUri: `http://localhost:${listener.port}/callback`,
      callbacks: loopback,
      auth: publicClient,
    });
  }, 90_000);

  it("the whole flow with redirect_uri http://127.0.0.1:<random port>/callback", async () => {
    await wholeFlow({
      clientId: `${documents.origin}${CLAUDE_CODE}`,
      redirectUri: `http://127.0.0.1:${listener.port}/callback`,
      callbacks: loopback,
      auth: publicClient,
    });
  }, 90_000);

  it("hostile: the port variance reaches no other host, scheme, path or query at /authorize (error page, no redirect)", async () => {
    const clientId = `${documents.origin}${CLAUDE_CODE}`;
    expect(await authorizeStatus(clientId, `http://localhost:${listener.port}/callback`)).toMatchObject({
      status: 303,
    });
    for (const redirectUri of [
      `http://localhost.evil.example:${listener.port}/callback`,
      `http://localhostx:${listener.port}/callback`,
      `http://LOCALHOST:${listener.port}/callback`,
      `http://localhost:${listener.port}@evil.example/callback`,
      `https://localhost:${listener.port}/callback`,
      `http://localhost:${listener.port}/callback/`,
      `http://localhost:${listener.port}/callback?next=https://evil.example`,
      `http://localhost:${listener.port}/Callback`,
      `http://[::1]:${listener.port}/callback`,
    ]) {
      expect(await authorizeStatus(clientId, redirectUri), redirectUri).toEqual({
        status: 400,
        location: null,
      });
    }
  });
});

describe("a claude.ai connector (none, https callback, grant_types listing jwt-bearer)", () => {
  it("the whole flow with its https callback (matched exactly)", async () => {
    await wholeFlow({
      clientId: `${documents.origin}${CLAUDE_AI}`,
      redirectUri: claudeAiCallback(),
      callbacks: httpsCallbacks,
      auth: publicClient,
    });
  }, 90_000);

  it("hostile: the document's jwt-bearer gives the public client no jwt-bearer grant (unauthorized_client)", async () => {
    const clientId = `${documents.origin}${CLAUDE_AI}`;
    const assertion = await new SignJWT({ client_id: clientId })
      .setProtectedHeader({ alg: "RS256", kid: "idp", typ: "oauth-id-jag+jwt" })
      .setIssuer("https://idp.example.test")
      .setSubject("alice")
      .setAudience(server.issuer)
      .setIssuedAt()
      .setExpirationTime("2m")
      .setJti(randomBytes(8).toString("hex"))
      .sign(rsa.privateKey);
    const answer = await tokenRequest(server.issuer, {
      grant_type: JWT_BEARER,
      assertion,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe("unauthorized_client");
    expect(answer.body.access_token).toBeUndefined();
  });

  it("hostile: an https loopback callback gets no port variance", async () => {
    const other = new URL(claudeAiCallback());
    other.port = String(Number(other.port) === 65535 ? 65534 : Number(other.port) + 1);
    expect(await authorizeStatus(`${documents.origin}${CLAUDE_AI}`, other.href)).toEqual({
      status: 400,
      location: null,
    });
  });
});

describe("ChatGPT (RS256 private_key_jwt, keys at jwks_uri, none also listed)", () => {
  it("the whole flow with its key; none is refused for it and does not spend the code", async () => {
    const clientId = `${documents.origin}${CHATGPT}`;
    await wholeFlow({
      clientId,
      redirectUri: chatgptCallback(),
      callbacks: httpsCallbacks,
      auth: chatgptKey,
      beforeRedeem: async (grant) => {
        const downgrade = await redeem(clientId, chatgptCallback(), grant, publicClient);
        expect(downgrade.status).toBe(401);
        expect(downgrade.body.error).toBe("invalid_client");
        expect(downgrade.body.access_token).toBeUndefined();
      },
    });
    // One fetch of the key set served every token request (cached for its max-age).
    expect(jwksRequests).toHaveLength(1);
  }, 90_000);
});
