import { describe, expect, it } from "vitest";
import { resolveOptions } from "../../../src/authorization-server/config/resolve-options.js";
import { contextOf } from "../../../src/authorization-server/context-of.js";
import {
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { GatehouseTypeError } from "../../../src/shared/errors.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { client, memoryLogger, RESOURCE } from "../helpers.js";

function base(overrides: Partial<AuthorizationServerOptions> = {}): AuthorizationServerOptions {
  return {
    issuer: "https://as.example.test",
    store: createMemoryStore(),
    resources: [{ uri: RESOURCE, scopes: ["a"] }],
    logger: memoryLogger(),
    maintenanceIntervalMs: 0,
    ...overrides,
  };
}

async function rejects(overrides: Partial<AuthorizationServerOptions>, message: RegExp) {
  const error = await createAuthorizationServer(base(overrides)).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(GatehouseTypeError);
  expect((error as GatehouseTypeError).code).toBe("ERR_INVALID_OPTION");
  expect((error as Error).message).toMatch(message);
}

describe("options are validated at start-up (ERR_INVALID_OPTION)", () => {
  it.each([
    ["http://as.example.test", /https/],
    ["ftp://as.example.test", /https/],
    ["https://as.example.test?x=1", /query or a fragment/],
    ["https://as.example.test#f", /query or a fragment/],
    ["https://user@as.example.test", /userinfo/],
    ["https://AS.example.test", /normalised/],
    ["as.example.test", /absolute URL/],
    ["", /non-empty/],
  ])("issuer %j is refused", async (issuer, message) => {
    await rejects({ issuer }, message);
  });

  it("trustProxy is refused: the HTTP adapter, not the authorization server, decides the client address", async () => {
    // A JavaScript caller (or an old config) that still passes it would otherwise believe
    // X-Forwarded-For keys the rate limits; the adapter's own trustProxy is what takes effect.
    await rejects(
      { trustProxy: true } as Partial<AuthorizationServerOptions>,
      /toNodeListener\(handler, \{ trustProxy \}\)/,
    );
    await rejects(
      { trustProxy: false } as Partial<AuthorizationServerOptions>,
      /not an authorization server option/,
    );
  });

  it("plain http is refused on loopback without allowInsecureLoopback, and off loopback even with it", async () => {
    await rejects({ issuer: "http://127.0.0.1:8080" }, /allowInsecureLoopback/);
    await rejects({ issuer: "http://as.example.test", allowInsecureLoopback: true }, /loopback/);
  });

  it("plain http on loopback with allowInsecureLoopback starts, logs a loud warning and drops Secure cookies", async () => {
    const logger = memoryLogger();
    const server = await createAuthorizationServer(
      base({ issuer: "http://localhost:8080", allowInsecureLoopback: true, logger }),
    );
    expect(contextOf(server).secureCookies).toBe(false);
    const warning = logger.lines.find((l) => l.event === "insecure_issuer");
    expect(warning?.level).toBe("warn");
    expect(JSON.stringify(warning?.fields)).toMatch(/INSECURE/);
    await server.close();
  });

  it("an https issuer keeps secure cookies; an issuer with a trailing slash is accepted verbatim", async () => {
    const server = await createAuthorizationServer(base({ issuer: "https://as.example.test/" }));
    expect(contextOf(server).secureCookies).toBe(true);
    expect(server.metadata.issuer).toBe("https://as.example.test/");
    expect(server.metadata.token_endpoint).toBe("https://as.example.test/token");
  });

  it.each([
    [[], /at least one/],
    [[{ uri: "https://RS.example.test/mcp", scopes: [] }], /canonical form/],
    [[{ uri: "https://rs.example.test/mcp#x", scopes: [] }], /fragment/],
    [[{ uri: "rs.example.test/mcp", scopes: [] }], /not a valid resource URI/],
    [
      [
        { uri: RESOURCE, scopes: [] },
        { uri: RESOURCE, scopes: [] },
      ],
      /twice/,
    ],
    [[{ uri: RESOURCE, scopes: ["bad scope"] }], /scope tokens/],
    [[{ uri: RESOURCE, scopes: ["offline_access"] }], /offline_access/],
  ])("resources %j are refused", async (resources, message) => {
    await rejects({ resources: resources as AuthorizationServerOptions["resources"] }, message);
  });

  it("a resource with a meaningful trailing slash is kept as written", async () => {
    const server = await createAuthorizationServer(
      base({ resources: [{ uri: "https://rs.example.test/api/", scopes: [] }] }),
    );
    expect([...contextOf(server).resources.keys()]).toEqual(["https://rs.example.test/api/"]);
  });

  it.each([
    [{ codeTtlSeconds: 61 }, /codeTtlSeconds/],
    [{ codeTtlSeconds: 0 }, /codeTtlSeconds/],
    [{ accessTokenTtlSeconds: 1.5 }, /accessTokenTtlSeconds/],
    [{ refreshTokens: { idleTtlSeconds: 7200, absoluteTtlSeconds: 3600 } }, /must not exceed/],
    [{ revision: "2024-01-01" }, /revision/],
    [{ dynamicRegistration: { ratePerHour: 0 } }, /ratePerHour/],
    [{ scopeHierarchy: { "a b": ["c"] } }, /scopeHierarchy/],
    [{ clients: [client({ clientId: "https://evil.example/client" })] }, /metadata documents/i],
    [{ clients: [client({ clientId: "x", redirectUris: ["javascript:alert(1)"] })] }, /redirectUris/],
    [
      { clients: [client({ clientId: "x", tokenEndpointAuthMethod: "client_secret_basic" })] },
      /clientSecretHash/,
    ],
    [{ store: undefined as never }, /store/],
  ])("%j is refused", async (overrides, message) => {
    await rejects(overrides as Partial<AuthorizationServerOptions>, message);
  });

  it("applies defaults: revision 2026-07-28, 300 s tokens, 60 s codes, refresh and registration on", () => {
    const r = resolveOptions(base());
    expect(r).toMatchObject({
      revision: "2026-07-28",
      accessTokenTtlSeconds: 300,
      codeTtlSeconds: 60,
      refresh: { enabled: true, reuseGraceSeconds: 30 },
      dynamicRegistration: { enabled: true, ratePerHour: 20, unusedTtlSeconds: 86400 },
      clientMetadataDocuments: { enabled: true, trust: { kind: "any-https" } },
    });
  });

  it("scopes include offline_access only when refresh is on", async () => {
    const on = await createAuthorizationServer(base());
    expect(contextOf(on).scopes.has("offline_access")).toBe(true);
    const off = await createAuthorizationServer(base({ refreshTokens: { enabled: false } }));
    expect(contextOf(off).scopes.has("offline_access")).toBe(false);
    expect(off.metadata.scopes_supported).toEqual(["a"]);
  });

  it("configured clients are written to the store at start-up", async () => {
    const store = createMemoryStore();
    await createAuthorizationServer(base({ store, clients: [client({ clientId: "cfg" })] }));
    expect((await store.getClient("cfg"))?.source).toBe("preregistered");
  });
});

describe("the Client ID Metadata Document settings are validated once, by resolveOptions (issue 23 defect 6)", () => {
  const resolve = (clientMetadataDocuments: AuthorizationServerOptions["clientMetadataDocuments"]) => () =>
    resolveOptions({ issuer: "https://as.example.test", clientMetadataDocuments });

  it("refuses what the server would refuse at start-up, so the CLI's check refuses it too", () => {
    expect(resolve({ trust: { kind: "allow-list", hosts: ["https://x.example.com/"] } })).toThrow(
      /clientMetadataDocuments\.trust\.hosts/,
    );
    expect(resolve({ trust: { kind: "allow-list", hosts: "x.example.com" as unknown as string[] } })).toThrow(
      /clientMetadataDocuments\.trust\.hosts/,
    );
    expect(resolve({ trust: { kind: "callback", decide: "yes" as unknown as () => boolean } })).toThrow(
      /clientMetadataDocuments\.trust\.decide/,
    );
    expect(resolve({ maxBytes: 0 })).toThrow(/clientMetadataDocuments\.maxBytes/);
    expect(resolve({ minCacheSeconds: 100, maxCacheSeconds: 10 })).toThrow(/minCacheSeconds/);
  });

  it("resolves the settings the resolver uses: host rules lowercased, defaults applied", () => {
    const resolved = resolveOptions({
      issuer: "https://as.example.test",
      clientMetadataDocuments: { trust: { kind: "allow-list", hosts: ["Clients.Example.com"] } },
    }).clientMetadataDocuments;
    expect(resolved).toMatchObject({
      enabled: true,
      trust: { kind: "allow-list", hosts: ["clients.example.com"] },
      maxBytes: 5120,
      timeoutMs: 5000,
      minCacheSeconds: 60,
      maxCacheSeconds: 86_400,
    });
  });
});
