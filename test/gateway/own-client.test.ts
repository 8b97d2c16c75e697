/**
 * The gateway with Gatehouse on both ends: the repository's authorization server (in process,
 * memory store, one user), `gatehouse gateway`'s relay in front of
 * @modelcontextprotocol/server-everything (HTTP, its own process), and an MCP client (official SDK
 * v2) whose fetch is Gatehouse's `createAuthFetch`. Login, a permitted tool, a tool needing a
 * second scope (403 insufficient_scope from the gateway, step-up, retry), and one audit event per
 * decision.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
} from "../../src/authorization-server/index.js";
import { createAuthFetch } from "../../src/client/index.js";
import { fixedSession } from "../../src/client/user-agent/session.js";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationAuditEvent,
} from "../../src/resource-server/index.js";
import { silentLogger } from "../../src/shared/log.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { FormUserAgent } from "../examples/form-user-agent.js";
import { freePort } from "../support/free-port.js";

const PASSWORD = "correct horse battery staple";

let as: AuthorizationServer;
let asHttp: ListeningServer;
let gatewayHttp: ListeningServer;
let everything: ChildProcess;
let resource: string;
const events: OperationAuditEvent[] = [];

beforeAll(async () => {
  const port = await freePort();
  const entry = createRequire(import.meta.url).resolve(
    "@modelcontextprotocol/server-everything/dist/index.js",
  );
  everything = spawn(process.execPath, [entry, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${text}`)), 20_000);
    everything.stderr!.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("listening on port")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });

  let asHandler: ((request: Request) => Promise<Response>) | undefined;
  asHttp = await listen((request) => asHandler!(request));
  let gatewayHandler: ((request: Request) => Promise<Response>) | undefined;
  gatewayHttp = await listen((request) => gatewayHandler!(request));
  resource = `${gatewayHttp.url}/mcp`;

  const store = createMemoryStore();
  as = await createAuthorizationServer({
    issuer: asHttp.url,
    allowInsecureLoopback: true,
    store,
    resources: [{ uri: resource, name: "Everything (behind the gateway)", scopes: ["mcp:use", "math"] }],
    scopeDescriptions: { "mcp:use": "Use the MCP server", math: "Do sums" },
    maintenanceIntervalMs: 0,
    logger: silentLogger,
  });
  asHandler = as.fetch;
  await store.createUser({
    id: "u-alice",
    username: "alice",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });

  const metadata = (await (await fetch(`${asHttp.url}/.well-known/oauth-authorization-server`)).json()) as {
    jwks_uri: string;
  };
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [asHttp.url],
    scopesSupported: ["mcp:use", "math"],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: asHttp.url, audience: resource, jwksUri: metadata.jwks_uri }),
    ),
  });
  const gate = createOperationGate(resourceServer, {
    policy: { base: ["mcp:use"], default: {}, tools: { "get-sum": { scopes: ["mcp:use", "math"] } } },
    onAuditEvent: (event) => events.push(event),
  });
  const gateway = createHttpGateway({ upstream: `http://127.0.0.1:${port}/mcp`, resourceServer, gate });
  gatewayHandler = (request) => gateway.fetch(request);
}, 60_000);

afterAll(async () => {
  await gatewayHttp?.close();
  await as?.close?.();
  await asHttp?.close();
  everything?.kill("SIGKILL");
});

describe("Gatehouse's client through the gateway", () => {
  it("logs in, calls echo, steps up for get-sum (403 from the gateway), with an audit event per decision", async () => {
    const agent = new FormUserAgent("alice", PASSWORD);
    const authFetch = createAuthFetch({
      clientName: "Gateway test client",
      authorizationSession: fixedSession("http://127.0.0.1:9/callback", (url) => agent.open(url)),
    });
    const client = new Client({ name: "gatehouse-client-via-gateway", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { fetch: authFetch }));
    try {
      // First login: consent for mcp:use only.
      expect(agent.visits).toHaveLength(1);
      expect(agent.visits[0]!.consentPage).toContain("Use the MCP server");
      expect(agent.visits[0]!.consentPage).not.toContain("Do sums");

      const echoed = await client.callTool({ name: "echo", arguments: { message: "hi gateway" } });
      expect(JSON.stringify(echoed.content)).toContain("hi gateway");

      const sum = await client.callTool({ name: "get-sum", arguments: { a: 20, b: 22 } });
      expect(JSON.stringify(sum.content)).toContain("42");
      // The step-up: a second visit, already signed in, consenting to math.
      expect(agent.visits).toHaveLength(2);
      expect(agent.visits[1]).toMatchObject({ login: false, consent: true });
      expect(agent.visits[1]!.consentPage).toContain("Do sums");

      const calls = events.filter((e) => e.method === "tools/call");
      expect(calls.map((e) => [e.target, e.decision])).toEqual([
        ["echo", "allowed"],
        ["get-sum", "insufficient_scope"],
        ["get-sum", "allowed"],
      ]);
      expect(calls[1]).toMatchObject({ sub: "u-alice", missing_scopes: ["math"] });
    } finally {
      await client.close();
    }
  }, 60_000);
});
