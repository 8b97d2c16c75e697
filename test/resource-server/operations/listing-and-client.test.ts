/**
 * The listing filter (off by default; SEP-1881) on a real SDK v2 server's JSON (2026-07-28) and
 * SSE (2025-era) answers, the official SDK v2 client (`@modelcontextprotocol/client`) through the
 * gate (a filtered `tools/list`, a permitted call, a refused one), and the OpenTelemetry span of a
 * decision.
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startIssuer, type TestIssuer } from "../fixtures.js";
import { type GatedMcp, modernParams, post, startGatedMcp } from "./support.js";

const spans = new InMemorySpanExporter();
const tracerProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });

let issuer: TestIssuer;
let filtered: GatedMcp;
let unfiltered: GatedMcp;
beforeAll(async () => {
  tracerProvider.register();
  issuer = await startIssuer();
  filtered = await startGatedMcp(issuer, { gate: { filterListings: true } });
  unfiltered = await startGatedMcp(issuer);
});
afterAll(async () => {
  await filtered?.close();
  await unfiltered?.close();
  await issuer?.close();
  await tracerProvider.shutdown();
});

const TOOL_SCOPES = "mcp:conformance:tools:call mcp:conformance:tools:test_simple_text";

/** Reads a JSON or SSE answer to one request and returns its `result`. */
async function resultOf(response: Response): Promise<Record<string, unknown>> {
  expect(response.status).toBe(200);
  const text = await response.text();
  if ((response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const data = text
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data:"))
      .map((l) => JSON.parse(l.slice(5)) as { result?: Record<string, unknown> });
    expect(data).toHaveLength(1);
    return data[0]!.result!;
  }
  return (JSON.parse(text) as { result: Record<string, unknown> }).result;
}

const names = (items: unknown) => (items as { name: string }[]).map((t) => t.name).sort();

describe("listing filter", () => {
  it("off by default: tools/list shows every tool", async () => {
    const token = await unfiltered.sign({ scope: TOOL_SCOPES });
    const result = await resultOf(
      await post(
        unfiltered.url,
        { jsonrpc: "2.0", id: 1, method: "tools/list", params: modernParams() },
        token,
      ),
    );
    expect(names(result.tools)).toEqual(["admin_reset", "echo_note", "test_simple_text", "unlisted_tool"]);
  });

  it("tools/list in a JSON answer (2026-07-28) keeps what the token may call", async () => {
    const token = await filtered.sign({ scope: TOOL_SCOPES });
    const response = await post(
      filtered.url,
      { jsonrpc: "2.0", id: "t", method: "tools/list", params: modernParams() },
      token,
    );
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(names((await resultOf(response)).tools)).toEqual(["echo_note", "test_simple_text"]);
    const admin = await filtered.sign({ scope: TOOL_SCOPES, roles: "admin" });
    const asAdmin = await post(
      filtered.url,
      { jsonrpc: "2.0", id: 2, method: "tools/list", params: modernParams() },
      admin,
    );
    expect(names((await resultOf(asAdmin)).tools)).toEqual(["admin_reset", "echo_note", "test_simple_text"]);
  });

  it("tools/list in an SSE answer (2025-11-25) is filtered event by event", async () => {
    const token = await filtered.sign({ scope: "mcp:conformance:tools:call" });
    const response = await post(filtered.url, { jsonrpc: "2.0", id: 3, method: "tools/list" }, token, {
      "mcp-protocol-version": "2025-11-25",
    });
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    // admin_reset needs only tools:call and the admin role; the rest need the tool scope.
    expect(names((await resultOf(response)).tools)).toEqual([]);
  });

  it("resources, resource templates and prompts are filtered by the rules of read and get", async () => {
    const none = await filtered.sign({ scope: "mcp:conformance:resources:read mcp:conformance:prompts:get" });
    const all = await filtered.sign({
      scope:
        "mcp:conformance:resources:read mcp:conformance:resources:static mcp:conformance:prompts:get mcp:conformance:prompts:test_simple_prompt",
    });
    const list = async (method: string, token: string) =>
      resultOf(await post(filtered.url, { jsonrpc: "2.0", id: 4, method, params: modernParams() }, token));
    const uris = (r: Record<string, unknown>) => (r.resources as { uri: string }[]).map((x) => x.uri);
    expect(uris(await list("resources/list", none))).toEqual([]);
    expect(uris(await list("resources/list", all))).toEqual(["test://static-text"]);
    const templates = (r: Record<string, unknown>) =>
      (r.resourceTemplates as { uriTemplate: string }[]).map((x) => x.uriTemplate);
    expect(templates(await list("resources/templates/list", none))).toEqual(["test://template/{id}/data"]);
    const bare = await filtered.sign({ scope: "mcp:conformance:prompts:get" });
    expect(templates(await list("resources/templates/list", bare))).toEqual([]);
    expect(names((await list("prompts/list", none)).prompts)).toEqual([]);
    expect(names((await list("prompts/list", all)).prompts)).toEqual(["test_simple_prompt"]);
  });
});

describe("the official SDK v2 client through the gate", () => {
  it("lists the filtered tools, calls a permitted one, is refused one its claims do not allow", async () => {
    const token = await filtered.sign({ scope: TOOL_SCOPES });
    const transport = new StreamableHTTPClientTransport(new URL(filtered.url), {
      fetch: (url, init) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${token}`);
        return fetch(url, { ...init, headers });
      },
    });
    const client = new Client(
      { name: "gate-sdk-v2", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
        "echo_note",
        "test_simple_text",
      ]);
      const ran = filtered.reached.length;
      const result = await client.callTool({ name: "echo_note", arguments: { text: "hello" } });
      expect(result.content).toEqual([{ type: "text", text: "echo_note ran" }]);
      expect(filtered.reached.slice(ran)).toEqual([{ tool: "echo_note", args: { text: "hello" } }]);
      await expect(client.callTool({ name: "admin_reset" })).rejects.toThrow(/not permitted/);
      expect(filtered.reached.length).toBe(ran + 1);
      const last = filtered.events.at(-1)!;
      expect(last).toMatchObject({
        decision: "denied",
        method: "tools/call",
        target: "admin_reset",
        sub: "alice",
      });
    } finally {
      await client.close();
    }
  });
});

describe("OpenTelemetry", () => {
  it("one span per decision with the operation's attributes, never the token or arguments", async () => {
    spans.reset();
    const token = await filtered.sign({ scope: "mcp:conformance:baseline" });
    await post(
      filtered.url,
      {
        jsonrpc: "2.0",
        id: 11,
        method: "tools/call",
        params: modernParams({ name: "test_simple_text", arguments: { text: "ARG-VALUE" } }),
      },
      token,
    );
    const span = spans.getFinishedSpans().find((s) => s.name === "mcp.authorize tools/call");
    expect(span).toBeDefined();
    expect(span!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "test_simple_text",
      "jsonrpc.request.id": "11",
      "gatehouse.mcp.decision": "insufficient_scope",
      "enduser.id": "alice",
      "oauth.client_id": "app-1",
      "http.response.status_code": 403,
    });
    const text = JSON.stringify(span!.attributes);
    expect(text).not.toContain("ARG-VALUE");
    expect(text).not.toContain(token.split(".")[2]!);
  });
});
