/**
 * SECURITY.md "Mix-up: credentials and codes for one authorization server never go to another"
 * (RFC 9700 §4.4, RFC 9207). Two real authorization servers on loopback, A and B, each issuing its
 * own confidential client (id and secret) by dynamic registration, and a resource whose protected
 * resource metadata can move from A to B. Every request B receives is recorded and searched for
 * anything of A's.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  AuthorizationFlowError,
  createAuthorizationRequest,
  exchangeAuthorizationCode,
  MemoryTokenStore,
  validateAuthorizationResponse,
} from "../../src/client/index.js";
import type { AuthorizationServerMetadata } from "../../src/shared/metadata.js";
import { followRedirect } from "./fixtures.js";

const REDIRECT = "http://127.0.0.1:9/callback";

interface Recorded {
  path: string;
  url: string;
  authorization: string | undefined;
  body: string;
}

interface TestAs {
  name: string;
  issuer: string;
  requests: Recorded[];
  /** What this server puts in `iss` on its redirects (default: its own issuer). */
  issOverride?: string;
  close(): Promise<void>;
}

const servers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => resolve(data));
  });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  servers.push({
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An authorization server whose client ids, secrets, codes and tokens all carry its name. */
async function startAs(name: string): Promise<TestAs> {
  let n = 0;
  const as: TestAs = { name, issuer: "", requests: [], close: async () => {} };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", as.issuer);
    const body = await readBody(req);
    as.requests.push({ path: url.pathname, url: url.href, authorization: req.headers.authorization, body });
    const json = (status: number, value: unknown) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
    if (url.pathname === "/.well-known/oauth-authorization-server") {
      return json(200, {
        issuer: as.issuer,
        authorization_endpoint: `${as.issuer}/authorize`,
        token_endpoint: `${as.issuer}/token`,
        registration_endpoint: `${as.issuer}/register`,
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["client_secret_basic"],
        authorization_response_iss_parameter_supported: true,
      });
    }
    if (url.pathname === "/register") {
      return json(201, {
        client_id: `${name}-client`,
        client_secret: `${name}-secret`,
        token_endpoint_auth_method: "client_secret_basic",
        redirect_uris: JSON.parse(body).redirect_uris,
      });
    }
    if (url.pathname === "/authorize") {
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("code", `${name}-code-${++n}`);
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      target.searchParams.set("iss", as.issOverride ?? as.issuer);
      return res.writeHead(302, { location: target.href }).end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(body);
      if (
        req.headers.authorization !==
        `Basic ${Buffer.from(`${name}-client:${name}-secret`).toString("base64")}`
      ) {
        return json(401, { error: "invalid_client" });
      }
      if (form.get("grant_type") === "authorization_code" && !form.get("code")?.startsWith(`${name}-code-`)) {
        return json(400, { error: "invalid_grant" });
      }
      return json(200, {
        access_token: `${name}-at-${++n}`,
        token_type: "Bearer",
        expires_in: 3600,
        refresh_token: `${name}-rt-${n}`,
      });
    }
    json(404, { error: "not_found" });
  });
  as.issuer = await listen(server);
  return as;
}

/** A resource whose PRM names `current()` and that accepts only tokens issued by it. */
async function startResource(current: () => TestAs): Promise<string> {
  let base = "";
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", base);
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      return res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ resource: `${base}/mcp`, authorization_servers: [current().issuer] }));
    }
    const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    if (token.startsWith(`${current().name}-at-`)) return res.writeHead(200).end("ok");
    return res
      .writeHead(401, {
        "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"${
          token ? ', error="invalid_token"' : ""
        }`,
      })
      .end();
  });
  base = await listen(server);
  return `${base}/mcp`;
}

/** Everything B received, as one string to search. */
function everything(as: TestAs): string {
  return as.requests.map((r) => `${r.url}\n${r.authorization ?? ""}\n${r.body}`).join("\n");
}

function basicOf(name: string): string {
  return Buffer.from(`${name}-client:${name}-secret`).toString("base64");
}

describe("mix-up defence", () => {
  it("PRM moves from A to B: the client registers at B, and nothing of A's (id, secret, code, token) reaches B", async () => {
    const a = await startAs("A");
    const b = await startAs("B");
    let current = a;
    const resourceUrl = await startResource(() => current);
    const store = new MemoryTokenStore();
    const client = new AuthClient({ store, redirectUri: REDIRECT, userAgent: followRedirect });

    expect((await client.fetch(resourceUrl)).status).toBe(200);
    expect(a.requests.filter((r) => r.path === "/token")).toHaveLength(1);

    current = b;
    expect((await client.fetch(resourceUrl)).status).toBe(200);

    // B got its own registration, authorization request and token request.
    expect(b.requests.filter((r) => r.path === "/register")).toHaveLength(1);
    const authorize = b.requests.find((r) => r.path === "/authorize");
    expect(new URL(authorize?.url ?? "").searchParams.get("client_id")).toBe("B-client");
    const tokenRequests = b.requests.filter((r) => r.path === "/token");
    expect(tokenRequests).toHaveLength(1);
    expect(tokenRequests[0]?.authorization).toBe(`Basic ${basicOf("B")}`);
    expect(new URLSearchParams(tokenRequests[0]?.body).get("code")).toMatch(/^B-code-/);

    const seenByB = everything(b);
    for (const secretOfA of ["A-client", "A-secret", "A-code", "A-at-", "A-rt-", basicOf("A")]) {
      expect(seenByB).not.toContain(secretOfA);
    }
    // A's registration stays with A (stored under A's issuer), B's under B's.
    expect((await store.get("client", a.issuer))?.client_id).toBe("A-client");
    expect((await store.get("client", b.issuer))?.client_id).toBe("B-client");
    // Tokens from A for this resource are gone; only B's remain.
    expect((await store.list("tokens")).map(([, t]) => t.issuer)).toEqual([b.issuer]);
  });

  it("a flow started at A records A's issuer; a response claiming iss=B is refused, no code goes anywhere", async () => {
    const a = await startAs("A");
    const b = await startAs("B");
    a.issOverride = b.issuer; // what a mix-up attacker's response would claim
    const resourceUrl = await startResource(() => a);
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    const error = await client.fetch(resourceUrl).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AuthorizationFlowError);
    expect((error as AuthorizationFlowError).code).toBe("iss_mismatch");
    expect((error as AuthorizationFlowError).step).toBe(`authorization response (${a.issuer})`);
    expect(a.requests.filter((r) => r.path === "/token")).toEqual([]);
    expect(b.requests).toEqual([]);
  });

  it("the pending record holds the issuer of the server the flow started at, compared as an exact string", async () => {
    const a = await startAs("A");
    const metadata = (await (
      await fetch(`${a.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as AuthorizationServerMetadata;
    const client = {
      issuer: a.issuer,
      client_id: "A-client",
      client_secret: "A-secret",
      token_endpoint_auth_method: "client_secret_basic",
      source: "dynamic" as const,
      registered_at: 0,
    };
    const { url, pending } = await createAuthorizationRequest({
      metadata,
      client,
      redirectUri: REDIRECT,
      resource: "https://mcp.example/mcp",
    });
    expect(pending.expectedIssuer).toBe(a.issuer);
    const callback = new URL(REDIRECT);
    callback.searchParams.set("code", "A-code-1");
    callback.searchParams.set("state", url.searchParams.get("state") ?? "");
    for (const claimed of [
      `${a.issuer}/`,
      a.issuer.replace("127.0.0.1", "localhost"),
      a.issuer.toUpperCase(),
    ]) {
      callback.searchParams.set("iss", claimed);
      expect(() => validateAuthorizationResponse(pending, metadata, callback)).toThrow(
        expect.objectContaining({ code: "iss_mismatch" }),
      );
    }
    callback.searchParams.set("iss", a.issuer);
    expect(validateAuthorizationResponse(pending, metadata, callback).get("code")).toBe("A-code-1");
  });

  it("A's registration is never used with B's metadata: refused before any request (authorization and token)", async () => {
    const a = await startAs("A");
    const b = await startAs("B");
    const metadataOfB = (await (
      await fetch(`${b.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as AuthorizationServerMetadata;
    b.requests.length = 0;
    const clientOfA = {
      issuer: a.issuer,
      client_id: "A-client",
      client_secret: "A-secret",
      token_endpoint_auth_method: "client_secret_basic",
      source: "dynamic" as const,
      registered_at: 0,
    };
    await expect(
      createAuthorizationRequest({
        metadata: metadataOfB,
        client: clientOfA,
        redirectUri: REDIRECT,
        resource: "https://mcp.example/mcp",
      }),
    ).rejects.toMatchObject({ code: "issuer_mismatch" });
    await expect(
      exchangeAuthorizationCode(
        { metadata: metadataOfB, client: clientOfA, fetch },
        {
          callbackParameters: new URLSearchParams({ code: "A-code-1" }),
          redirectUri: REDIRECT,
          codeVerifier: "v".repeat(43),
          resource: "https://mcp.example/mcp",
        },
      ),
    ).rejects.toMatchObject({ code: "issuer_mismatch" });
    expect(b.requests).toEqual([]);
  });
});
