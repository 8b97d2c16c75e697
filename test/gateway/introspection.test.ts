/**
 * The gateway checking tokens by introspection (RFC 7662) at a real authorization server: the
 * repository's, in process, listening on loopback, the gateway introspecting over HTTP as a
 * configured confidential client. Through the library (`createGateway` mounted as a node:http
 * listener) and through `gatehouse gateway` (the secret from the environment, the settings from a
 * config file). Hostile: a revoked token and a made-up one are inactive (401 invalid_token), a
 * wrong gateway secret is no pass (503), too few scopes in the introspection answer are a 403.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { createGateway, type GatewayOptions } from "../../src/gateway/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { sha256Base64url } from "../../src/shared/crypto.js";
import { silentLogger } from "../../src/shared/log.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { client } from "../authorization-server/helpers.js";
import { ensureBuilt, runCli } from "../cli/helpers.js";
import { freePort } from "./everything.js";
import { startGatewayProcess } from "./gateway-process.js";

const APP = "batch-app";
const APP_SECRET = "app-secret-that-is-long-enough-1";
const GATEWAY = "mcp-gateway";
const GATEWAY_SECRET = "gateway-secret-that-is-long-enough";
const POLICY = { base: ["mcp:use"], default: {}, tools: { delete_file: { scopes: ["files:admin"] } } };

let as: AuthorizationServer;
let asHttp: ListeningServer;
let upstream: Server;
let upstreamUrl: string;
/** Introspection requests the authorization server received. */
let introspections = 0;
let resources: string[] = [];
let dir: string;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-introspection-"));
  upstream = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const id = body ? (JSON.parse(body) as { id?: unknown }).id : null;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id,
          result: { saw_authorization: req.headers.authorization !== undefined },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;

  let handler: ((request: Request) => Promise<Response>) | undefined;
  asHttp = await listen((request) => handler!(request));
  resources = [`http://127.0.0.1:${await freePort()}/mcp`, `http://127.0.0.1:${await freePort()}/mcp`];
  as = await createAuthorizationServer({
    issuer: asHttp.url,
    allowInsecureLoopback: true,
    store: createMemoryStore(),
    resources: resources.map((uri) => ({ uri, scopes: ["mcp:use", "files:admin"] })),
    clients: [
      client({
        clientId: APP,
        redirectUris: [],
        responseTypes: [],
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(APP_SECRET),
      }),
      client({
        clientId: GATEWAY,
        redirectUris: [],
        responseTypes: [],
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(GATEWAY_SECRET),
      }),
    ],
    maintenanceIntervalMs: 0,
    logger: silentLogger,
  });
  handler = (request) => {
    if (new URL(request.url).pathname === "/introspect") introspections++;
    return as.fetch(request);
  };
}, 60_000);

afterAll(async () => {
  await as?.close();
  await asHttp?.close();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString("base64")}`;
}

/** A real access token of the authorization server (client credentials, RFC 6749 §4.4). */
async function token(resource: string, scope: string): Promise<string> {
  const response = await fetch(`${asHttp.url}/token`, {
    method: "POST",
    headers: {
      authorization: basic(APP, APP_SECRET),
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope, resource }).toString(),
  });
  const body = (await response.json()) as { access_token?: string };
  expect(response.status, JSON.stringify(body)).toBe(200);
  return body.access_token!;
}

async function revoke(accessToken: string): Promise<void> {
  const response = await fetch(`${asHttp.url}/revoke`, {
    method: "POST",
    headers: {
      authorization: basic(APP, APP_SECRET),
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ token: accessToken, token_type_hint: "access_token" }).toString(),
  });
  expect(response.status).toBe(200);
}

function call(resource: string, accessToken: string, tool = "read_file"): Promise<Response> {
  return fetch(resource, {
    method: "POST",
    headers: {
      authorization: `Bearer ${accessToken}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: tool, arguments: {} },
    }),
  });
}

/** The library's gateway on `resource`'s port, as a node:http listener. */
async function mountGateway(resource: string, options: Partial<GatewayOptions> = {}) {
  const gateway = await createGateway({
    upstream: upstreamUrl,
    resource,
    authorizationServer: asHttp.url,
    policy: POLICY,
    introspection: { clientId: GATEWAY, clientSecret: GATEWAY_SECRET },
    logger: silentLogger,
    ...options,
  });
  const server = createServer(gateway.listener);
  await new Promise<void>((resolve) => server.listen(Number(new URL(resource).port), "127.0.0.1", resolve));
  return {
    gateway,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.close();
    },
  };
}

describe("a stdio child behind an introspecting gateway", () => {
  it("hostile: a token revoked before its exp stops its user's child at the next introspection (cacheSeconds 1)", async () => {
    const script = join(dir, "env-child.js");
    writeFileSync(
      script,
      `require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
         const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { pid: process.pid } }) + "\\n"); });`,
    );
    const resource = resources[0]!;
    const gateway = await createGateway({
      stdio: { command: [process.execPath, script], scope: "user" },
      resource,
      authorizationServer: asHttp.url,
      policy: POLICY,
      introspection: { clientId: GATEWAY, clientSecret: GATEWAY_SECRET, cacheSeconds: 1 },
      logger: silentLogger,
    });
    const post = (accessToken: string, body: unknown, session?: string) =>
      gateway.fetch(
        new Request(resource, {
          method: "POST",
          headers: {
            authorization: `Bearer ${accessToken}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...(session && { "mcp-session-id": session }),
          },
          body: JSON.stringify(body),
        }),
      );
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      const revokedToken = await token(resource, "mcp:use");
      const opened = await post(revokedToken, { jsonrpc: "2.0", id: 1, method: "initialize", params: {} });
      expect(opened.status).toBe(200);
      const session = opened.headers.get("mcp-session-id")!;
      const { pid } = ((await opened.json()) as { result: { pid: number } }).result;
      expect(alive(pid)).toBe(true);
      await revoke(revokedToken);
      // Past the cache's second, the next presentation is introspected: inactive, before its exp.
      await new Promise((r) => setTimeout(r, 1100));
      const refused = await post(revokedToken, { jsonrpc: "2.0", id: 2, method: "ping" }, session);
      expect(refused.status).toBe(401);
      const end = Date.now() + 3000;
      while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(alive(pid)).toBe(false);
      // The user's session went with the child: a new token of the user gets 404 on it.
      const fresh = await token(resource, "mcp:use");
      expect((await post(fresh, { jsonrpc: "2.0", id: 3, method: "ping" }, session)).status).toBe(404);
    } finally {
      await gateway.close();
    }
  }, 30_000);
});

describe("createGateway with introspection (RFC 7662) at the repository's authorization server", () => {
  it("an active token passes after a real introspection call, and the client's token stays at the gateway", async () => {
    const mounted = await mountGateway(resources[0]!);
    try {
      const accessToken = await token(resources[0]!, "mcp:use");
      const before = introspections;
      const response = await call(resources[0]!, accessToken);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ id: 7, result: { saw_authorization: false } });
      expect(introspections).toBe(before + 1);
    } finally {
      await mounted.close();
    }
  });

  it("hostile: a revoked token and a made-up one are inactive: 401 invalid_token, nothing relayed", async () => {
    const mounted = await mountGateway(resources[0]!);
    try {
      const revoked = await token(resources[0]!, "mcp:use");
      await revoke(revoked);
      const forged = `${revoked.slice(0, -8)}AAAAAAAA`;
      for (const bad of [revoked, forged, "not-a-token-the-server-issued"]) {
        const before = introspections;
        const response = await call(resources[0]!, bad);
        expect(response.status, bad.slice(0, 12)).toBe(401);
        expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
        expect(await response.text()).not.toContain("saw_authorization");
        expect(introspections).toBe(before + 1);
      }
    } finally {
      await mounted.close();
    }
  });

  it("hostile: a token of another resource is refused; the introspected scopes decide the 403", async () => {
    const mounted = await mountGateway(resources[0]!);
    try {
      const other = await token(resources[1]!, "mcp:use");
      expect((await call(resources[0]!, other)).status).toBe(401);
      const narrow = await token(resources[0]!, "mcp:use");
      const refused = await call(resources[0]!, narrow, "delete_file");
      expect(refused.status).toBe(403);
      expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
      expect(refused.headers.get("www-authenticate")).toContain('scope="mcp:use files:admin"');
      const wide = await token(resources[0]!, "mcp:use files:admin");
      expect((await call(resources[0]!, wide, "delete_file")).status).toBe(200);
    } finally {
      await mounted.close();
    }
  });

  it("hostile: with a wrong gateway secret no token passes (503, the introspection refused)", async () => {
    const mounted = await mountGateway(resources[0]!, {
      introspection: { clientId: GATEWAY, clientSecret: "not-the-secret" },
    });
    try {
      const response = await call(resources[0]!, await token(resources[0]!, "mcp:use"));
      expect(response.status).toBe(503);
      expect(await response.text()).not.toContain("saw_authorization");
    } finally {
      await mounted.close();
    }
  });
});

describe("gatehouse gateway --introspection-client-id", () => {
  it("usage: the secret never on the command line, not with --jwks-uri, companions need the client id", async () => {
    const policy = join(dir, "usage-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\n");
    const base = [
      "gateway",
      "--upstream",
      upstreamUrl,
      "--resource",
      resources[1]!,
      "--authorization-server",
      asHttp.url,
      "--policy",
      policy,
    ];
    const env = { ...process.env, GATEHOUSE_INTROSPECTION_CLIENT_SECRET: "" };
    const cases: [string[], string][] = [
      [
        ["--introspection-client-id", GATEWAY],
        "--introspection-client-id needs its secret: --introspection-client-secret-file or GATEHOUSE_INTROSPECTION_CLIENT_SECRET",
      ],
      [
        ["--introspection-client-id", GATEWAY, "--jwks-uri", `${asHttp.url}/jwks`],
        "give --jwks-uri or --introspection-client-id, not both",
      ],
      [
        ["--introspection-endpoint", `${asHttp.url}/introspect`],
        "--introspection-endpoint and its secret file go with --introspection-client-id",
      ],
      [["--introspection-client-secret", "x"], "--introspection-client-secret"],
    ];
    for (const [args, message] of cases) {
      const result = await runCli([...base, ...args], { env });
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toContain(message);
    }
  }, 60_000);

  it("a config file with introspection keys, the secret in the environment: 200, and 401 for a revoked token", async () => {
    const policy = join(dir, "policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\ndefault: {}\n");
    const port = new URL(resources[1]!).port;
    const config = join(dir, "gateway.json");
    writeFileSync(
      config,
      JSON.stringify({
        upstream: upstreamUrl,
        resource: resources[1],
        authorizationServer: asHttp.url,
        policy,
        port: Number(port),
        introspection: { clientId: GATEWAY },
      }),
    );
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ introspection: { clientId: GATEWAY, clientSecret: "inline" } }));
    const refused = await runCli(["gateway", "--config", bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("introspection");
    expect(refused.stderr).not.toContain("inline");

    const gateway = await startGatewayProcess(["--config", config, "--json"], {
      ...process.env,
      GATEHOUSE_INTROSPECTION_CLIENT_SECRET: GATEWAY_SECRET,
    });
    try {
      expect(JSON.parse(gateway.stdout.split("\n")[0]!)).toMatchObject({
        resource: resources[1],
        token_check: "introspection",
      });
      const accessToken = await token(resources[1]!, "mcp:use");
      const before = introspections;
      expect((await call(resources[1]!, accessToken)).status).toBe(200);
      expect(introspections).toBe(before + 1);
      const revoked = await token(resources[1]!, "mcp:use");
      await revoke(revoked);
      const response = await call(resources[1]!, revoked);
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toContain('error="invalid_token"');
      expect(gateway.stderr).not.toContain(GATEWAY_SECRET);
      expect(gateway.stderr).not.toContain(accessToken.split(".")[2]!);
    } finally {
      expect(await gateway.stop()).toBe(0);
    }
  }, 60_000);
});
