import { describe, expect, it } from "vitest";
import { createAuthorizationServer } from "../../../src/authorization-server/index.js";
import { StorageUnavailableError } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import {
  ISSUER,
  makeServer,
  memoryLogger,
  PUBLIC_CLIENT,
  postToken,
  RESOURCE,
  REVISIONS,
} from "../helpers.js";

describe.each(REVISIONS)("metadata discovery (revision %s)", (revision) => {
  it("serves one document at the RFC 8414 and both OpenID Connect paths, issuer at the root", async () => {
    const t = await makeServer({ revision });
    const bodies = [];
    for (const path of ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]) {
      const r = await t.server.fetch(new Request(`${ISSUER}${path}`));
      expect(r.status, path).toBe(200);
      expect(r.headers.get("access-control-allow-origin")).toBe("*");
      bodies.push(await r.json());
    }
    expect(bodies[0]).toEqual(bodies[1]);
    const m = bodies[0] as Record<string, unknown>;
    expect(m).toMatchObject({
      issuer: ISSUER,
      authorization_endpoint: `${ISSUER}/authorize`,
      token_endpoint: `${ISSUER}/token`,
      registration_endpoint: `${ISSUER}/register`,
      revocation_endpoint: `${ISSUER}/revoke`,
      introspection_endpoint: `${ISSUER}/introspect`,
      jwks_uri: `${ISSUER}/jwks.json`,
      response_types_supported: ["code"],
      code_challenge_methods_supported: ["S256"],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
      grant_types_supported: [
        "authorization_code",
        "refresh_token",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:device_code",
      ],
      device_authorization_endpoint: `${ISSUER}/device_authorization`,
    });
    expect(m.scopes_supported).toEqual(
      expect.arrayContaining(["notes:read", "other:read", "offline_access"]),
    );
    expect(m.token_endpoint_auth_methods_supported).toEqual(
      expect.arrayContaining(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]),
    );
    expect(m.introspection_endpoint_auth_methods_supported).not.toContain("none");
    // Honest: no ID tokens are issued, so no OpenID-only claims.
    expect(m.id_token_signing_alg_values_supported).toBeUndefined();
  });
});

describe("issuer with a path", () => {
  it("inserts the well-known segment before the path (RFC 8414 §3.1) and appends it (OIDC Discovery §4)", async () => {
    const issuer = "https://as.example.test/tenant/a";
    const t = await makeServer({ issuer });
    for (const path of [
      "/.well-known/oauth-authorization-server/tenant/a",
      "/.well-known/openid-configuration/tenant/a",
      "/tenant/a/.well-known/openid-configuration",
    ]) {
      const r = await t.server.fetch(new Request(`https://as.example.test${path}`));
      expect(r.status, path).toBe(200);
      const m = (await r.json()) as Record<string, unknown>;
      expect(m.issuer).toBe(issuer);
      expect(m.token_endpoint).toBe(`${issuer}/token`);
    }
    expect(
      (await t.server.fetch(new Request("https://as.example.test/.well-known/oauth-authorization-server")))
        .status,
    ).toBe(404);
    expect((await t.server.fetch(new Request("https://as.example.test/token"))).status).toBe(404);
    const r = await t.server.fetch(
      new Request(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "grant_type=nope",
      }),
    );
    expect((await r.json()).error).toBe("unsupported_grant_type");
  });
});

describe("routing", () => {
  it("leaves registration out of metadata and routing when it is disabled", async () => {
    const t = await makeServer({ dynamicRegistration: { enabled: false } });
    expect(t.server.metadata.registration_endpoint).toBeUndefined();
    const r = await t.server.fetch(new Request(`${ISSUER}/register`, { method: "POST" }));
    expect(r.status).toBe(404);
  });

  it("leaves client_id_metadata_document_supported out when documents are disabled", async () => {
    const t = await makeServer({ clientMetadataDocuments: { enabled: false } });
    expect(t.server.metadata.client_id_metadata_document_supported).toBeUndefined();
  });

  it("unknown path → 404 JSON", async () => {
    const t = await makeServer();
    const r = await t.server.fetch(new Request(`${ISSUER}/nope`));
    expect(r.status).toBe(404);
    expect((await r.json()).error).toBe("not_found");
  });

  it("wrong method → 405 with Allow", async () => {
    const t = await makeServer();
    const r = await t.server.fetch(new Request(`${ISSUER}/jwks.json`, { method: "DELETE" }));
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    const m = await t.server.fetch(
      new Request(`${ISSUER}/.well-known/oauth-authorization-server`, { method: "POST" }),
    );
    expect(m.status).toBe(405);
  });

  it("answers CORS preflights for the browser-callable endpoints, not for introspection", async () => {
    const t = await makeServer();
    for (const path of [
      "/token",
      "/register",
      "/revoke",
      "/jwks.json",
      "/.well-known/oauth-authorization-server",
    ]) {
      const r = await t.server.fetch(
        new Request(`${ISSUER}${path}`, {
          method: "OPTIONS",
          headers: { origin: "https://app.example", "access-control-request-method": "POST" },
        }),
      );
      expect(r.status, path).toBe(204);
      expect(r.headers.get("access-control-allow-origin")).toBe("*");
      expect(r.headers.get("access-control-allow-credentials")).toBeNull();
      expect(r.headers.get("access-control-allow-headers")).toContain("authorization");
    }
    const token = await postToken(t, { grant_type: "nope" });
    expect(token.headers.get("access-control-allow-origin")).toBe("*");
    const intro = await t.server.fetch(new Request(`${ISSUER}/introspect`, { method: "OPTIONS" }));
    expect(intro.status).toBe(405);
    expect(intro.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("HEAD on the metadata is 200 without a body", async () => {
    const t = await makeServer();
    const r = await t.server.fetch(
      new Request(`${ISSUER}/.well-known/oauth-authorization-server`, { method: "HEAD" }),
    );
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("");
  });

  it("routes the browser endpoints to the authorization pages (not 404/405)", async () => {
    const t = await makeServer();
    for (const path of ["/authorize", "/login", "/consent", "/account", "/logout"]) {
      const r = await t.server.fetch(new Request(`${ISSUER}${path}`));
      expect([404, 405], path).not.toContain(r.status);
    }
  });
});

function failingStore(error: Error) {
  const store = createMemoryStore();
  let fail = false;
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (fail && prop !== "migrate") return Promise.reject(error);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    store: proxy,
    setFailing(v: boolean) {
      fail = v;
    },
  };
}

/** A server over a store that throws `error` on every call, already failing. */
async function failingServer(error: Error) {
  const f = failingStore(error);
  const log = memoryLogger();
  const server = await createAuthorizationServer({
    issuer: ISSUER,
    store: f.store,
    resources: [{ uri: RESOURCE, scopes: ["a"] }],
    logger: log,
    maintenanceIntervalMs: 0,
  });
  f.setFailing(true);
  return { f, log, server };
}

function clientCredentialsRequest(): Request {
  return new Request(`${ISSUER}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: `grant_type=client_credentials&client_id=${PUBLIC_CLIENT}`,
  });
}

describe("faults", () => {
  it("a storage outage is 503 temporarily_unavailable with Retry-After, on every endpoint", async () => {
    const { f, server } = await failingServer(new StorageUnavailableError("database is down"));
    const token = await server.fetch(clientCredentialsRequest());
    expect(token.status).toBe(503);
    expect(token.headers.get("retry-after")).toBe("5");
    expect(token.headers.get("cache-control")).toBe("no-store");
    expect((await token.json()).error).toBe("temporarily_unavailable");
    const health = await server.fetch(new Request(`${ISSUER}/health`));
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({ status: "unavailable" });
    f.setFailing(false);
    const ok = await server.fetch(new Request(`${ISSUER}/health`));
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ status: "ok" });
  });

  it("an unexpected error is a generic 500 server_error; the detail reaches only the log", async () => {
    const { log, server } = await failingServer(new Error("disk on fire at /var/secret/path"));
    const r = await server.fetch(clientCredentialsRequest());
    expect(r.status).toBe(500);
    const text = await r.text();
    expect(JSON.parse(text).error).toBe("server_error");
    expect(text).not.toContain("disk on fire");
    expect(JSON.stringify(log.lines)).toContain("disk on fire");
  });
});
