import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  buildProtectedResourceMetadata,
  createResourceServer,
  protectedResourceMetadataUrl,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { GatehouseTypeError } from "../../src/shared/errors.js";

const verifier = { verify: async () => Promise.reject(new Error("unused")) };
const AS = "https://auth.example.com";

describe("protectedResourceMetadataUrl (RFC 9728 §3.1)", () => {
  it("inserts the well-known suffix between the authority and the path", () => {
    expect(protectedResourceMetadataUrl("https://h.example/api/mcp")).toBe(
      "https://h.example/.well-known/oauth-protected-resource/api/mcp",
    );
    expect(protectedResourceMetadataUrl("https://h.example")).toBe(
      "https://h.example/.well-known/oauth-protected-resource",
    );
    expect(protectedResourceMetadataUrl("http://127.0.0.1:8080/x")).toBe(
      "http://127.0.0.1:8080/.well-known/oauth-protected-resource/x",
    );
  });
});

describe("buildProtectedResourceMetadata: validated at start-up", () => {
  it("builds the document with the required and optional fields", () => {
    expect(
      buildProtectedResourceMetadata({
        resource: "HTTPS://Api.Example.com/mcp/",
        authorizationServers: [AS],
        scopesSupported: ["a", "b"],
        resourceName: "Example",
        resourceDocumentation: "https://docs.example.com",
        resourcePolicyUri: "https://example.com/policy",
        resourceTosUri: "https://example.com/tos",
      }),
    ).toEqual({
      resource: "https://api.example.com/mcp",
      authorization_servers: [AS],
      scopes_supported: ["a", "b"],
      bearer_methods_supported: ["header"],
      resource_name: "Example",
      resource_documentation: "https://docs.example.com",
      resource_policy_uri: "https://example.com/policy",
      resource_tos_uri: "https://example.com/tos",
    });
  });

  const bad: [string, Record<string, unknown>, string][] = [
    ["no authorization server", { authorizationServers: [] }, "ERR_INVALID_OPTION"],
    ["an authorization server that is not a URL", { authorizationServers: ["nope"] }, "ERR_INVALID_OPTION"],
    [
      "a plain-http non-loopback authorization server",
      { authorizationServers: ["http://auth.example"] },
      "ERR_INVALID_OPTION",
    ],
    ["an issuer with a query", { authorizationServers: ["https://auth.example?x=1"] }, "ERR_INVALID_OPTION"],
    ["offline_access in scopes_supported", { scopesSupported: ["a", "offline_access"] }, "ERR_INVALID_SCOPE"],
    ["an invalid scope token", { scopesSupported: ["a b"] }, "ERR_INVALID_SCOPE"],
    ["a resource with a fragment", { resource: "https://h.example/#x" }, "ERR_INVALID_RESOURCE_URI"],
    ["a relative resource", { resource: "/mcp" }, "ERR_INVALID_RESOURCE_URI"],
    ["a bad documentation URL", { resourceDocumentation: "javascript:alert(1)" }, "ERR_INVALID_OPTION"],
    ["an empty resource name", { resourceName: "" }, "ERR_INVALID_OPTION"],
  ];
  it.each(bad)("refuses %s", (_name, override, code) => {
    try {
      buildProtectedResourceMetadata({
        resource: "https://h.example/mcp",
        authorizationServers: [AS],
        ...override,
      });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(GatehouseTypeError);
      expect((error as GatehouseTypeError).code).toBe(code);
    }
  });

  it("createResourceServer refuses a missing verifier and an unknown revision", () => {
    expect(() =>
      createResourceServer({ resource: "https://h.example", authorizationServers: [AS] } as never),
    ).toThrow(GatehouseTypeError);
    expect(() =>
      createResourceServer({
        resource: "https://h.example",
        authorizationServers: [AS],
        verifier,
        revision: "2024-01-01" as never,
      }),
    ).toThrow(GatehouseTypeError);
  });

  it("requireBearer refuses invalid scope tokens at set-up", () => {
    const gate = createResourceServer({
      resource: "https://h.example",
      authorizationServers: [AS],
      verifier,
    });
    expect(() => gate.requireBearer({ scopes: ["bad scope"] })).toThrow(GatehouseTypeError);
  });
});

describe("serving the metadata over HTTP", () => {
  let gate: ResourceServer;
  let server: ListeningServer;
  beforeAll(async () => {
    gate = createResourceServer({
      resource: "https://mcp.example.com/tenant/a",
      authorizationServers: [AS],
      scopesSupported: ["notes:read"],
      resourceName: "Tenant A",
      verifier,
    });
    server = await listen(async (request) =>
      gate.handles(request) ? gate.metadataResponse(request) : new Response("app", { status: 200 }),
    );
  });
  afterAll(async () => {
    await server.close();
  });

  it.each(["/.well-known/oauth-protected-resource/tenant/a", "/.well-known/oauth-protected-resource"])(
    "GET %s returns the document with CORS",
    async (path) => {
      const res = await fetch(`${server.url}${path}`, { headers: { origin: "https://app.example" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(await res.json()).toEqual({
        resource: "https://mcp.example.com/tenant/a",
        authorization_servers: [AS],
        scopes_supported: ["notes:read"],
        bearer_methods_supported: ["header"],
        resource_name: "Tenant A",
      });
    },
  );

  it("HEAD returns headers only; OPTIONS answers the CORS preflight", async () => {
    const head = await fetch(`${server.url}/.well-known/oauth-protected-resource/tenant/a`, {
      method: "HEAD",
    });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    const pre = await fetch(`${server.url}/.well-known/oauth-protected-resource/tenant/a`, {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "GET",
        "access-control-request-headers": "mcp-protocol-version",
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe("*");
    expect(pre.headers.get("access-control-allow-methods")).toContain("GET");
  });

  it("other methods get 405; other paths are not handled", async () => {
    const post = await fetch(`${server.url}/.well-known/oauth-protected-resource`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    expect(await (await fetch(`${server.url}/.well-known/oauth-protected-resource/tenant/b`)).text()).toBe(
      "app",
    );
    expect(await (await fetch(`${server.url}/tenant/a`)).text()).toBe("app");
  });

  it("advertises the path-specific URL as resource_metadata", () => {
    expect(gate.resourceMetadataUrl).toBe(
      "https://mcp.example.com/.well-known/oauth-protected-resource/tenant/a",
    );
  });
});
