import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createClientResolver } from "../../../src/authorization-server/clients/resolver.js";
import { resolveOptions } from "../../../src/authorization-server/config/resolve-options.js";
import type { ResolvedOptions } from "../../../src/authorization-server/core/context.js";
import { OAuthError } from "../../../src/shared/errors.js";
import { createGuardedFetch } from "../../../src/shared/guarded-fetch.js";
import type { Logger } from "../../../src/shared/log.js";
import type { AuthorizationStore, ClientRecord } from "../../../src/storage/contract.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";

// ---------------------------------------------------------------------------------------------
// A store with only what the resolver uses (clients and the document cache); anything else throws,
// so a test notices if the resolver starts depending on more.
// ---------------------------------------------------------------------------------------------

interface DocumentStore extends AuthorizationStore {
  clients: Map<string, ClientRecord>;
  documents: Map<string, { body: string; expiresAt: number }>;
}

function documentStore(): DocumentStore {
  const clients = new Map<string, ClientRecord>();
  const documents = new Map<string, { body: string; expiresAt: number }>();
  const impl = {
    clients,
    documents,
    async getClient(id: string) {
      const c = clients.get(id);
      return c ? structuredClone(c) : undefined;
    },
    async upsertClient(client: ClientRecord) {
      clients.set(client.clientId, structuredClone(client));
    },
    async getCachedDocument(url: string, now: number) {
      const d = documents.get(url);
      return d && d.expiresAt > now ? { ...d } : undefined;
    },
    async putCachedDocument(url: string, body: string, expiresAt: number) {
      documents.set(url, { body, expiresAt });
    },
  };
  return new Proxy(impl, {
    get(target, prop) {
      if (prop in target) return target[prop as keyof typeof target];
      if (prop === "then") return undefined;
      throw new Error(`test store: ${String(prop)} is not part of this test`);
    },
  }) as unknown as DocumentStore;
}

const logLines: { level: string; event: string; fields?: Record<string, unknown> }[] = [];
const log: Logger = {
  info: (event, fields) => logLines.push({ level: "info", event, fields }),
  warn: (event, fields) => logLines.push({ level: "warn", event, fields }),
  error: (event, fields) => logLines.push({ level: "error", event, fields }),
};

function options(cimd: Partial<ResolvedOptions["clientMetadataDocuments"]> = {}): ResolvedOptions {
  return {
    issuer: "https://as.example.com",
    revision: "2026-07-28",
    accessTokenTtlSeconds: 300,
    codeTtlSeconds: 60,
    refresh: {
      enabled: true,
      idleTtlSeconds: 1000,
      absoluteTtlSeconds: 2000,
      reuseGraceSeconds: 0,
      withoutOfflineAccess: { idleTtlSeconds: 1000, absoluteTtlSeconds: 2000 },
    },
    dynamicRegistration: { enabled: false, ratePerHour: 20, unusedTtlSeconds: 86400 },
    // Resolved as the server resolves them (config/resolve-options.ts validates them, once).
    clientMetadataDocuments: resolveOptions({
      issuer: "https://as.example.com",
      clientMetadataDocuments: {
        enabled: true,
        timeoutMs: 3000,
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
        ...cimd,
      },
    }).clientMetadataDocuments,
    scopeDescriptions: {},
    allowInsecureLoopback: false,
  };
}

// ---------------------------------------------------------------------------------------------
// The client's web server
// ---------------------------------------------------------------------------------------------

let server: TestHttpsServer;
let routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {};
const hits = new Map<string, number>();
const idFor = (path: string) => `${server.origin}${path}`;

function serveDocument(
  path: string,
  document: Record<string, unknown> | string,
  headers: Record<string, string> = {},
  delayMs = 0,
): void {
  routes[path] = (_req, res) => {
    const send = () => {
      res.writeHead(200, { "content-type": "application/json", ...headers });
      res.end(typeof document === "string" ? document : JSON.stringify(document));
    };
    if (delayMs > 0) setTimeout(send, delayMs);
    else send();
  };
}

function validDocument(path: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: idFor(path),
    client_name: "Test Client",
    redirect_uris: ["http://127.0.0.1:8765/callback"],
    ...extra,
  };
}

beforeAll(async () => {
  server = await startTestHttpsServer((req, res) => {
    const path = req.url ?? "";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const route = routes[path];
    if (route) route(req, res);
    else {
      res.writeHead(404);
      res.end();
    }
  });
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  routes = {};
  hits.clear();
  logLines.length = 0;
});

let clock = Date.parse("2026-03-01T12:00:00Z");
function setup(cimd: Partial<ResolvedOptions["clientMetadataDocuments"]> = {}) {
  const store = documentStore();
  // A fresh guarded fetch per resolver: in-flight tables do not leak between tests.
  const resolver = createClientResolver({
    store,
    options: options(cimd),
    log,
    now: () => clock,
    fetch: createGuardedFetch(),
  });
  return { store, resolver };
}

async function refusal(promise: Promise<unknown>): Promise<OAuthError> {
  try {
    await promise;
  } catch (e) {
    expect(e).toBeInstanceOf(OAuthError);
    return e as OAuthError;
  }
  throw new Error("expected the resolver to refuse");
}

describe("client resolver: Client ID Metadata Documents", () => {
  it("fetches, validates, caches and stores a valid document", async () => {
    const { store, resolver } = setup();
    serveDocument("/valid.json", validDocument("/valid.json"), { "cache-control": "max-age=300" });
    const id = idFor("/valid.json");
    const client = await resolver.resolve(id);
    expect(client).toMatchObject({
      clientId: id,
      source: "metadata-document",
      clientName: "Test Client",
      redirectUris: ["http://127.0.0.1:8765/callback"],
      tokenEndpointAuthMethod: "none",
    });
    expect(store.clients.get(id)?.source).toBe("metadata-document");
    expect(store.documents.get(id)?.expiresAt).toBe(clock + 300_000);
  });

  it("rule: client_id must equal the document URL exactly", async () => {
    const { resolver } = setup();
    const cases: Record<string, (id: string) => string> = {
      "/slash.json": (id) => `${id}/`,
      "/case.json": (id) => id.replace("/case.json", "/CASE.json"),
      "/path.json": (id) => id.replace("/path.json", "/other.json"),
      "/localhost.json": (id) => id.replace("127.0.0.1", "localhost"),
    };
    for (const [path, wrong] of Object.entries(cases)) {
      serveDocument(path, validDocument(path, { client_id: wrong(idFor(path)) }));
      const e = await refusal(resolver.resolve(idFor(path)));
      expect(e.code, path).toBe("invalid_client");
      expect(e.description).toBe("client metadata document: client_id does not equal the document URL");
    }
  });

  it("rule: missing required fields, shared secrets and bad redirect URIs are refused", async () => {
    const { store, resolver } = setup();
    const bad: Record<string, Record<string, unknown>> = {
      "/no-name.json": { client_name: undefined },
      "/no-redirects.json": { redirect_uris: undefined },
      "/empty-redirects.json": { redirect_uris: [] },
      "/basic.json": { token_endpoint_auth_method: "client_secret_basic" },
      "/post.json": { token_endpoint_auth_method: "client_secret_post" },
      "/secret-jwt.json": { token_endpoint_auth_method: "client_secret_jwt" },
      "/secret.json": { client_secret: "hunter2-hunter2" },
      "/js-redirect.json": { redirect_uris: ["javascript:alert(1)"] },
      "/http-redirect.json": { redirect_uris: ["http://evil.example.com/cb"] },
    };
    for (const [path, overrides] of Object.entries(bad)) {
      serveDocument(path, validDocument(path, overrides));
      const e = await refusal(resolver.resolve(idFor(path)));
      expect(e.code, path).toBe("invalid_client");
      expect(e.description, path).toMatch(/^client metadata document: /);
      expect(e.description, path).not.toContain("hunter2");
    }
    // Rule: an invalid document is never cached and never becomes a client.
    expect(store.documents.size).toBe(0);
    expect(store.clients.size).toBe(0);
  });

  it("rule: a document that is not JSON is refused", async () => {
    const { resolver } = setup();
    serveDocument("/garbage.json", "{not json");
    const e = await refusal(resolver.resolve(idFor("/garbage.json")));
    expect(e.description).toBe("client metadata document: the document is not valid JSON");
  });

  it("rule: oversized documents are refused, declared or chunked", async () => {
    const { resolver } = setup({ maxBytes: 1024 });
    serveDocument("/big.json", validDocument("/big.json", { padding: "x".repeat(5000) }));
    routes["/big-chunked.json"] = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(JSON.stringify(validDocument("/big-chunked.json")).slice(0, -1));
      res.write(`, "padding": "${"x".repeat(4000)}`);
      res.end('"}');
    };
    for (const path of ["/big.json", "/big-chunked.json"]) {
      const e = await refusal(resolver.resolve(idFor(path)));
      expect(e.code).toBe("invalid_client");
      expect(e.description).toBe("client metadata document: the document is larger than 1024 bytes");
    }
  });

  it("rule: the deadline covers the body (headers fast, body trickles)", async () => {
    const { resolver } = setup({ timeoutMs: 300 });
    routes["/trickle.json"] = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{");
      const t = setInterval(() => res.write(" "), 40);
      res.on("close", () => clearInterval(t));
    };
    const e = await refusal(resolver.resolve(idFor("/trickle.json")));
    expect(e.description).toBe("client metadata document: the document was not received in time");
  });

  it("rule: a redirect is not followed", async () => {
    const { resolver } = setup();
    serveDocument("/target.json", validDocument("/redirect.json"));
    routes["/redirect.json"] = (_req, res) => {
      res.writeHead(302, { location: "/target.json" });
      res.end();
    };
    const e = await refusal(resolver.resolve(idFor("/redirect.json")));
    expect(e.description).toBe(
      "client metadata document: the document URL answered with a redirect (redirects are not followed)",
    );
    expect(hits.get("/target.json")).toBeUndefined();
  });

  it("rule: a non-JSON content type is refused", async () => {
    const { resolver } = setup();
    serveDocument("/typed.json", validDocument("/typed.json"), { "content-type": "text/plain" });
    const e = await refusal(resolver.resolve(idFor("/typed.json")));
    expect(e.description).toBe("client metadata document: the document must be served as application/json");
  });

  it("rule: Cache-Control max-age is honoured (a second resolve does not fetch until expiry)", async () => {
    const { resolver } = setup();
    serveDocument("/cached.json", validDocument("/cached.json"), { "cache-control": "max-age=120" });
    const id = idFor("/cached.json");
    await resolver.resolve(id);
    await resolver.resolve(id);
    expect(hits.get("/cached.json")).toBe(1);
    clock += 121_000;
    await resolver.resolve(id);
    expect(hits.get("/cached.json")).toBe(2);
  });

  it("rule: the cache is shared through storage (a second resolver instance does not fetch)", async () => {
    const first = setup();
    serveDocument("/shared.json", validDocument("/shared.json"), { "cache-control": "max-age=600" });
    await first.resolver.resolve(idFor("/shared.json"));
    const second = createClientResolver({
      store: first.store,
      options: options(),
      log,
      now: () => clock,
      fetch: createGuardedFetch(),
    });
    expect((await second.resolve(idFor("/shared.json")))?.clientName).toBe("Test Client");
    expect(hits.get("/shared.json")).toBe(1);
  });

  it("rule: no-store documents are used but not cached", async () => {
    const { store, resolver } = setup();
    serveDocument("/nostore.json", validDocument("/nostore.json"), { "cache-control": "no-store" });
    const id = idFor("/nostore.json");
    expect((await resolver.resolve(id))?.clientId).toBe(id);
    expect((await resolver.resolve(id))?.clientId).toBe(id);
    expect(hits.get("/nostore.json")).toBe(2);
    expect(store.documents.has(id)).toBe(false);
  });

  it("rule: a failure is never cached (fixing the server fixes the client at once)", async () => {
    const { resolver } = setup();
    const id = idFor("/flaky.json");
    routes["/flaky.json"] = (_req, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end("{}");
    };
    const e = await refusal(resolver.resolve(id));
    expect(e.description).toBe("client metadata document: the document URL answered HTTP 500");
    serveDocument("/flaky.json", validDocument("/flaky.json", { client_name: undefined }));
    await refusal(resolver.resolve(id));
    serveDocument("/flaky.json", validDocument("/flaky.json"), { "cache-control": "max-age=600" });
    expect((await resolver.resolve(id))?.clientName).toBe("Test Client");
    expect(hits.get("/flaky.json")).toBe(3);
  });

  it("rule: concurrent resolves of one URL make exactly one fetch", async () => {
    const { resolver } = setup();
    serveDocument("/busy.json", validDocument("/busy.json"), { "cache-control": "no-store" }, 150);
    const id = idFor("/busy.json");
    const results = await Promise.all(Array.from({ length: 8 }, () => resolver.resolve(id)));
    for (const r of results) expect(r?.clientId).toBe(id);
    expect(hits.get("/busy.json")).toBe(1);
  });

  it("rule: malformed URL client ids get invalid_request and nothing is fetched", async () => {
    const { resolver } = setup();
    serveDocument("/", validDocument("/"));
    for (const id of [
      `${server.origin}`,
      `${server.origin}/`,
      `${server.origin}/doc.json?x=1`,
      `${server.origin}/doc.json#f`,
      `${server.origin}/a/../doc.json`,
      `https://user@127.0.0.1:${server.port}/doc.json`,
      `HTTPS://127.0.0.1:${server.port}/doc.json`,
    ]) {
      const e = await refusal(resolver.resolve(id));
      expect(e.code, id).toBe("invalid_request");
    }
    expect(hits.size).toBe(0);
  });

  it("rule: the trust policy is applied before anything is fetched", async () => {
    serveDocument("/trusted.json", validDocument("/trusted.json"));
    const id = idFor("/trusted.json");

    const denied = setup({ trust: { kind: "allow-list", hosts: ["clients.example.com", "*.example.org"] } });
    const e = await refusal(denied.resolver.resolve(id));
    expect(e.code).toBe("invalid_client");
    expect(e.description).toBe("client host not allowed by this server's policy");
    expect(hits.size).toBe(0);

    const allowed = setup({ trust: { kind: "allow-list", hosts: ["127.0.0.1"] } });
    expect((await allowed.resolver.resolve(id))?.clientId).toBe(id);

    const seen: string[] = [];
    const callback = setup({
      trust: {
        kind: "callback",
        decide: (url) => {
          seen.push(url.hostname);
          return false;
        },
      },
    });
    expect((await refusal(callback.resolver.resolve(id))).code).toBe("invalid_client");
    expect(seen).toEqual(["127.0.0.1"]);

    const throwing = setup({
      trust: {
        kind: "callback",
        decide: () => {
          throw new Error("policy service down");
        },
      },
    });
    expect((await refusal(throwing.resolver.resolve(id))).code).toBe("invalid_client");
    expect(logLines.some((l) => l.event === "client_metadata_document.trust_callback_failed")).toBe(true);
    expect(hits.get("/trusted.json")).toBe(1);
  });

  it("rule: without the loopback opt-in, a document on this machine is refused and nothing is sent", async () => {
    const { store, resolver } = setup({ dangerouslyAllowLoopbackForTesting: undefined });
    serveDocument("/local.json", validDocument("/local.json"));
    const before = server.connections();
    const e = await refusal(resolver.resolve(idFor("/local.json")));
    expect(e.code).toBe("invalid_client");
    // The public text does not say which internal address was refused; the log detail does.
    expect(e.description).toBe("client metadata document: the document could not be fetched");
    expect(e.detail).toContain("blocked_address");
    expect(server.connections()).toBe(before);
    expect(store.clients.size).toBe(0);
  });

  it("disabled: a URL client id is an unknown client and nothing is fetched", async () => {
    const { resolver } = setup({ enabled: false });
    serveDocument("/off.json", validDocument("/off.json"));
    expect(await resolver.resolve(idFor("/off.json"))).toBeUndefined();
    expect(hits.size).toBe(0);
  });

  it("plain client ids come from storage; a hand-registered URL id is not fetched", async () => {
    const { store, resolver } = setup();
    const base: Omit<ClientRecord, "clientId"> = {
      source: "preregistered",
      redirectUris: ["https://app.example.com/cb"],
      grantTypes: ["authorization_code"],
      responseTypes: ["code"],
      tokenEndpointAuthMethod: "none",
      metadata: {},
      createdAt: 1,
    };
    await store.upsertClient({ ...base, clientId: "plain-client" });
    await store.upsertClient({ ...base, clientId: idFor("/manual.json") });
    expect((await resolver.resolve("plain-client"))?.clientId).toBe("plain-client");
    expect(await resolver.resolve("unknown-client")).toBeUndefined();
    expect((await resolver.resolve(idFor("/manual.json")))?.source).toBe("preregistered");
    expect(hits.size).toBe(0);
  });

  it("keeps createdAt of a known document client when the document is fetched again", async () => {
    const { store, resolver } = setup();
    serveDocument("/again.json", validDocument("/again.json"), { "cache-control": "no-store" });
    const id = idFor("/again.json");
    const firstAt = clock;
    await resolver.resolve(id);
    clock += 5000;
    serveDocument("/again.json", validDocument("/again.json", { client_name: "Renamed" }), {
      "cache-control": "no-store",
    });
    const again = await resolver.resolve(id);
    expect(again?.clientName).toBe("Renamed");
    expect(store.clients.get(id)?.createdAt).toBe(firstAt);
    expect(store.clients.get(id)?.clientName).toBe("Renamed");
  });
});
