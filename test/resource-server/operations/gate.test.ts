/**
 * The operation gate in front of a real MCP server (official SDK v2, `createMcpHandler`) on
 * loopback, with real signed tokens: per-operation challenges as the conformance suite's SEP-2350
 * scenario checks them (tools/call, resources/read static and templated, prompts/get), batches
 * judged whole with the union of their scopes, claim conditions, the default deny, and the hostile
 * bodies (oversized, malformed, notifications, id-less requests, look-alike names).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startIssuer, type TestIssuer } from "../fixtures.js";
import {
  challengedScopes,
  FULL_SCOPES,
  type GatedMcp,
  modernParams,
  post,
  startGatedMcp,
} from "./support.js";

let issuer: TestIssuer;
let mcp: GatedMcp;
let low: string;
let full: string;
beforeAll(async () => {
  issuer = await startIssuer();
  mcp = await startGatedMcp(issuer, { gate: { maxBodyBytes: 64 * 1024 } });
  low = await mcp.sign({ scope: "mcp:conformance:baseline" });
  full = await mcp.sign({ scope: FULL_SCOPES });
});
afterAll(async () => {
  await mcp?.close();
  await issuer?.close();
});

/** The conformance suite's four fixtures (src/scenarios/server/scope-challenge.ts). */
const FIXTURES = [
  {
    method: "tools/call",
    params: { name: "test_simple_text" },
    scopes: ["mcp:conformance:tools:call", "mcp:conformance:tools:test_simple_text"],
  },
  {
    method: "resources/read",
    params: { uri: "test://static-text" },
    scopes: ["mcp:conformance:resources:read", "mcp:conformance:resources:static"],
  },
  {
    method: "resources/read",
    params: { uri: "test://template/123/data" },
    scopes: ["mcp:conformance:resources:read", "mcp:conformance:resources:template:123"],
  },
  {
    method: "prompts/get",
    params: { name: "test_simple_prompt" },
    scopes: ["mcp:conformance:prompts:get", "mcp:conformance:prompts:test_simple_prompt"],
  },
] as const;

describe("per-operation challenges (SEP-2350: every needed scope in one challenge)", () => {
  it.each(FIXTURES)("$method $params: 403 naming both scopes, then 200 with the full token", async (f) => {
    const request = {
      jsonrpc: "2.0",
      id: `scope-${f.method}`,
      method: f.method,
      params: modernParams(f.params),
    };
    const refused = await post(mcp.url, request, low);
    expect(refused.status).toBe(403);
    const header = refused.headers.get("www-authenticate") ?? "";
    expect(header).toMatch(/^Bearer /);
    expect(header).toContain('error="insufficient_scope"');
    expect(header).toContain(
      `resource_metadata="${new URL(mcp.url).origin}/.well-known/oauth-protected-resource/mcp"`,
    );
    expect(challengedScopes(refused).sort()).toEqual([...f.scopes].sort());

    const allowed = await post(mcp.url, request, full);
    expect(allowed.status).toBe(200);
    const body = (await allowed.json()) as { result?: Record<string, unknown>; error?: unknown };
    expect(body.error).toBeUndefined();
    expect(body.result).toBeDefined();
  });

  it("a token without any token: 401 whose scope names the operation's scopes", async () => {
    const response = await post(mcp.url, {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: modernParams({ name: "test_simple_text" }),
    });
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).not.toContain("error=");
    expect(challengedScopes(response).sort()).toEqual(FIXTURES[0].scopes.slice().sort());
  });

  it("the scope hierarchy counts: a broader scope covers the tool's two", async () => {
    const broad = await mcp.sign({ scope: "mcp:conformance:all" });
    const response = await post(
      mcp.url,
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: modernParams({ name: "test_simple_text" }) },
      broad,
    );
    expect(response.status).toBe(200);
  });

  it("the body is parsed once and handed on: the server gets the gate's parsed value", async () => {
    const before = mcp.handedOn.length;
    const message = {
      jsonrpc: "2.0",
      id: 77,
      method: "tools/call",
      params: modernParams({ name: "echo_note", arguments: { text: "x" } }),
    };
    expect((await post(mcp.url, message, full)).status).toBe(200);
    expect(mcp.handedOn.slice(before)).toEqual([message]);
  });
});

describe("batches are judged whole", () => {
  it("a permitted call beside one needing more scopes: one 403 naming the union, nothing runs", async () => {
    const toolsOnly = await mcp.sign({
      scope: "mcp:conformance:tools:call mcp:conformance:tools:test_simple_text",
    });
    const ran = mcp.reached.length;
    const seen = mcp.events.length;
    const response = await post(
      mcp.url,
      [
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "test_simple_text" } },
        { jsonrpc: "2.0", id: 2, method: "prompts/get", params: { name: "test_simple_prompt" } },
      ],
      toolsOnly,
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(response.status).toBe(403);
    expect(challengedScopes(response).sort()).toEqual([...FIXTURES[0].scopes, ...FIXTURES[3].scopes].sort());
    expect(mcp.reached.length).toBe(ran);
    const events = mcp.events.slice(seen);
    expect(events.map((e) => [e.target, e.decision])).toEqual([
      ["test_simple_text", "refused_with_batch"],
      ["test_simple_prompt", "insufficient_scope"],
    ]);
    expect(events[1]!.missing_scopes?.sort()).toEqual(FIXTURES[3].scopes.slice().sort());
  });

  it("a permitted call beside a tool the policy does not name: 403 without a scope challenge", async () => {
    const ran = mcp.reached.length;
    const response = await post(
      mcp.url,
      [
        { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "test_simple_text" } },
        { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "unlisted_tool" } },
      ],
      full,
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(response.status).toBe(403);
    expect(response.headers.get("www-authenticate")).toBeNull();
    expect(await response.json()).toMatchObject({ error: "forbidden" });
    expect(mcp.reached.length).toBe(ran);
  });
});

describe("policy refusals", () => {
  it("claim conditions: admin_reset runs for roles [admin], 403 for roles [user]", async () => {
    const call = {
      jsonrpc: "2.0",
      id: 5,
      method: "tools/call",
      params: modernParams({ name: "admin_reset" }),
    };
    const admin = await mcp.sign({ scope: "mcp:conformance:tools:call", roles: ["admin", "ops"] });
    const user = await mcp.sign({ scope: "mcp:conformance:tools:call", roles: ["user"] });
    expect((await post(mcp.url, call, admin)).status).toBe(200);
    const refused = await post(mcp.url, call, user);
    expect(refused.status).toBe(403);
    expect(refused.headers.get("www-authenticate")).toBeNull();
    expect(mcp.events.at(-1)).toMatchObject({
      decision: "denied",
      reason: "conditions",
      target: "admin_reset",
    });
  });

  it.each([
    ["zero-width space", "test_simple_text\u200b"],
    ["fullwidth letter", "\uff54est_simple_text"],
    ["Cyrillic look-alike", "t\u0435st_simple_text"],
    ["trailing newline", "test_simple_text\n"],
    ["case", "TEST_SIMPLE_TEXT"],
    ["lone surrogate", "test_simple_text\ud800"],
  ])("a tool name with a %s is another tool: denied by default", async (_, name) => {
    const response = await post(
      mcp.url,
      { jsonrpc: "2.0", id: 9, method: "tools/call", params: modernParams({ name }) },
      full,
    );
    expect(response.status).toBe(403);
    expect(mcp.events.at(-1)).toMatchObject({ decision: "denied", reason: "unmatched" });
    // The log line is JSON: a newline in the name is escaped, never a second line.
    expect(mcp.logLines.at(-1)!.includes("\n")).toBe(false);
  });

  it("a resource URI whose template value is not scope-token text is denied, not put in a challenge", async () => {
    const response = await post(
      mcp.url,
      {
        jsonrpc: "2.0",
        id: 3,
        method: "resources/read",
        params: modernParams({ uri: 'test://template/a"b/data' }),
      },
      low,
    );
    expect(response.status).toBe(403);
    expect(response.headers.get("www-authenticate")).toBeNull();
    expect(mcp.events.at(-1)).toMatchObject({ decision: "denied", reason: "scope-template" });
  });

  it("an id-less tools/call (a notification) is judged like the call: denied tool refused", async () => {
    const ran = mcp.reached.length;
    const response = await post(
      mcp.url,
      { jsonrpc: "2.0", method: "tools/call", params: { name: "unlisted_tool" } },
      full,
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(response.status).toBe(403);
    const needs = await post(
      mcp.url,
      { jsonrpc: "2.0", method: "tools/call", params: { name: "test_simple_text" } },
      low,
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(needs.status).toBe(403);
    expect(challengedScopes(needs).sort()).toEqual(FIXTURES[0].scopes.slice().sort());
    expect(mcp.reached.length).toBe(ran);
  });

  it("a protocol notification needs only the base scopes: passed on (202)", async () => {
    const response = await post(mcp.url, { jsonrpc: "2.0", method: "notifications/initialized" }, low, {
      "mcp-protocol-version": "2025-11-25",
    });
    expect(response.status).toBe(202);
    expect(mcp.events.at(-1)).toMatchObject({ decision: "allowed", method: "notifications/initialized" });
  });

  it("an unnamed method (completion/complete) falls to the default: denied", async () => {
    const response = await post(
      mcp.url,
      { jsonrpc: "2.0", id: 4, method: "completion/complete", params: modernParams({}) },
      full,
    );
    expect(response.status).toBe(403);
  });
});

describe("hostile bodies", () => {
  const big = (size: number) =>
    JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "echo_note", arguments: { text: "x".repeat(size) } },
    });

  it("over the cap with Content-Length: 413 with a JSON-RPC error, the server never sees it", async () => {
    const ran = mcp.reached.length;
    const response = await post(mcp.url, big(70 * 1024), full, { "mcp-protocol-version": "2025-11-25" });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: "Request body too large" },
    });
    expect(mcp.reached.length).toBe(ran);
  });

  it("over the cap in a chunked body (no Content-Length): 413 as well", async () => {
    const text = new TextEncoder().encode(big(70 * 1024));
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < text.length; i += 8192) controller.enqueue(text.slice(i, i + 8192));
        controller.close();
      },
    });
    const response = await fetch(mcp.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${full}`,
      },
      body,
      duplex: "half",
    } as RequestInit & { duplex: "half" });
    expect(response.status).toBe(413);
  });

  it("without credentials only 16 KiB are read: a larger body gets the 401 without being parsed", async () => {
    const small = await post(mcp.url, big(1000));
    expect(small.status).toBe(401);
    // A small body is read: the 401 names the call's scopes.
    expect(challengedScopes(small).sort()).toEqual([
      "mcp:conformance:tools:call",
      "mcp:conformance:tools:test_simple_text",
    ]);
    const large = await post(mcp.url, big(30 * 1024));
    expect(large.status).toBe(401);
    // Not read past 16 KiB: the 401 falls back to scopes_supported, not the (unread) call's scopes.
    expect(challengedScopes(large)).toContain("mcp:conformance:prompts:get");
  });

  it("just under the cap is read and passed on", async () => {
    const response = await post(mcp.url, big(60 * 1024), full, { "mcp-protocol-version": "2025-11-25" });
    expect(response.status).toBe(200);
  });

  it.each([
    ["not JSON", "{", 400, -32700],
    ["an empty batch", "[]", 400, -32600],
    ["no jsonrpc member", '{"id":1,"method":"tools/list"}', 400, -32600],
    ["a method that is not a string", '{"jsonrpc":"2.0","id":1,"method":7}', 400, -32600],
    ["tools/call without a name", '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}', 400, -32602],
    [
      "a resource read with a numeric uri",
      '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":1}}',
      400,
      -32602,
    ],
    ["an object id", '{"jsonrpc":"2.0","id":{},"method":"tools/list"}', 400, -32600],
  ])("%s: %s with JSON-RPC error %s (after the token is checked)", async (_, body, status, code) => {
    const anonymous = await post(mcp.url, body);
    expect(anonymous.status).toBe(401);
    const response = await post(mcp.url, body, full);
    expect(response.status).toBe(status);
    expect(((await response.json()) as { error: { code: number } }).error.code).toBe(code);
  });

  it("audit events and log lines carry neither the token nor argument values", async () => {
    const seen = mcp.logLines.length;
    await post(
      mcp.url,
      {
        jsonrpc: "2.0",
        id: 8,
        method: "tools/call",
        params: modernParams({ name: "echo_note", arguments: { text: "ARGUMENT-VALUE-42" } }),
      },
      full,
    );
    await post(
      mcp.url,
      {
        jsonrpc: "2.0",
        id: 8,
        method: "tools/call",
        params: modernParams({ name: "echo_note", arguments: { text: "ARGUMENT-VALUE-42" } }),
      },
      low,
    );
    const lines = mcp.logLines.slice(seen).join("\n");
    expect(lines).toContain('"target":"echo_note"');
    expect(lines).toContain('"sub":"alice"');
    expect(lines).toContain('"client_id":"app-1"');
    expect(lines).not.toContain("ARGUMENT-VALUE-42");
    expect(lines).not.toContain(full.split(".")[2]!);
    expect(lines).not.toContain(low.split(".")[2]!);
    const events = JSON.stringify(mcp.events);
    expect(events).not.toContain("ARGUMENT-VALUE-42");
    expect(events).not.toContain(full.split(".")[2]!);
  });
});

describe("revision 2025-11-25: the challenge strategy of challenge.ts", () => {
  let older: GatedMcp;
  beforeAll(async () => {
    older = await startGatedMcp(issuer, { revision: "2025-11-25" });
  });
  afterAll(async () => {
    await older?.close();
  });

  it("the 403 names the scopes the call needs plus the granted ones that still matter", async () => {
    const token = await older.sign({ scope: "mcp:conformance:tools:call mcp:conformance:prompts:get" });
    const response = await post(
      older.url,
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "test_simple_text" } },
      token,
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(response.status).toBe(403);
    // "recommended": the needed scopes, and the granted prompts:get is repeated (relevant to the
    // resource: the policy names it), so a client asking for exactly this set keeps it.
    expect(challengedScopes(response).sort()).toEqual(
      [
        "mcp:conformance:tools:call",
        "mcp:conformance:tools:test_simple_text",
        "mcp:conformance:prompts:get",
      ].sort(),
    );
  });
});
