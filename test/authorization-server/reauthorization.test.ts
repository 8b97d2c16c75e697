/**
 * Repeat authorization (RFC 8252 §8.6, RFC 6749 §10.2) and the registered-scope ceiling
 * (policy/consent.ts, policy/scopes.ts), through whole flows against a real server on loopback.
 */
import { afterEach, describe, expect, it } from "vitest";
import { maySkipConsent } from "../../src/authorization-server/policy/consent.js";
import { scopeCeiling } from "../../src/authorization-server/policy/scopes.js";
import { sha256Base64url } from "../../src/shared/crypto.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  redeem,
  signIn,
  startAuthorization,
  startFlowServer,
} from "./support/flow-server.js";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("a remembered consent never answers silently for a client whose identity is not assured", () => {
  it("hostile: a page elsewhere sends the browser to /authorize for an approved loopback client on another port → consent page, no code", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const agent = new Agent(server.http.url);
    // The user approved the CLI once.
    const first = await approve(
      agent,
      await signIn(agent, {
        clientId: "cli",
        redirectUri: "http://127.0.0.1:40001/callback",
        scope: "notes:read",
      }),
    );
    expect(first.code).toBeTruthy();
    // Another site's page: same client id, loopback on a port of its choosing, its own PKCE.
    const replay = await startAuthorization(agent, {
      clientId: "cli",
      redirectUri: "http://127.0.0.1:49999/callback",
      scope: "notes:read",
    });
    expect(replay.kind).toBe("consent");
    if (replay.kind !== "consent") return;
    // Pre-filled: what was allowed before is listed, and the user must still press Allow.
    expect(replay.html).toContain("It asks again for what you allowed before");
    expect(replay.html).toContain('data-testid="granted-scopes"');
    const again = await approve(agent, replay);
    expect(again.location.port).toBe("49999");
  });

  it("hostile: signing in again does not hand a code over silently either (the login page never names the client)", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const agent = new Agent(server.http.url);
    await approve(
      agent,
      await signIn(agent, {
        clientId: "cli",
        redirectUri: "http://127.0.0.1:40001/callback",
        scope: "notes:read",
      }),
    );
    agent.cookies.clear(); // the session is gone; the consent stays remembered
    const replay = await signIn(agent, {
      clientId: "cli",
      redirectUri: "http://127.0.0.1:40002/callback",
      scope: "notes:read",
    });
    expect(replay.kind).toBe("consent");
  });

  it("hostile: a dynamically registered public client with an https redirect is asked again", async () => {
    server = await startFlowServer();
    const clientId = await server.register({
      redirect_uris: ["https://app.example/callback"],
      client_name: "Registered app",
      token_endpoint_auth_method: "none",
    });
    const agent = new Agent(server.http.url);
    await approve(
      agent,
      await signIn(agent, { clientId, redirectUri: "https://app.example/callback", scope: "notes:read" }),
    );
    const replay = await startAuthorization(agent, {
      clientId,
      redirectUri: "https://app.example/callback",
      scope: "notes:read",
    });
    expect(replay.kind).toBe("consent");
  });

  it("a client that authenticates at the token endpoint is re-authorized silently", async () => {
    server = await startFlowServer({
      clients: [
        publicClient({
          clientId: "web",
          redirectUris: ["http://127.0.0.1/callback"],
          tokenEndpointAuthMethod: "client_secret_basic",
          clientSecretHash: sha256Base64url("s3cret-s3cret-s3cret"),
        }),
      ],
    });
    const agent = new Agent(server.http.url);
    await approve(
      agent,
      await signIn(agent, {
        clientId: "web",
        redirectUri: "http://127.0.0.1:40001/callback",
        scope: "notes:read",
      }),
    );
    const again = await startAuthorization(agent, {
      clientId: "web",
      redirectUri: "http://127.0.0.1:40001/callback",
      scope: "notes:read",
    });
    expect(again.kind).toBe("code");
  });

  it("a pre-registered public client returning to an https URI it registered is re-authorized silently", async () => {
    server = await startFlowServer({
      clients: [publicClient({ clientId: "spa", redirectUris: ["https://spa.example/callback"] })],
    });
    const agent = new Agent(server.http.url);
    await approve(
      agent,
      await signIn(agent, {
        clientId: "spa",
        redirectUri: "https://spa.example/callback",
        scope: "notes:read",
      }),
    );
    const again = await startAuthorization(agent, {
      clientId: "spa",
      redirectUri: "https://spa.example/callback",
      scope: "notes:read",
    });
    expect(again.kind).toBe("code");
  });

  it("maySkipConsent: the rule by client kind and redirect URI", () => {
    const base = publicClient();
    expect(maySkipConsent(base, "http://127.0.0.1:5000/callback")).toBe(false);
    expect(maySkipConsent(base, "https://localhost/callback")).toBe(false);
    expect(maySkipConsent({ ...base, redirectUris: ["com.example.app:/cb"] }, "com.example.app:/cb")).toBe(
      false,
    );
    expect(maySkipConsent(base, "https://app.example/cb")).toBe(true);
    expect(maySkipConsent({ ...base, source: "dynamic" }, "https://app.example/cb")).toBe(false);
    const document = {
      ...base,
      source: "metadata-document" as const,
      clientId: "https://app.example/client.json",
    };
    expect(maySkipConsent(document, "https://app.example/cb")).toBe(true);
    expect(maySkipConsent(document, "https://elsewhere.example/cb")).toBe(false);
    expect(maySkipConsent(document, "http://127.0.0.1:3000/cb")).toBe(false);
    expect(
      maySkipConsent(
        { ...base, source: "dynamic", tokenEndpointAuthMethod: "private_key_jwt" },
        "http://127.0.0.1/cb",
      ),
    ).toBe(true);
  });
});

describe("the registered scope is a ceiling only for pre-registered clients", () => {
  it("a dynamically registered client that registered notes:read can step up to notes:write", async () => {
    server = await startFlowServer();
    // What both MCP SDKs do: register with the scope of the first challenge.
    const clientId = await server.register({
      redirect_uris: ["http://127.0.0.1/callback"],
      client_name: "SDK client",
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      scope: "notes:read",
    });
    const agent = new Agent(server.http.url);
    const redirectUri = "http://127.0.0.1:40001/callback";
    const first = await approve(agent, await signIn(agent, { clientId, redirectUri, scope: "notes:read" }));
    expect((await redeem(server.issuer, clientId, first, redirectUri)).status).toBe(200);
    const stepUp = await startAuthorization(agent, {
      clientId,
      redirectUri,
      scope: "notes:read notes:write",
    });
    expect(stepUp.kind).toBe("consent");
    const granted = await approve(agent, stepUp);
    const tokens = await redeem(server.issuer, clientId, granted, redirectUri);
    expect(tokens.status).toBe(200);
    expect(tokens.body.scope?.split(" ").sort()).toEqual(["notes:read", "notes:write"]);
  });

  it("a pre-registered client keeps the ceiling its operator set (invalid_scope back to the client)", async () => {
    server = await startFlowServer({ clients: [publicClient({ scope: "notes:read" })] });
    const agent = new Agent(server.http.url);
    const outcome = await signIn(agent, {
      clientId: "cli",
      redirectUri: "http://127.0.0.1:40001/callback",
      scope: "notes:write",
    });
    expect(outcome.kind).toBe("error");
    expect(scopeCeiling(publicClient({ scope: "notes:read" }))).toBe("notes:read");
    expect(scopeCeiling(publicClient({ scope: "notes:read", source: "dynamic" }))).toBeUndefined();
    expect(scopeCeiling(publicClient({ scope: "notes:read", source: "metadata-document" }))).toBeUndefined();
  });
});

describe("redirect_uri at the token endpoint (OAuth 2.1 §4.1.3)", () => {
  it("hostile: required when the authorization request included it, even for a client with one registered URI", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const agent = new Agent(server.http.url);
    const grant = await approve(
      agent,
      await signIn(agent, { clientId: "cli", redirectUri: "http://127.0.0.1/callback", scope: "notes:read" }),
    );
    const omitted = await redeem(server.issuer, "cli", grant, undefined);
    expect(omitted.status).toBe(400);
    expect(omitted.body.error).toBe("invalid_grant");
  });

  it("may be left out when the authorization request left it out", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const agent = new Agent(server.http.url);
    const grant = await approve(
      agent,
      await signIn(agent, {
        clientId: "cli",
        redirectUri: "http://127.0.0.1/callback",
        scope: "notes:read",
        omitRedirectUri: true,
      }),
    );
    expect((await redeem(server.issuer, "cli", grant, undefined)).status).toBe(200);
  });
});
