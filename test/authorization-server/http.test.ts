import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { randomToken, sha256Base64url } from "../../src/shared/crypto.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { ensureUser, memoryLogger, pkcePair, REVISIONS } from "./helpers.js";

const RESOURCE = "https://rs.example.test/mcp";
const REDIRECT = "http://127.0.0.1:9999/callback";

describe.each(REVISIONS)("over real HTTP on loopback (revision %s)", (revision) => {
  let http: ListeningServer;
  let as: AuthorizationServer;
  const store = createMemoryStore();

  beforeAll(async () => {
    let server: AuthorizationServer | undefined;
    http = await listen((request, info) => server!.fetch(request, info), { port: 0, host: "127.0.0.1" });
    server = await createAuthorizationServer({
      issuer: http.url,
      allowInsecureLoopback: true,
      store,
      resources: [{ uri: RESOURCE, scopes: ["notes:read"] }],
      logger: memoryLogger(),
      maintenanceIntervalMs: 0,
      revision,
      dynamicRegistration: { ratePerHour: 5 },
    });
    as = server;
  });
  afterAll(async () => {
    await as.close();
    await http.close();
  });

  it("discovery → registration → code redemption → refresh → revocation", async () => {
    const meta = (await (await fetch(`${http.url}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      string
    >;
    expect(meta.issuer).toBe(http.url);
    const oidc = (await (await fetch(`${http.url}/.well-known/openid-configuration`)).json()) as Record<
      string,
      string
    >;
    expect(oidc).toEqual(meta);

    const reg = await fetch(meta.registration_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: [REDIRECT], client_name: "cli" }),
    });
    expect(reg.status).toBe(201);
    const { client_id } = (await reg.json()) as { client_id: string };

    // What the consent page does on approval.
    const { verifier, challenge } = pkcePair();
    const code = randomToken();
    await ensureUser(store, "alice");
    await store.insertAuthorizationCode({
      codeHash: sha256Base64url(code),
      grantId: randomToken(16),
      clientId: client_id,
      userId: "alice",
      redirectUri: REDIRECT,
      redirectUriSent: true,
      scopes: ["notes:read", "offline_access"],
      resource: RESOURCE,
      codeChallenge: challenge,
      codeChallengeMethod: "S256",
      refreshAllowed: true,
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
    });
    const tokenResponse = await fetch(meta.token_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: REDIRECT,
        resource: RESOURCE,
        client_id,
      }),
    });
    expect(tokenResponse.status).toBe(200);
    expect(tokenResponse.headers.get("cache-control")).toBe("no-store");
    const tokens = (await tokenResponse.json()) as Record<string, string>;

    const jwks = (await (await fetch(meta.jwks_uri!)).json()) as { keys: unknown[] };
    expect(jwks.keys.length).toBeGreaterThan(0);

    const refreshed = await fetch(meta.token_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "refresh_token",
        refresh_token: tokens.refresh_token!,
        client_id,
      }),
    });
    expect(refreshed.status).toBe(200);
    const next = (await refreshed.json()) as Record<string, string>;

    const revoked = await fetch(meta.revocation_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: next.refresh_token!, client_id }),
    });
    expect(revoked.status).toBe(200);
    const after = await fetch(meta.token_endpoint!, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "refresh_token",
        refresh_token: next.refresh_token!,
        client_id,
      }),
    });
    expect(((await after.json()) as Record<string, string>).error).toBe("invalid_grant");
  });

  it("malformed Basic over the wire: 401 invalid_client with WWW-Authenticate", async () => {
    const r = await fetch(`${http.url}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: "Basic %%%" },
      body: "grant_type=client_credentials",
    });
    expect(r.status).toBe(401);
    expect(r.headers.get("www-authenticate")).toBe(`Basic realm="${http.url}"`);
  });

  it("an oversized body over the wire is a 413 OAuth error", async () => {
    const r = await fetch(`${http.url}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `grant_type=client_credentials&pad=${"a".repeat(100_000)}`,
    });
    expect(r.status).toBe(413);
    expect(((await r.json()) as Record<string, string>).error).toBe("invalid_request");
  });

  it("CORS preflight on the token endpoint from a browser origin", async () => {
    const r = await fetch(`${http.url}/token`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    expect(r.status).toBe(204);
    expect(r.headers.get("access-control-allow-origin")).toBe("*");
  });

  it("registration is rate-limited by the socket address, not by a forged X-Forwarded-For", async () => {
    let limited: Response | undefined;
    for (let i = 0; i < 8; i++) {
      const r = await fetch(`${http.url}/register`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": `10.0.0.${i}` },
        body: JSON.stringify({ redirect_uris: [REDIRECT] }),
      });
      if (r.status === 429) {
        limited = r;
        break;
      }
      expect(r.status).toBe(201);
    }
    expect(limited?.status).toBe(429);
  });

  it("health answers ok", async () => {
    const r = await fetch(`${http.url}/health`);
    expect(await r.json()).toEqual({ status: "ok" });
  });
});
