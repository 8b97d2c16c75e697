/**
 * OpenID Connect Core §11: `offline_access` is honoured by an OpenID provider only with
 * `prompt=consent`. The client adds it when, and only when, it asks for `offline_access` from an
 * OpenID provider: metadata from OpenID Connect Discovery, or metadata that declares OpenID
 * Connect wherever it was read. Plain RFC 8414 metadata never gets it. How the metadata was
 * discovered is recorded in the stored server record.
 * (Against a real OpenID provider with its default refresh policy: oidc-provider.test.ts.)
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  createAuthorizationRequest,
  discoverAuthorizationServerVia,
  MemoryTokenStore,
  type MetadataDiscovery,
  type StoredClient,
} from "../../src/client/index.js";
import { type Fake, followRedirect, startFake } from "./fixtures.js";

const REDIRECT = "http://127.0.0.1:9/callback";
const metadata = {
  issuer: "https://as.example",
  authorization_endpoint: "https://as.example/authorize",
  token_endpoint: "https://as.example/token",
  code_challenge_methods_supported: ["S256"],
  scopes_supported: ["read", "offline_access"],
};
const client: StoredClient = {
  issuer: "https://as.example",
  client_id: "client-1",
  token_endpoint_auth_method: "none",
  source: "preregistered",
  registered_at: 0,
};

async function promptFor(
  scope: string | undefined,
  discoveredVia?: MetadataDiscovery,
  declared: Record<string, unknown> = {},
) {
  const { url } = await createAuthorizationRequest({
    metadata: { ...metadata, ...declared },
    client,
    redirectUri: REDIRECT,
    resource: "https://mcp.example/mcp",
    scope,
    ...(discoveredVia && { discoveredVia }),
  });
  return url.searchParams.getAll("prompt");
}

describe("prompt=consent with offline_access (OpenID Connect Core §11)", () => {
  it("is added for metadata from OpenID Connect Discovery when offline_access is asked for", async () => {
    expect(await promptFor("read offline_access", "openid-configuration")).toEqual(["consent"]);
    expect(await promptFor("offline_access", "openid-configuration")).toEqual(["consent"]);
  });

  it("is NOT added for RFC 8414 metadata, nor for the 2025-03-26 default endpoints, even with offline_access", async () => {
    expect(await promptFor("read offline_access", "oauth-authorization-server")).toEqual([]);
    expect(await promptFor("read offline_access", "default-endpoints")).toEqual([]);
  });

  it("is added for metadata read at the RFC 8414 path that declares OpenID Connect (an OpenID provider serving both paths)", async () => {
    const oidcMembers = { id_token_signing_alg_values_supported: ["RS256"] };
    expect(await promptFor("read offline_access", "oauth-authorization-server", oidcMembers)).toEqual([
      "consent",
    ]);
    const openidScope = { scopes_supported: ["openid", "read", "offline_access"] };
    expect(await promptFor("read offline_access", "oauth-authorization-server", openidScope)).toEqual([
      "consent",
    ]);
    // An empty list declares nothing.
    const empty = { id_token_signing_alg_values_supported: [] };
    expect(await promptFor("read offline_access", "oauth-authorization-server", empty)).toEqual([]);
  });

  it("is not added without offline_access (a scope that merely contains the word does not count), nor when the source is unknown", async () => {
    expect(await promptFor("read", "openid-configuration")).toEqual([]);
    expect(await promptFor(undefined, "openid-configuration")).toEqual([]);
    expect(await promptFor("read offline_access_logs", "openid-configuration")).toEqual([]);
    // A record stored before the source was kept: the metadata alone decides.
    expect(await promptFor("read offline_access")).toEqual([]);
    expect(
      await promptFor("read offline_access", undefined, { id_token_signing_alg_values_supported: ["ES256"] }),
    ).toEqual(["consent"]);
  });
});

let fake: Fake | undefined;
let server: Server | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

describe("how the metadata was discovered is recorded and decides the prompt", () => {
  it("an RFC 8414 server that lists offline_access: the client asks for it without prompt, and records oauth-authorization-server", async () => {
    fake = await startFake();
    const store = new MemoryTokenStore();
    const authFetch = new AuthClient({ store, redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await authFetch.fetch(fake.resourceUrl)).status).toBe(200);
    const request = fake.seen.authorize[0]!;
    expect(request.get("scope")?.split(" ")).toContain("offline_access");
    expect(request.has("prompt")).toBe(false);
    expect((await store.get("server", fake.base))?.discovered_via).toBe("oauth-authorization-server");
  });

  it("discovery reports which well-known form answered, for an issuer with a path (OpenID Connect path-appended)", async () => {
    let base = "";
    const served: string[] = [];
    server = createServer((req, res) => {
      served.push(req.url ?? "");
      if (req.url === "/tenant/.well-known/openid-configuration") {
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            issuer: `${base}/tenant`,
            authorization_endpoint: `${base}/tenant/authorize`,
            token_endpoint: `${base}/tenant/token`,
            code_challenge_methods_supported: ["S256"],
          }),
        );
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const found = await discoverAuthorizationServerVia({ issuer: `${base}/tenant`, fetch });
    expect(found.discoveredVia).toBe("openid-configuration");
    expect(found.metadata.issuer).toBe(`${base}/tenant`);
    // The spec's order: RFC 8414 path-inserted first, then the OpenID Connect forms.
    expect(served).toEqual([
      "/.well-known/oauth-authorization-server/tenant",
      "/.well-known/openid-configuration/tenant",
      "/tenant/.well-known/openid-configuration",
    ]);
  });
});
