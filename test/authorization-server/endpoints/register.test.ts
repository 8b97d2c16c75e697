import { describe, expect, it } from "vitest";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import {
  basic,
  ISSUER,
  issueCode,
  makeServer,
  postToken,
  REDIRECT,
  RESOURCE,
  REVISIONS,
  type TestServer,
} from "../helpers.js";

async function register(t: TestServer, body: unknown, address: string | undefined = "203.0.113.7") {
  const request = new Request(`${ISSUER}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  // The host passes the client address (the node adapter does it for toNodeListener/listen).
  const response = await t.server.fetch(
    request,
    address === undefined ? undefined : { clientAddress: address },
  );
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}

describe.each(REVISIONS)("dynamic client registration, RFC 7591 (revision %s)", (revision) => {
  it("registers a public client with defaults; the id is generated and never an https URL", async () => {
    const t = await makeServer({ revision });
    const r = await register(t, { redirect_uris: [REDIRECT], client_name: "My App" });
    expect(r.status).toBe(201);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.body).toMatchObject({
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      client_name: "My App",
      client_id_issued_at: Math.floor(t.clock.now / 1000),
    });
    expect(r.body.client_secret).toBeUndefined();
    const id = r.body.client_id as string;
    expect(id).toMatch(/^gh_[A-Za-z0-9_-]{32}$/);
    const stored = await t.store.getClient(id);
    expect(stored).toMatchObject({ source: "dynamic", clientName: "My App" });
    expect(stored?.expiresAt).toBe(t.clock.now + 86_400_000);
  });
});

describe("registration rules (SECURITY.md Dynamic registration)", () => {
  it("a caller cannot choose its client_id or secret", async () => {
    const t = await makeServer();
    const r = await register(t, {
      redirect_uris: [REDIRECT],
      client_id: "https://evil.example/client",
      client_secret: "chosen",
      token_endpoint_auth_method: "client_secret_basic",
    });
    expect(r.status).toBe(201);
    expect(r.body.client_id).not.toBe("https://evil.example/client");
    expect(r.body.client_secret).not.toBe("chosen");
  });

  it("a confidential client gets a secret once; only its hash is stored; it authenticates with it", async () => {
    const t = await makeServer();
    const r = await register(t, {
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["authorization_code"],
    });
    const secret = r.body.client_secret as string;
    expect(secret.length).toBeGreaterThanOrEqual(43);
    expect(r.body.client_secret_expires_at).toBe(0);
    const stored = await t.store.getClient(r.body.client_id as string);
    expect(stored?.clientSecretHash).toBe(sha256Base64url(secret));
    expect(JSON.stringify(stored)).not.toContain(secret);
    const { code, verifier } = await issueCode(t, {
      clientId: r.body.client_id as string,
      scopes: ["notes:read"],
    });
    const tok = await postToken(
      t,
      {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: REDIRECT,
        resource: RESOURCE,
      },
      basic(r.body.client_id as string, secret),
    );
    expect(tok.status).toBe(200);
    expect((await t.store.getClient(r.body.client_id as string))?.expiresAt).toBeUndefined();
  });

  it.each([
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    " https://app.example/cb",
    "data:text/html,x",
    "http://app.example/cb",
    "https://app.example/cb#frag",
    "https://user:pw@app.example/cb",
    "myapp://callback",
    "/relative",
  ])("redirect URI %j is invalid_redirect_uri", async (uri) => {
    const t = await makeServer();
    const r = await register(t, { redirect_uris: [uri] });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_redirect_uri");
  });

  it("accepts loopback http redirect URIs", async () => {
    const t = await makeServer();
    const r = await register(t, {
      redirect_uris: ["http://127.0.0.1:33418/callback", "http://localhost/cb"],
    });
    expect(r.status).toBe(201);
  });

  it("missing redirect_uris for the code flow is invalid_redirect_uri", async () => {
    const t = await makeServer();
    expect((await register(t, {})).body.error).toBe("invalid_redirect_uri");
    expect((await register(t, { redirect_uris: "https://x.example/cb" })).body.error).toBe(
      "invalid_redirect_uri",
    );
  });

  it.each([
    [{ token_endpoint_auth_method: "client_secret_jwt" }],
    [{ grant_types: ["password"] }],
    [{ grant_types: ["implicit"] }],
    [{ response_types: ["token"] }],
    [{ grant_types: ["client_credentials"] }],
    [{ grant_types: ["refresh_token"] }],
    [{ token_endpoint_auth_method: "private_key_jwt" }],
    [{ jwks_uri: "https://keys.example/jwks" }],
    [{ client_uri: "javascript:alert(1)" }],
    [{ logo_uri: "http://cdn.example/logo.png" }],
    [{ scope: 'a"b' }],
    [{ client_name: 42 }],
    [{ contacts: "a@b" }],
  ])("bad metadata %j is invalid_client_metadata", async (extra) => {
    const t = await makeServer();
    const r = await register(t, { redirect_uris: [REDIRECT], ...extra });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_client_metadata");
  });

  it("a non-JSON or non-object body is refused", async () => {
    const t = await makeServer();
    expect((await register(t, "{not json")).body.error).toBe("invalid_client_metadata");
    expect((await register(t, "[1,2]")).body.error).toBe("invalid_client_metadata");
    const form = await t.server.fetch(
      new Request(`${ISSUER}/register`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "redirect_uris=x",
      }),
    );
    expect(form.status).toBe(400);
  });

  it("an oversized or script-bearing name is stored capped and as given (rendered as text elsewhere)", async () => {
    const t = await makeServer();
    const name = `<script>alert(1)</script>${"x".repeat(5000)}`;
    const r = await register(t, { redirect_uris: [REDIRECT], client_name: name });
    expect(r.status).toBe(201);
    const stored = await t.store.getClient(r.body.client_id as string);
    expect(stored?.clientName).toBe(name.slice(0, 200));
  });

  it("narrows scope to scopes this server offers and ignores unknown metadata", async () => {
    const t = await makeServer();
    const r = await register(t, {
      redirect_uris: [REDIRECT],
      scope: "notes:read unknown:x",
      extra_field: "x",
    });
    expect(r.body.scope).toBe("notes:read");
    expect(r.body.extra_field).toBeUndefined();
  });

  it("registrations are rate-limited per client address (429 with Retry-After)", async () => {
    const t = await makeServer({ dynamicRegistration: { ratePerHour: 3 } });
    for (let i = 0; i < 3; i++)
      expect((await register(t, { redirect_uris: [REDIRECT] }, "198.51.100.1")).status).toBe(201);
    const limited = await register(t, { redirect_uris: [REDIRECT] }, "198.51.100.1");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await register(t, { redirect_uris: [REDIRECT] }, "198.51.100.2")).status).toBe(201);
    t.clock.advance(3600);
    expect((await register(t, { redirect_uris: [REDIRECT] }, "198.51.100.1")).status).toBe(201);
  });

  it("the client address is an input of fetch, whoever hosts the server; without one, callers share a bucket", async () => {
    const t = await makeServer({ dynamicRegistration: { ratePerHour: 2 } });
    for (const address of ["192.0.2.1", "192.0.2.2"]) {
      for (let i = 0; i < 2; i++)
        expect((await register(t, { redirect_uris: [REDIRECT] }, address)).status).toBe(201);
      expect((await register(t, { redirect_uris: [REDIRECT] }, address)).status).toBe(429);
    }
    // No address given (a host that does not pass one): one shared bucket for all such callers.
    for (let i = 0; i < 2; i++)
      expect((await register(t, { redirect_uris: [REDIRECT] }, undefined)).status).toBe(201);
    expect((await register(t, { redirect_uris: [REDIRECT] }, undefined)).status).toBe(429);
    expect((await register(t, { redirect_uris: [REDIRECT] }, "192.0.2.3")).status).toBe(201);
  });

  it("unused registrations expire and are purged", async () => {
    const t = await makeServer({ dynamicRegistration: { unusedTtlSeconds: 600 } });
    const r = await register(t, { redirect_uris: [REDIRECT] });
    t.clock.advance(601);
    await t.server.purgeExpired();
    expect(await t.store.getClient(r.body.client_id as string)).toBeUndefined();
  });
});
