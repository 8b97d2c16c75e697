/**
 * `gatehouse demo --upstream-demo`: the built-in OpenID Connect provider (src/demo/identity-provider.ts)
 * on loopback HTTPS with its self-signed certificate, and Gatehouse configured by the demo's own
 * `demoUpstreamSignIn`: the login page offers "Continue with Demo identity provider", and an MCP
 * client's whole flow goes through it (provider page, Gatehouse consent, code, tokens), offline.
 * Then the provider's own refusals: an unregistered redirect URI, a wrong client secret, a wrong
 * PKCE verifier, a spent code, and a refresh token used twice.
 */
import { createHash, randomBytes } from "node:crypto";
import { request as httpsRequest } from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import {
  DEMO_IDP_ID,
  type DemoIdentityProvider,
  demoUpstreamSignIn,
  startDemoIdentityProvider,
} from "../../src/demo/identity-provider.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { silentLogger } from "../../src/shared/log.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { Agent, hiddenFields } from "../authorization-server/pages/harness.js";
import { registerMcpClient } from "../authorization-server/upstream/support.js";

const RESOURCE = "https://notes.example/mcp";

let http: ListeningServer;
let server: AuthorizationServer | undefined;
let idp: DemoIdentityProvider;
const store = createMemoryStore();

beforeAll(async () => {
  http = await listen((request, info) => server!.fetch(request, info));
  idp = await startDemoIdentityProvider({ redirectUri: `${http.url}/upstream/${DEMO_IDP_ID}/callback` });
  server = await createAuthorizationServer({
    issuer: http.url,
    store,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    dynamicRegistration: { enabled: true },
    upstreamSignIn: demoUpstreamSignIn(idp),
  });
});
afterAll(async () => {
  await server?.close();
  await http?.close();
  await idp?.close();
});

/** A request to the demo provider, trusting its self-signed certificate (as the demo does). */
function atProvider(
  url: string,
  init: { form?: Record<string, string>; authorization?: string } = {},
): Promise<{ status: number; location: string | undefined; body: string }> {
  const body = init.form === undefined ? undefined : new URLSearchParams(init.form).toString();
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
  if (init.authorization !== undefined) headers.authorization = init.authorization;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method: body === undefined ? "GET" : "POST", ca: idp.certificate, headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            location: res.headers.location,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const basic = (secret: string) => `Basic ${Buffer.from(`${idp.clientId}:${secret}`).toString("base64")}`;

/** The hidden fields of the provider's sign-in page. */
function providerFields(html: string): Record<string, string> {
  return Object.fromEntries(
    [...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
      m[1]!,
      m[2]!.replace(/&#38;/g, "&"),
    ]),
  );
}

describe("gatehouse demo --upstream-demo", () => {
  it("the login page offers the demo provider, and an MCP client's flow signs in through it", async () => {
    const client = await registerMcpClient(http.url);
    const agent = new Agent(http.url);
    const toLogin = await agent.get(client.authorizeUrl("demo-flow").replace(http.url, ""));
    expect(toLogin.status).toBe(303);
    const login = await agent.get(toLogin.headers.get("location")!);
    const page = await login.text();
    expect(page).toContain("Continue with Demo identity provider");
    expect(page).toContain(`value="${DEMO_IDP_ID}"`);

    const started = await agent.post("/login", { ...hiddenFields(page), upstream: DEMO_IDP_ID });
    expect(started.status).toBe(303);
    const providerUrl = started.headers.get("location")!;
    expect(providerUrl.startsWith(`${idp.issuer}/authorize?`)).toBe(true);
    const signIn = await atProvider(providerUrl);
    expect(signIn.status).toBe(200);
    expect(signIn.body).toContain("Demo identity provider");
    const back = await atProvider(`${idp.issuer}/authorize`, {
      form: { ...providerFields(signIn.body), username: "alice", decision: "approve" },
    });
    expect(back.status).toBe(303);
    expect(back.location!.startsWith(`${http.url}/upstream/${DEMO_IDP_ID}/callback?`)).toBe(true);

    const done = await agent.get(back.location!);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toMatch(/^\/consent\?interaction=/);
    const consent = await agent.get(done.headers.get("location")!);
    const consentPage = await consent.text();
    expect(consentPage).toContain(`${DEMO_IDP_ID}:`);
    const approved = await agent.post("/consent", { ...hiddenFields(consentPage), decision: "approve" });
    const redirect = new URL(approved.headers.get("location")!);
    expect(redirect.searchParams.get("state")).toBe("demo-flow");
    const tokens = await client.redeem(redirect.searchParams.get("code")!);
    expect(tokens.status).toBe(200);
    const identity = await store.getUpstreamIdentity(DEMO_IDP_ID, "alice");
    expect(identity).toMatchObject({ email: "alice@demo.example", emailVerified: true });
    const claims = JSON.parse(
      Buffer.from(String(tokens.body.access_token).split(".")[1]!, "base64url").toString(),
    );
    expect(claims.sub).toBe(identity!.userId);
  });

  it("Cancel at the provider ends on Gatehouse's 'cancelled' page", async () => {
    const agent = new Agent(http.url);
    const login = await agent.get("/login");
    const started = await agent.post("/login", {
      ...hiddenFields(await login.text()),
      upstream: DEMO_IDP_ID,
    });
    const signIn = await atProvider(started.headers.get("location")!);
    const back = await atProvider(`${idp.issuer}/authorize`, {
      form: { ...providerFields(signIn.body), decision: "cancel" },
    });
    const page = await agent.get(back.location!);
    expect(page.status).toBe(400);
    expect(await page.text()).toMatch(/cancel/i);
  });
});

describe("the demo provider's own rules", () => {
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const redirectUri = "http://127.0.0.1:9/nowhere";

  async function codeFor(username: string): Promise<string> {
    const params = new URLSearchParams({
      response_type: "code",
      client_id: idp.clientId,
      redirect_uri: `${http.url}/upstream/${DEMO_IDP_ID}/callback`,
      code_challenge: challenge,
      code_challenge_method: "S256",
      scope: "openid",
      state: "s",
    });
    const page = await atProvider(`${idp.issuer}/authorize?${params}`);
    const back = await atProvider(`${idp.issuer}/authorize`, {
      form: { ...providerFields(page.body), username, decision: "approve" },
    });
    return new URL(back.location!).searchParams.get("code")!;
  }

  const redeem = (code: string, secret: string, codeVerifier = verifier) =>
    atProvider(`${idp.issuer}/token`, {
      authorization: basic(secret),
      form: {
        grant_type: "authorization_code",
        code,
        redirect_uri: `${http.url}/upstream/${DEMO_IDP_ID}/callback`,
        code_verifier: codeVerifier,
      },
    });

  it("refuses an unregistered redirect URI and a missing PKCE challenge, as text, not a redirect", async () => {
    const wrong = await atProvider(
      `${idp.issuer}/authorize?${new URLSearchParams({ response_type: "code", client_id: idp.clientId, redirect_uri: redirectUri, code_challenge: challenge, code_challenge_method: "S256" })}`,
    );
    expect(wrong.status).toBe(400);
    expect(wrong.location).toBeUndefined();
    const noPkce = await atProvider(
      `${idp.issuer}/authorize?${new URLSearchParams({ response_type: "code", client_id: idp.clientId, redirect_uri: `${http.url}/upstream/${DEMO_IDP_ID}/callback` })}`,
    );
    expect(noPkce.status).toBe(400);
  });

  it("a wrong client secret, a wrong verifier and a spent code are refused", async () => {
    const code = await codeFor("bob");
    expect((await redeem(code, "not-the-secret")).status).toBe(401);
    expect(JSON.parse((await redeem(code, idp.clientSecret, "x".repeat(43))).body).error).toBe(
      "invalid_grant",
    );
    // The wrong verifier spent the code.
    expect(JSON.parse((await redeem(code, idp.clientSecret)).body).error).toBe("invalid_grant");
  });

  it("refresh tokens rotate: the old one is refused after use", async () => {
    const issued = JSON.parse((await redeem(await codeFor("carol"), idp.clientSecret)).body);
    expect(issued.id_token.split(".")).toHaveLength(3);
    const refresh = (token: string) =>
      atProvider(`${idp.issuer}/token`, {
        authorization: basic(idp.clientSecret),
        form: { grant_type: "refresh_token", refresh_token: token },
      });
    const next = await refresh(issued.refresh_token);
    expect(next.status).toBe(200);
    expect(JSON.parse(next.body).refresh_token).not.toBe(issued.refresh_token);
    expect(JSON.parse((await refresh(issued.refresh_token)).body).error).toBe("invalid_grant");
  });
});
