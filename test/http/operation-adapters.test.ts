/**
 * The operation gate through each adapter, in front of real MCP servers: node:http
 * (`nodeRequireOperation`) and Express (`requireOperationAuth`, with and without `express.json()`)
 * with the SDK v1 node transport (`handleRequest(req, res, parsedBody)`, SSE answers), and Hono
 * (`operationAuth`, on @hono/node-server) with the SDK v2 web handler. Each: a permitted call
 * reaches the tool, a token lacking scopes gets the one challenge, a filtered listing, an oversized
 * body 413, no token 401.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { McpServer as McpServerV1 } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createMcpHandler } from "@modelcontextprotocol/server";
import express from "express";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { requireOperationAuth } from "../../src/http/express.js";
import { type OperationAuthVariables, operationAuth } from "../../src/http/hono.js";
import { nodeRequireOperation } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationAuditEvent,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { mcpServerFactory, type Reached } from "../resource-server/operations/support.js";

const POLICY = {
  default: "deny",
  methods: { "tools/list": {}, "tools/call": { scopes: ["tools:call"] } },
  tools: { greet: { scopes: ["greet"] }, test_simple_text: { scopes: ["simple"] } },
} as const;

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

interface Running {
  url: string;
  reached: Reached[];
  events: OperationAuditEvent[];
  close(): Promise<void>;
}

function v1Server(reached: Reached[]): McpServerV1 {
  const server = new McpServerV1({ name: "v1", version: "1.0.0" });
  for (const name of ["greet", "test_simple_text", "other"]) {
    server.registerTool(
      name,
      { description: name, inputSchema: { text: z.string().optional() } },
      async (args) => {
        reached.push({ tool: name, args });
        return { content: [{ type: "text", text: `${name} ran` }] };
      },
    );
  }
  return server;
}

/** One SDK v1 stateless transport per request, handed the gate's parsed body. */
async function v1Handle(
  reached: Reached[],
  req: Parameters<StreamableHTTPServerTransport["handleRequest"]>[0],
  res: Parameters<StreamableHTTPServerTransport["handleRequest"]>[1],
  body: unknown,
) {
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const server = v1Server(reached);
  res.on("close", () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

function gateFor(url: string, events: OperationAuditEvent[]) {
  const resourceServer = createResourceServer({
    resource: url,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(jwtVerifier({ issuer: issuer.issuer, audience: url, jwksUri: issuer.jwksUri })),
  });
  return createOperationGate(resourceServer, {
    policy: POLICY,
    filterListings: true,
    maxBodyBytes: 16 * 1024,
    onAuditEvent: (e) => events.push(e),
  });
}

async function listenNode(
  handler: Parameters<typeof createServer>[1],
): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp` };
}

const closeNode = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

async function startNode(): Promise<Running> {
  const reached: Reached[] = [];
  const events: OperationAuditEvent[] = [];
  let handler: Parameters<typeof createServer>[1] = () => {};
  const { server, url } = await listenNode((req, res) => handler!(req, res));
  handler = nodeRequireOperation(gateFor(url, events), {}, (req, res, context) =>
    v1Handle(reached, req, res, context.body),
  );
  return { url, reached, events, close: () => closeNode(server) };
}

async function startExpress(withJsonParser: boolean): Promise<Running> {
  const reached: Reached[] = [];
  const events: OperationAuditEvent[] = [];
  const app = express();
  const { server, url } = await listenNode(app);
  const gate = gateFor(url, events);
  if (withJsonParser) app.use(express.json({ limit: "1mb" }));
  app.post("/mcp", requireOperationAuth(gate), (req, res) => {
    // Gatehouse's `req.auth` (AuthInfo, never the token) is not the SDK's `auth` (which carries it).
    const plain = req as unknown as Parameters<StreamableHTTPServerTransport["handleRequest"]>[0];
    void v1Handle(reached, plain, res, req.body);
  });
  return { url, reached, events, close: () => closeNode(server) };
}

async function startHono(): Promise<Running> {
  const reached: Reached[] = [];
  const events: OperationAuditEvent[] = [];
  const mcp = createMcpHandler(mcpServerFactory(reached, ["greet", "test_simple_text", "other"]));
  const app = new Hono<{ Variables: OperationAuthVariables }>();
  let url = "";
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => {
      url = `http://127.0.0.1:${info.port}/mcp`;
      resolve(s);
    });
  });
  const gate = gateFor(url, events);
  app.post("/mcp", operationAuth(gate), (c) => mcp.fetch(c.req.raw, { parsedBody: c.get("mcp").body }));
  return {
    url,
    reached,
    events,
    close: async () => {
      await mcp.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function call(url: string, body: unknown, token?: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** The JSON-RPC result of a JSON or SSE answer. */
async function result(response: Response): Promise<Record<string, unknown>> {
  const text = await response.text();
  const json = (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    ? text
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5))[0]!
    : text;
  return (JSON.parse(json) as { result: Record<string, unknown> }).result;
}

describe.each([
  ["node:http + SDK v1", startNode],
  ["Express without a body parser + SDK v1", () => startExpress(false)],
  ["Express after express.json() + SDK v1", () => startExpress(true)],
  ["Hono + SDK v2", startHono],
] as const)("%s", (_, start) => {
  let running: Running;
  let token: string;
  beforeAll(async () => {
    running = await start();
    token = await issuer.sign({ aud: running.url, sub: "bob", scope: "tools:call greet" });
  });
  afterAll(async () => {
    await running?.close();
  });

  it("a permitted tool runs, with its arguments as sent", async () => {
    const response = await call(
      running.url,
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "greet", arguments: { text: "hi" } } },
      token,
    );
    expect(response.status).toBe(200);
    expect(await result(response)).toMatchObject({ content: [{ type: "text", text: "greet ran" }] });
    expect(running.reached.at(-1)).toEqual({ tool: "greet", args: { text: "hi" } });
  });

  it("a tool needing another scope: one 403 naming both, the tool never runs", async () => {
    const ran = running.reached.length;
    const response = await call(
      running.url,
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "test_simple_text" } },
      token,
    );
    expect(response.status).toBe(403);
    expect(response.headers.get("www-authenticate")).toMatch(
      /error="insufficient_scope", scope="tools:call simple"/,
    );
    expect(running.reached.length).toBe(ran);
    expect(running.events.at(-1)).toMatchObject({
      decision: "insufficient_scope",
      missing_scopes: ["simple"],
      sub: "bob",
    });
  });

  it("tools/list shows only what the token may call", async () => {
    const response = await call(running.url, { jsonrpc: "2.0", id: 3, method: "tools/list" }, token);
    expect(response.status).toBe(200);
    expect(((await result(response)).tools as { name: string }[]).map((t) => t.name)).toEqual(["greet"]);
  });

  it("an oversized body: 413; no token: 401", async () => {
    const big = {
      jsonrpc: "2.0",
      id: 4,
      method: "tools/call",
      params: { name: "greet", arguments: { text: "x".repeat(20_000) } },
    };
    const response = await call(running.url, big, token);
    // Express's own parser (limit 1mb) reads it first; the gate's cap still refuses it.
    expect(response.status).toBe(413);
    expect((await call(running.url, { jsonrpc: "2.0", id: 5, method: "tools/list" })).status).toBe(401);
  });
});
