/**
 * Shared by the operation-gate tests (not a test file): a real MCP server on the official SDK v2
 * (`@modelcontextprotocol/server`, `createMcpHandler`) with the conformance suite's fixtures
 * (`test_simple_text`, `test://static-text`, `test://template/{id}/data`, `test_simple_prompt`)
 * plus a few more, behind `createOperationGate` on a loopback listener, with a token signer.
 */
import { createMcpHandler, McpServer, ResourceTemplate } from "@modelcontextprotocol/server";
import * as z from "zod";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationAuditEvent,
  type OperationGate,
  type OperationGateOptions,
  parseOperationPolicy,
  type Revision,
} from "../../../src/resource-server/index.js";
import type { Logger } from "../../../src/shared/log.js";
import type { TestIssuer } from "../fixtures.js";

/** The conformance scope pairs (SEP-2350 scenario), and a tool only admins may call. */
export const POLICY_YAML = `# MCP operation policy (conformance fixture names)
base: []
default: deny
methods:
  tools/list: {}
  resources/list: {}
  resources/templates/list: {}
  prompts/list: {}
  tools/call: { scopes: [mcp:conformance:tools:call] }
  resources/read: { scopes: [mcp:conformance:resources:read] }
  prompts/get: { scopes: [mcp:conformance:prompts:get] }
tools:
  test_simple_text: { scopes: [mcp:conformance:tools:test_simple_text] }
  echo_note: { scopes: [mcp:conformance:tools:test_simple_text] }
  admin_reset:
    when: { roles: admin }
resources:
  test://static-text: { scopes: [mcp:conformance:resources:static] }
  "test://template/{id}/data": { scopes: ["mcp:conformance:resources:template:{id}"] }
prompts:
  test_simple_prompt: { scopes: [mcp:conformance:prompts:test_simple_prompt] }
`;

export const FULL_SCOPES = [
  "mcp:conformance:tools:call",
  "mcp:conformance:tools:test_simple_text",
  "mcp:conformance:resources:read",
  "mcp:conformance:resources:static",
  "mcp:conformance:resources:template:123",
  "mcp:conformance:prompts:get",
  "mcp:conformance:prompts:test_simple_prompt",
].join(" ");

/** What each tool call reached the server with: the tool ran (name, arguments). */
export interface Reached {
  tool: string;
  args: unknown;
}

export function mcpServerFactory(
  reached: Reached[],
  tools: readonly string[] = ["test_simple_text", "echo_note", "admin_reset", "unlisted_tool"],
) {
  return () => {
    const server = new McpServer({ name: "operation-gate-test", version: "1.0.0" });
    const tool = (name: string) =>
      server.registerTool(
        name,
        { description: `${name} tool`, inputSchema: z.object({ text: z.string().optional() }) },
        async (args) => {
          reached.push({ tool: name, args });
          return { content: [{ type: "text", text: `${name} ran` }] };
        },
      );
    for (const name of tools) tool(name);
    server.registerResource("static", "test://static-text", { mimeType: "text/plain" }, async (uri) => ({
      contents: [{ uri: uri.href, text: "static text" }],
    }));
    server.registerResource(
      "template",
      new ResourceTemplate("test://template/{id}/data", { list: undefined }),
      { mimeType: "text/plain" },
      async (uri, { id }) => ({ contents: [{ uri: uri.href, text: `data for ${String(id)}` }] }),
    );
    server.registerPrompt("test_simple_prompt", { description: "a prompt" }, async () => ({
      messages: [{ role: "user", content: { type: "text", text: "hello" } }],
    }));
    server.registerPrompt("other_prompt", { description: "not in the policy" }, async () => ({
      messages: [{ role: "user", content: { type: "text", text: "other" } }],
    }));
    return server;
  };
}

export interface GatedMcp {
  url: string;
  gate: OperationGate;
  events: OperationAuditEvent[];
  logLines: string[];
  reached: Reached[];
  /** The parsed bodies the server was handed (SDK `parsedBody`). */
  handedOn: unknown[];
  sign(claims: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startGatedMcp(
  issuer: TestIssuer,
  options: { revision?: Revision; gate?: Partial<OperationGateOptions> } = {},
): Promise<GatedMcp> {
  const events: OperationAuditEvent[] = [];
  const logLines: string[] = [];
  const reached: Reached[] = [];
  const handedOn: unknown[] = [];
  const record = (level: string) => (event: string, fields?: Record<string, unknown>) => {
    logLines.push(JSON.stringify({ level, event, ...fields }));
  };
  const logger: Logger = { info: record("info"), warn: record("warn"), error: record("error") };
  const mcp = createMcpHandler(mcpServerFactory(reached));
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const server: ListeningServer = await listen((request) => handler(request), {
    maxBodyBytes: 8 * 1024 * 1024,
  });
  const resource = `${server.url}/mcp`;
  const policy = parseOperationPolicy(POLICY_YAML, "policy.yaml");
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    // The scopes the policy names are the resource's (RFC 9728 scopes_supported; under 2025-11-25
    // they are also the granted scopes a challenge repeats).
    scopesSupported: [...policy.scopesNamed],
    scopeHierarchy: {
      "mcp:conformance:all": ["mcp:conformance:tools:call", "mcp:conformance:tools:test_simple_text"],
    },
    revision: options.revision,
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, {
    policy,
    logger,
    onAuditEvent: (event) => events.push(event),
    ...options.gate,
  });
  handler = async (request) => {
    if (resourceServer.handles(request)) return resourceServer.metadataResponse(request);
    return gate.handle(request, (forwarded, context) => {
      handedOn.push(context.body);
      return mcp.fetch(forwarded, { parsedBody: context.body });
    });
  };
  return {
    url: resource,
    gate,
    events,
    logLines,
    reached,
    handedOn,
    sign: (claims) => issuer.sign({ aud: resource, sub: "alice", client_id: "app-1", ...claims }),
    async close() {
      await mcp.close();
      await server.close();
    },
  };
}

/** The 2026-07-28 per-request envelope (`_meta`), as the conformance suite sends it. */
export function modernParams(params: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...params,
    _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "gate-test", version: "1.0.0" },
      "io.modelcontextprotocol/clientCapabilities": {},
    },
  };
}

/** POSTs a JSON-RPC body (text or value) with the 2026-07-28 headers. */
export async function post(
  url: string,
  body: unknown,
  token?: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  // 2026-07-28 (SEP-2243): the method and the name travel in headers too; the gate reads the body.
  const message = (typeof body === "object" && body !== null && !Array.isArray(body) ? body : {}) as {
    method?: unknown;
    params?: { name?: unknown; uri?: unknown };
  };
  const name = message.params?.name ?? message.params?.uri;
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      ...(typeof message.method === "string" ? { "mcp-method": message.method } : {}),
      ...(typeof name === "string" && /^[\x20-\x7e]*$/.test(name) ? { "mcp-name": name } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** The `scope` of a Bearer challenge, as a list. */
export function challengedScopes(response: Response): string[] {
  const header = response.headers.get("www-authenticate") ?? "";
  const match = /scope="([^"]*)"/.exec(header);
  return match ? match[1]!.split(" ") : [];
}
