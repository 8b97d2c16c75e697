/**
 * Self-registered clients act for a user (DESIGN.md, issue 22's High finding): a client that
 * registered itself (dynamic registration, a Client ID Metadata Document) gets no grant without a
 * user (client_credentials, workload identity, token exchange) unless the operator allowed it, here
 * with an initial access token (RFC 7591 §3) naming the scopes. Refused at registration
 * (invalid_client_metadata) and again at the token endpoint (unauthorized_client), so a row stored
 * by an older version does not keep the door open.
 */
import { describe, expect, it } from "vitest";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import { basic, ISSUER, makeServer, postToken, RESOURCE, type TestServer } from "../helpers.js";

/** The finding's exact request: an anonymous caller asking for a machine client. */
const MACHINE_CLIENT = {
  token_endpoint_auth_method: "client_secret_post",
  grant_types: ["client_credentials"],
};

async function register(t: TestServer, body: unknown, headers: Record<string, string> = {}) {
  const response = await t.server.fetch(
    new Request(`${ISSUER}/register`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    }),
    { clientAddress: "203.0.113.9" },
  );
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}

const clientCredentials = (id: string, secret: string, extra: Record<string, string> = {}) => ({
  grant_type: "client_credentials",
  resource: RESOURCE,
  client_id: id,
  client_secret: secret,
  ...extra,
});

describe("anonymous registrants get no grant without a user", () => {
  it("the finding's registration is refused with invalid_client_metadata, and audited", async () => {
    const t = await makeServer();
    const r = await register(t, MACHINE_CLIENT);
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_client_metadata");
    expect(r.body.client_id).toBeUndefined();
    expect(r.body.client_secret).toBeUndefined();
    const refused = t.log.lines.find((l) => l.event === "client_registration_refused");
    expect(refused?.fields).toMatchObject({ error: "invalid_client_metadata" });
  });

  it("a self-registered client_credentials client stored by an older version gets unauthorized_client and no token", async () => {
    const t = await makeServer();
    const secret = randomToken();
    // As the registration endpoint stored it before this rule: no allowance recorded with it.
    await t.store.createClient({
      clientId: "gh_older_version_row",
      source: "dynamic",
      redirectUris: [],
      grantTypes: ["client_credentials"],
      responseTypes: [],
      tokenEndpointAuthMethod: "client_secret_post",
      clientSecretHash: sha256Base64url(secret),
      clientSecretExpiresAt: 0,
      metadata: { token_endpoint_auth_method: "client_secret_post", grant_types: ["client_credentials"] },
      createdAt: t.clock.now,
    });
    const r = await postToken(t, clientCredentials("gh_older_version_row", secret));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("unauthorized_client");
    expect(r.body.access_token).toBeUndefined();
    const refused = t.log.lines.find((l) => l.event === "grant_without_user_refused");
    expect(refused?.fields).toMatchObject({
      client_id: "gh_older_version_row",
      grant_type: "client_credentials",
      client_source: "dynamic",
    });
    expect(JSON.stringify(t.log.lines)).not.toContain(secret);
  });

  it("a pre-registered confidential client keeps client_credentials", async () => {
    const t = await makeServer();
    const r = await postToken(
      t,
      { grant_type: "client_credentials", resource: RESOURCE, scope: "notes:read" },
      basic("confidential-app", "s3cret-value-that-is-long-enough"),
    );
    expect(r.status).toBe(200);
  });
});

describe("an initial access token (RFC 7591 §3) lets a registration ask for client_credentials", () => {
  const token = randomToken();
  const allowance = { sha256: sha256Base64url(token), scopes: ["notes:read"] };

  it("registers with the token, and the client's tokens never exceed the token's scopes", async () => {
    const t = await makeServer({ dynamicRegistration: { initialAccessTokens: [allowance] } });
    const r = await register(t, MACHINE_CLIENT, { authorization: `Bearer ${token}` });
    expect(r.status).toBe(201);
    const id = r.body.client_id as string;
    const secret = r.body.client_secret as string;
    // The allowance is recorded with the client, never echoed to it.
    expect(JSON.stringify(r.body)).not.toContain(allowance.sha256);

    const all = await postToken(t, clientCredentials(id, secret));
    expect(all.status).toBe(200);
    expect(all.body.scope).toBe("notes:read");
    const wider = await postToken(t, clientCredentials(id, secret, { scope: "notes:write" }));
    expect(wider.status).toBe(400);
    expect(wider.body.error).toBe("invalid_scope");
  });

  it("a wrong initial access token is 401 invalid_token with a Bearer challenge, and nothing is registered", async () => {
    const t = await makeServer({ dynamicRegistration: { initialAccessTokens: [allowance] } });
    const r = await register(t, MACHINE_CLIENT, { authorization: `Bearer ${token}x` });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_token");
    expect(r.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect(r.body.client_id).toBeUndefined();
  });

  it("without a token the same server still refuses a machine client and still registers a user's client", async () => {
    const t = await makeServer({ dynamicRegistration: { initialAccessTokens: [allowance] } });
    expect((await register(t, MACHINE_CLIENT)).body.error).toBe("invalid_client_metadata");
    const app = await register(t, { redirect_uris: ["https://app.example.test/callback"] });
    expect(app.status).toBe(201);
  });

  it("removing the token from the configuration takes the grant away from clients registered with it", async () => {
    const t = await makeServer({ dynamicRegistration: { initialAccessTokens: [allowance] } });
    const r = await register(t, MACHINE_CLIENT, { authorization: `Bearer ${token}` });
    const id = r.body.client_id as string;
    const secret = r.body.client_secret as string;
    const later = await makeServer({ store: t.store });
    const refused = await postToken(later, clientCredentials(id, secret));
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe("unauthorized_client");
    expect(refused.body.access_token).toBeUndefined();
  });
});

describe("initial access token configuration", () => {
  it.each([
    [{ sha256: "not-a-hash", scopes: ["notes:read"] }],
    [{ sha256: sha256Base64url("t"), scopes: [] }],
    [{ sha256: sha256Base64url("t"), scopes: ['a"b'] }],
  ])("refuses %j at start-up", async (entry) => {
    await expect(
      makeServer({
        dynamicRegistration: { initialAccessTokens: [entry as { sha256: string; scopes: string[] }] },
      }),
    ).rejects.toThrow(/initialAccessTokens\[0\]/);
  });
});
