/**
 * The browser side wired into `createAuthorizationServer`: /authorize → login → consent → code,
 * redeemed at the token endpoint with the PKCE verifier; an issuer with a path prefix keeps every
 * page link and redirect under it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import {
  type AuthorizationServer,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { silentLogger } from "../../../src/shared/log.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { Agent, hiddenFields, PASSWORD, pkcePair } from "../pages/harness.js";

const RESOURCE = "https://notes.example/mcp";
const REDIRECT = "http://127.0.0.1/callback";

let http: ListeningServer;
let as: AuthorizationServer | undefined;
let issuer: string;

beforeAll(async () => {
  http = await listen((request, info) =>
    as ? as.fetch(request, info) : Promise.resolve(new Response(null, { status: 503 })),
  );
  issuer = `${http.url}/tenant-a`;
  const store = createMemoryStore();
  as = await createAuthorizationServer({
    issuer,
    store,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    scopeDescriptions: { "notes:read": "Read your notes" },
    clients: [
      {
        clientId: "cli",
        source: "preregistered",
        clientName: "Notes CLI",
        redirectUris: [REDIRECT],
        grantTypes: ["authorization_code", "refresh_token"],
        responseTypes: ["code"],
        tokenEndpointAuthMethod: "none",
        metadata: {},
        createdAt: Date.now(),
      },
    ],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
  });
  await store.createUser({
    id: "u1",
    username: "alice",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
});

afterAll(async () => {
  await as?.close();
  await http?.close();
});

describe("authorization code flow through createAuthorizationServer", () => {
  it("issues a code the token endpoint redeems once, with pages under the issuer path", async () => {
    const agent = new Agent(http.url);
    const { verifier, challenge } = pkcePair();
    const redirectUri = "http://127.0.0.1:40123/callback"; // loopback: the port may vary
    const query = new URLSearchParams({
      response_type: "code",
      client_id: "cli",
      redirect_uri: redirectUri,
      code_challenge: challenge,
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "notes:read offline_access",
      state: "flow-state",
    });
    const start = await agent.get(`${issuer}/authorize?${query}`);
    expect(start.status).toBe(303);
    const loginPath = start.headers.get("location")!;
    expect(loginPath).toMatch(/^\/tenant-a\/login\?interaction=/);
    const loginPage = await agent.get(loginPath);
    const loginHtml = await loginPage.text();
    expect(loginHtml).toContain('action="/tenant-a/login"');
    const loggedIn = await agent.post("/tenant-a/login", {
      ...hiddenFields(loginHtml),
      username: "alice",
      password: PASSWORD,
    });
    expect(loggedIn.status).toBe(303);
    const consentPath = loggedIn.headers.get("location")!;
    expect(consentPath).toMatch(/^\/tenant-a\/consent\?interaction=/);
    const consentHtml = await (await agent.get(consentPath)).text();
    expect(consentHtml).toContain("Notes CLI");
    const decided = await agent.post("/tenant-a/consent", {
      ...hiddenFields(consentHtml),
      decision: "approve",
    });
    expect(decided.status).toBe(303);
    const back = new URL(decided.headers.get("location")!);
    expect(`${back.origin}${back.pathname}`).toBe("http://127.0.0.1:40123/callback");
    expect(back.searchParams.get("iss")).toBe(issuer);
    expect(back.searchParams.get("state")).toBe("flow-state");
    const code = back.searchParams.get("code")!;

    const tokenRequest = () =>
      fetch(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: redirectUri,
          code_verifier: verifier,
          client_id: "cli",
          resource: RESOURCE,
        }).toString(),
      });
    const token = await tokenRequest();
    const body = (await token.json()) as Record<string, unknown>;
    expect(token.status).toBe(200);
    expect(body.token_type).toMatch(/^bearer$/i);
    expect(typeof body.access_token).toBe("string");
    expect(typeof body.refresh_token).toBe("string");
    const replay = await tokenRequest();
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: string }).error).toBe("invalid_grant");
  });

  it("the pages carry their security headers through the router", async () => {
    const response = await fetch(`${issuer}/account`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(response.headers.get("x-frame-options")).toBe("DENY");
    expect(await response.text()).toContain('href="/tenant-a/login"');
  });
});
