/**
 * Upstream providers on a private network (`allowPrivateNetwork`, `ca`), against real HTTPS
 * servers on private and link-local addresses added to the loopback interface for this file
 * (test/support/private-network.ts), with certificates from a private CA that only the provider's
 * `ca` makes trusted. No provider here uses the tests-only loopback opt-in.
 *
 * - a real sign-in through oidc-provider served on 10.78.0.1, in Chromium, to tokens;
 * - without the setting, a provider on a private address is unreachable (and no request reaches it);
 * - the setting is one provider's: another provider on the same network stays refused;
 * - a private-network provider's discovery document may name endpoints on another private host,
 *   but never link-local (169.254.x.y, the metadata address 169.254.169.254): its own rules apply;
 * - the library options and `gatehouse serve`'s config file are checked at start-up.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import Provider from "oidc-provider";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UpstreamProviderOptions } from "../../../src/authorization-server/core/upstream-options.js";
import { createAuthorizationServer } from "../../../src/authorization-server/index.js";
import { parseCommandArgs, UsageError } from "../../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../../src/cli/config.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import type { Logger } from "../../../src/shared/log.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { launchChromium } from "../../support/browser.js";
import {
  addAddressToLoopback,
  type HttpsServerOn,
  type PrivateTls,
  privateCaFor,
  startHttpsServerOn,
} from "../../support/private-network.js";
import { testTls } from "../../support/tls.js";
import { Agent, hiddenFields } from "../pages/harness.js";
import {
  type Gatehouse,
  type McpClient,
  pressProviderButton,
  RESOURCE,
  registerMcpClient,
  UPSTREAM_CLIENT_ID,
  UPSTREAM_CLIENT_SECRET,
} from "./support.js";

/** oidc-provider (the real sign-in). */
const CORP = "10.78.0.1";
/** A scripted provider's issuer (several tenants, told apart by the issuer's path). */
const SCRIPTED = "10.78.0.2";
/** Another private host: where a discovery document may send the token and key requests. */
const OTHER = "10.78.0.3";
/** A link-local host with a real server on it: never reachable, whatever the provider says. */
const LINK_LOCAL = "169.254.78.1";

let tls: PrivateTls;
const cleanups: (() => void)[] = [];
const servers: HttpsServerOn[] = [];
let corp: HttpsServerOn;
let scripted: HttpsServerOn;
let other: HttpsServerOn;
let linkLocal: HttpsServerOn;
/** Every request the scripted servers received: origin and path. */
const seen: { origin: string; path: string }[] = [];
const warnings: Record<string, unknown>[] = [];
let gatehouse: Gatehouse;
let client: McpClient;
let browser: Browser;

// ---------------------------------------------------------------------------------------------
// The providers
// ---------------------------------------------------------------------------------------------

/**
 * A scripted OpenID Connect provider spread over the servers on SCRIPTED, OTHER and LINK_LOCAL:
 * the issuer `https://SCRIPTED/<tenant>` names its token endpoint and keys at the host the tenant
 * says, so a discovery document can send Gatehouse elsewhere.
 */
const TENANTS: Record<string, () => { token: string; jwks: string }> = {
  "same-host": () => ({ token: scripted.origin, jwks: scripted.origin }),
  "other-host": () => ({ token: other.origin, jwks: other.origin }),
  "keys-link-local": () => ({ token: other.origin, jwks: linkLocal.origin }),
  "token-at-metadata": () => ({ token: "https://169.254.169.254", jwks: other.origin }),
};

async function scriptedHandler(): Promise<
  (origin: () => string) => (req: IncomingMessage, res: ServerResponse) => void
> {
  const key = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const codes = new Map<string, { nonce: string; issuer: string }>();
  const json = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  return (origin) => (req, res) => {
    const url = new URL(req.url ?? "/", origin());
    seen.push({ origin: origin(), path: url.pathname });
    const [, tenant = "", ...rest] = url.pathname.split("/");
    const route = `/${rest.join("/")}`;
    const issuer = `${scripted.origin}/${tenant}`;
    const hosts = TENANTS[tenant]?.();
    if (!hosts) return json(res, 404, {});
    if (route === "/.well-known/openid-configuration") {
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${hosts.token}/${tenant}/token`,
        jwks_uri: `${hosts.jwks}/${tenant}/jwks`,
        response_types_supported: ["code"],
      });
    }
    if (route === "/jwks") return json(res, 200, { keys: [jwk] });
    if (route === "/authorize") {
      const code = randomBytes(16).toString("base64url");
      codes.set(code, { nonce: url.searchParams.get("nonce") ?? "", issuer });
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("code", code);
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      res.writeHead(302, { location: target.href }).end();
      return;
    }
    if (route === "/token") {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        const grant = codes.get(new URLSearchParams(Buffer.concat(chunks).toString()).get("code") ?? "");
        if (!grant) return json(res, 400, { error: "invalid_grant" });
        const now = Math.floor(Date.now() / 1000);
        const idToken = await new SignJWT({
          iss: grant.issuer,
          aud: UPSTREAM_CLIENT_ID,
          sub: `user-of-${tenant}`,
          iat: now,
          exp: now + 300,
          nonce: grant.nonce,
          email: "ada@example.com",
          email_verified: true,
        })
          .setProtectedHeader({ alg: "ES256", kid: "k1" })
          .sign(key.privateKey);
        json(res, 200, {
          access_token: randomBytes(16).toString("hex"),
          token_type: "Bearer",
          id_token: idToken,
        });
      });
      return;
    }
    json(res, 404, {});
  };
}

/** oidc-provider on CORP (its devInteractions login and consent pages stand in for the user). */
async function startOidcProviderOnCorp(redirectUri: string): Promise<HttpsServerOn> {
  const key = await generateKeyPair("RS256", { extractable: true });
  let callback: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = await startHttpsServerOn(CORP, tls, (req, res) => callback!(req, res));
  const provider = new Provider(server.origin, {
    jwks: { keys: [{ ...(await exportJWK(key.privateKey)), kid: "rsa-1", alg: "RS256", use: "sig" }] },
    cookies: { keys: ["gatehouse-private-network-test-cookie-key"] },
    clients: [
      {
        client_id: UPSTREAM_CLIENT_ID,
        client_secret: UPSTREAM_CLIENT_SECRET,
        redirect_uris: [redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"] },
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id, email: `${id}@example.com`, email_verified: true }),
    }),
  });
  provider.on("server_error", () => {});
  callback = provider.callback();
  return server;
}

const scriptedProvider = (
  tenant: string,
  extra: Partial<UpstreamProviderOptions> = {},
): UpstreamProviderOptions => ({
  id: tenant,
  kind: "oidc",
  issuer: `${scripted.origin}/${tenant}`,
  clientId: UPSTREAM_CLIENT_ID,
  clientSecret: UPSTREAM_CLIENT_SECRET,
  createAccounts: true,
  allowPrivateNetwork: true,
  ca: tls.ca,
  ...extra,
});

beforeAll(async () => {
  for (const address of [CORP, SCRIPTED, OTHER, LINK_LOCAL]) cleanups.push(addAddressToLoopback(address));
  tls = privateCaFor([CORP, SCRIPTED, OTHER, LINK_LOCAL]);
  const handler = await scriptedHandler();
  scripted = await startHttpsServerOn(
    SCRIPTED,
    tls,
    handler(() => scripted.origin),
  );
  other = await startHttpsServerOn(
    OTHER,
    tls,
    handler(() => other.origin),
  );
  linkLocal = await startHttpsServerOn(
    LINK_LOCAL,
    tls,
    handler(() => linkLocal.origin),
  );
  servers.push(scripted, other, linkLocal);

  // Gatehouse on plain-http loopback, without the tests-only loopback opt-in for its providers.
  let server: Awaited<ReturnType<typeof createAuthorizationServer>> | undefined;
  const http: ListeningServer = await listen((request, info) => server!.fetch(request, info));
  corp = await startOidcProviderOnCorp(`${http.url}/upstream/corp/callback`);
  servers.push(corp);
  const logger: Logger = { info() {}, error() {}, warn: (_e, fields) => warnings.push(fields ?? {}) };
  const store = createMemoryStore();
  server = await createAuthorizationServer({
    issuer: http.url,
    store,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read"] }],
    allowInsecureLoopback: true,
    logger,
    maintenanceIntervalMs: 0,
    upstreamSignIn: {
      providers: [
        {
          id: "corp",
          preset: "keycloak",
          displayName: "Corp SSO",
          issuer: corp.origin,
          clientId: UPSTREAM_CLIENT_ID,
          clientSecret: UPSTREAM_CLIENT_SECRET,
          createAccounts: true,
          allowPrivateNetwork: true,
          ca: tls.ca,
        },
        scriptedProvider("same-host"),
        scriptedProvider("other-host"),
        scriptedProvider("keys-link-local"),
        scriptedProvider("token-at-metadata"),
        // On the same network, with the same CA, but without the setting.
        scriptedProvider("same-host", { id: "not-opted-in", allowPrivateNetwork: false }),
      ],
    },
  });
  gatehouse = {
    url: http.url,
    server,
    store,
    callbackUrl: (id) => `${http.url}/upstream/${id}/callback`,
    close: async () => {
      await server?.close();
      await http.close();
    },
  };
  client = await registerMcpClient(gatehouse.url);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await gatehouse?.close();
  await Promise.all(servers.map((s) => s.close()));
  for (const cleanup of cleanups) cleanup();
});

/** A browser's visit to a scripted provider's page (which the private CA signs). */
function visit(url: string): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ca: tls.ca }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, location: res.headers.location }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Presses `providerId`'s button and follows the provider's answer back to Gatehouse's callback. */
async function signIn(providerId: string): Promise<{ status: number; text: string }> {
  const agent = new Agent(gatehouse.url);
  const atProvider = await visit(await pressProviderButton(agent, providerId));
  expect(atProvider.status).toBe(302);
  const back = await agent.get(atProvider.location!);
  return { status: back.status, text: await back.text() };
}

const detailsOf = (providerId: string) =>
  warnings.filter((w) => w.upstream_provider === providerId).map((w) => String(w.detail));

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

describe("a provider on the operator's private network", () => {
  it("a real sign-in through oidc-provider on 10.78.0.1 (Chromium): login page → provider → consent → tokens", async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page: Page = await context.newPage();
    let reached: (url: URL) => void = () => {};
    const redirect = new Promise<URL>((r) => {
      reached = r;
    });
    await page.route(`${client.redirectUri}**`, async (route) => {
      reached(new URL(route.request().url()));
      await route.fulfill({ status: 200, contentType: "text/plain", body: "back at the MCP client" });
    });
    await page.goto(client.authorizeUrl("private-1"));
    await page.getByRole("button", { name: "Continue with Corp SSO" }).click();
    await page.waitForURL((u) => u.origin === corp.origin);
    expect(new URL(page.url()).hostname).toBe(CORP);
    await page.locator('input[name="login"]').fill("ada");
    await page.locator('input[name="password"]').fill("anything");
    await page.screenshot({ path: "/tmp/upstream-private-network-provider.png", fullPage: true });
    await page.getByRole("button", { name: "Sign-in" }).click();
    await page.waitForURL((u) => u.origin !== corp.origin || u.pathname.startsWith("/interaction"));
    if (new URL(page.url()).origin === corp.origin)
      await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL((u) => u.origin === gatehouse.url);
    expect(new URL(page.url()).pathname).toBe("/consent");
    await expect(page.getByTestId("username").textContent()).resolves.toBe("corp:ada@example.com");
    await page.screenshot({ path: "/tmp/upstream-private-network-consent.png", fullPage: true });
    await page.getByRole("button", { name: "Allow" }).click();
    const response = await redirect;
    expect(response.searchParams.get("state")).toBe("private-1");
    const tokens = await client.redeem(response.searchParams.get("code")!);
    expect(tokens.status).toBe(200);
    expect(await gatehouse.store.getUpstreamIdentity("corp", "ada")).toMatchObject({
      email: "ada@example.com",
      emailVerified: true,
    });
    await context.close();
  });

  it("without the setting, a provider on a private address is unreachable and receives nothing", async () => {
    const before = seen.length;
    const agent = new Agent(gatehouse.url);
    const login = await agent.get("/login");
    const started = await agent.post("/login", {
      ...hiddenFields(await login.text()),
      upstream: "not-opted-in",
    });
    expect(started.status).toBe(502);
    expect(await started.text()).toContain("Sign-in provider unreachable");
    // Refused at the address check (not a network failure), before a request was sent.
    expect(detailsOf("not-opted-in").some((d) => d.includes("refused address (private 10.0.0.0/8)"))).toBe(
      true,
    );
    expect(seen.slice(before)).toEqual([]);
  });

  it("the setting is the provider's own: the same issuer under an opted-in provider signs in", async () => {
    const result = await signIn("same-host");
    expect(result.status).toBe(303);
    expect(await gatehouse.store.getUpstreamIdentity("same-host", "user-of-same-host")).toBeTruthy();
    // And the provider beside it is still refused, after the other's discovery and sign-in.
    const agent = new Agent(gatehouse.url);
    const login = await agent.get("/login");
    const again = await agent.post("/login", {
      ...hiddenFields(await login.text()),
      upstream: "not-opted-in",
    });
    expect(again.status).toBe(502);
  });

  it("discovery may name the token endpoint and keys on another private host: reached under the provider's rules", async () => {
    const before = seen.length;
    const result = await signIn("other-host");
    expect(result.status).toBe(303);
    const reachedOther = seen
      .slice(before)
      .filter((s) => s.origin === other.origin)
      .map((s) => s.path);
    expect(reachedOther).toEqual(expect.arrayContaining(["/other-host/token", "/other-host/jwks"]));
  });

  it("discovery naming keys on a link-local host (a real server there) fails the sign-in, nothing sent there", async () => {
    const connections = linkLocal.connections();
    const result = await signIn("keys-link-local");
    expect(result.status).toBe(502);
    expect(result.text).toContain("Sign-in provider unreachable");
    expect(linkLocal.connections()).toBe(connections);
    expect(detailsOf("keys-link-local").some((d) => d.includes("link-local 169.254.0.0/16"))).toBe(true);
    expect(
      await gatehouse.store.getUpstreamIdentity("keys-link-local", "user-of-keys-link-local"),
    ).toBeFalsy();
  });

  it("discovery naming the metadata address as the token endpoint: refused before any connection", async () => {
    const result = await signIn("token-at-metadata");
    expect(result.status).toBe(502);
    expect(detailsOf("token-at-metadata")).toContain("token endpoint: blocked_address");
  });
});

describe("configuration, checked at start-up", () => {
  const base = (provider: Record<string, unknown>) =>
    createAuthorizationServer({
      issuer: "http://127.0.0.1:9",
      store: createMemoryStore(),
      resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read"] }],
      allowInsecureLoopback: true,
      maintenanceIntervalMs: 0,
      upstreamSignIn: {
        providers: [
          {
            id: "kc",
            preset: "keycloak",
            issuer: "https://sso.corp.test/realms/x",
            clientId: "c",
            ...provider,
          },
        ] as UpstreamProviderOptions[],
      },
    });

  it("refuses a non-boolean allowPrivateNetwork, and a ca that is not PEM certificates, naming the option", async () => {
    await expect(base({ allowPrivateNetwork: "yes" })).rejects.toThrow(
      "upstreamSignIn.providers[0].allowPrivateNetwork must be a boolean",
    );
    await expect(base({ ca: "not a certificate" })).rejects.toThrow(
      "upstreamSignIn.providers[0].ca holds no PEM",
    );
    await expect(base({ ca: ["x"] })).rejects.toThrow("upstreamSignIn.providers[0].ca must be a PEM string");
    const garbled = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    await expect(base({ ca: garbled })).rejects.toThrow("certificate 1 does not parse");
    // A private key pasted by mistake is refused without being quoted.
    const keyPem = testTls().key;
    const error = await base({ ca: `${tls.ca}${keyPem}` }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toContain("must hold only certificates (found a PEM private key)");
    expect(error?.message).not.toContain(keyPem.split("\n")[1]!);
  });

  it("accepts a CA bundle (several certificates) and the setting", async () => {
    const server = await base({ allowPrivateNetwork: true, ca: `${tls.ca}\n${testTls().ca}` });
    await server.close();
  });

  const dir = mkdtempSync(join(tmpdir(), "gatehouse-private-network-config-"));
  const build = (provider: Record<string, unknown>) => {
    const file = join(mkdtempSync(join(dir, "c-")), "gatehouse.json");
    writeFileSync(file, JSON.stringify({ upstreamSignIn: { providers: [provider] } }));
    writeFileSync(join(file, "..", "corp-ca.pem"), tls.ca);
    writeFileSync(join(file, "..", "not-a-ca.pem"), "hello\n");
    return buildServeConfig(
      parseCommandArgs(
        [
          "--insecure-loopback",
          "--resource",
          "http://localhost:9001",
          "--scopes",
          "notes:read",
          "--data",
          dir,
          "--config",
          file,
        ],
        SERVE_OPTIONS,
      ),
    );
  };
  const keycloak = { id: "kc", preset: "keycloak", issuer: "https://sso.corp.test/realms/x", clientId: "c" };

  it("gatehouse serve: allowPrivateNetwork and caFile (read beside the config file) reach the provider options", () => {
    const config = build({ ...keycloak, allowPrivateNetwork: true, caFile: "corp-ca.pem" });
    const provider = config.server.upstreamSignIn!.providers[0]!;
    expect(provider.allowPrivateNetwork).toBe(true);
    expect(provider.ca).toBe(tls.ca);
    expect(provider).not.toHaveProperty("caFile");
  });

  it("gatehouse serve: a missing or non-PEM caFile, or a non-boolean setting, is a usage error naming it", () => {
    const message = (provider: Record<string, unknown>) => {
      try {
        build(provider);
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        return (error as Error).message;
      }
      throw new Error("expected a usage error");
    };
    expect(message({ ...keycloak, caFile: "absent.pem" })).toContain("cannot read caFile");
    expect(message({ ...keycloak, caFile: "not-a-ca.pem" })).toContain(
      "upstreamSignIn.providers[0].ca holds no PEM",
    );
    expect(message({ ...keycloak, allowPrivateNetwork: "yes" })).toContain("allowPrivateNetwork");
    // The PEM itself never sits in the config file: `ca` there is an unknown key.
    expect(message({ ...keycloak, ca: tls.ca })).toMatch(/unrecognized key.*"ca"/i);
  });
});
