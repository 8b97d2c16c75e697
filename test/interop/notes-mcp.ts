/**
 * The MCP server the interop tests talk to: the official SDK's v2 server (`createMcpHandler`, which
 * serves both protocol eras: `server/discover` + per-request envelopes for 2026-07-28, a stateless
 * `initialize` leg for 2025-era clients) behind Gatehouse's resource-server gate, with a scope per
 * tool as in examples/mcp:
 *
 * | MCP request | scopes needed |
 * |---|---|
 * | any request to the endpoint | `notes:read` |
 * | `tools/call` of `notes.list` | `notes:read` |
 * | `tools/call` of `notes.add` | `notes:write` (implies `notes:read`) |
 *
 * The scope check is done by the gate, before the JSON-RPC message is dispatched, so a token
 * without `notes:write` gets a real `403 insufficient_scope` challenge (spec "Insufficient scope")
 * that an MCP client can act on; the tools check the same table again.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import * as z from "zod";
import {
  type AuthInfo,
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type Revision,
} from "../../src/resource-server/index.js";
import { ScopeHierarchy } from "../../src/shared/scopes.js";

export const NOTES_SCOPES = ["notes:read", "notes:write"] as const;
/** Every request to the endpoint needs these. */
const ENDPOINT_SCOPES: readonly string[] = ["notes:read"];
/** The one table the gate and the tools read. */
const TOOL_SCOPES: Readonly<Record<string, readonly string[]>> = {
  "notes.list": ["notes:read"],
  "notes.add": ["notes:write"],
};
/** `notes:write` implies `notes:read` (2026-07-28: the resource server MUST honour its hierarchy). */
export const NOTES_HIERARCHY: Readonly<Record<string, string[]>> = { "notes:write": ["notes:read"] };

/** One request as the MCP endpoint saw it, for assertions on the 401/403 exchanges. */
export interface McpExchange {
  httpMethod: string;
  /** The JSON-RPC method(s) of the body, when it was JSON. */
  rpcMethods: string[];
  /** `params.name` of a `tools/call`. */
  tool?: string;
  /** `MCP-Protocol-Version` as sent. */
  protocolVersion: string | null;
  hadToken: boolean;
  status: number;
  challenge: string | null;
}

export interface NotesMcpOptions {
  resource: string;
  issuer: string;
  jwksUri: string;
  revision: Revision;
  /** The clock the token checks use (shared with the authorization server in the tests). */
  now: () => number;
  /** The gate's hook for a token refused with 403 insufficient_scope (docs/resource-server.md). */
  onInsufficientScope?: (auth: AuthInfo, requiredScopes: readonly string[]) => void | Promise<void>;
}

export interface NotesMcp {
  fetch(request: Request): Promise<Response>;
  readonly exchanges: McpExchange[];
  close(): Promise<void>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

async function jsonMessages(request: Request): Promise<Record<string, unknown>[]> {
  if (request.method !== "POST") return [];
  try {
    const body: unknown = await request.clone().json();
    return (Array.isArray(body) ? body : [body]).filter(isRecord);
  } catch {
    return [];
  }
}

/** The endpoint's scopes plus those of every tool a `tools/call` in the body names. */
async function requiredScopes(request: Request): Promise<string[]> {
  const scopes = new Set(ENDPOINT_SCOPES);
  for (const message of await jsonMessages(request)) {
    if (message.method !== "tools/call" || !isRecord(message.params)) continue;
    const name = message.params.name;
    if (typeof name === "string" && Object.hasOwn(TOOL_SCOPES, name)) {
      for (const scope of TOOL_SCOPES[name] ?? []) scopes.add(scope);
    }
  }
  return [...scopes];
}

export function createNotesMcp(options: NotesMcpOptions): NotesMcp {
  const hierarchy = new ScopeHierarchy(NOTES_HIERARCHY);
  const gate = createResourceServer({
    resource: options.resource,
    authorizationServers: [options.issuer],
    scopesSupported: [...NOTES_SCOPES],
    resourceName: "Notes (interop)",
    scopeHierarchy: hierarchy,
    revision: options.revision,
    ...(options.onInsufficientScope && { onInsufficientScope: options.onInsufficientScope }),
    verifier: cachedVerifier(
      jwtVerifier({
        issuer: options.issuer,
        audience: options.resource,
        jwksUri: options.jwksUri,
        now: options.now,
      }),
      { now: options.now },
    ),
  });
  const endpointPath = new URL(gate.resource).pathname;
  const protect = gate.requireBearer({ scopes: requiredScopes });
  const notesBySubject = new Map<string, string[]>();
  // The gate's verdict for the request being served. (Not the SDK's `authInfo`: that one carries
  // the raw token, which Gatehouse's AuthInfo deliberately keeps out of handlers.)
  const currentAuth = new AsyncLocalStorage<AuthInfo>();

  const assertToolScopes = (auth: AuthInfo, tool: string): void => {
    const missing = hierarchy.missing(auth.scopes, TOOL_SCOPES[tool] ?? []);
    if (missing.size > 0) throw new Error(`${tool} needs the scope ${[...missing].join(" ")}`);
  };

  const serverFor = (auth: AuthInfo): McpServer => {
    const owner = auth.subject ?? `client:${auth.clientId ?? "unknown"}`;
    const server = new McpServer({ name: "gatehouse-interop-notes", version: "1.0.0" });
    server.registerTool("notes.list", { description: "List your notes (needs notes:read)" }, async () => {
      assertToolScopes(auth, "notes.list");
      return { content: [{ type: "text", text: JSON.stringify(notesBySubject.get(owner) ?? []) }] };
    });
    server.registerTool(
      "notes.add",
      {
        description: "Add a note (needs notes:write)",
        inputSchema: z.object({ text: z.string().min(1).max(2000) }),
      },
      async ({ text }) => {
        assertToolScopes(auth, "notes.add");
        const notes = notesBySubject.get(owner) ?? [];
        notes.push(text);
        notesBySubject.set(owner, notes);
        return { content: [{ type: "text", text: `added note ${notes.length}` }] };
      },
    );
    return server;
  };

  const mcp = createMcpHandler(() => {
    const auth = currentAuth.getStore();
    // Only the gate calls the handler, so every request has a verified token.
    if (!auth) throw new Error("MCP request without a verified token");
    return serverFor(auth);
  });

  const exchanges: McpExchange[] = [];
  return {
    exchanges,
    async fetch(request) {
      // RFC 9728 §3: the metadata document is public.
      if (gate.handles(request)) return gate.metadataResponse(request);
      if (new URL(request.url).pathname !== endpointPath) return new Response("not found", { status: 404 });
      const messages = await jsonMessages(request);
      const call = messages.find((m) => m.method === "tools/call");
      const response = await protect(request, (req, auth) => currentAuth.run(auth, () => mcp.fetch(req)));
      exchanges.push({
        httpMethod: request.method,
        rpcMethods: messages.map((m) => String(m.method ?? "(response)")),
        ...(call && isRecord(call.params) && { tool: String(call.params.name) }),
        protocolVersion: request.headers.get("mcp-protocol-version"),
        hadToken: request.headers.has("authorization"),
        status: response.status,
        challenge: response.headers.get("www-authenticate"),
      });
      return response;
    },
    close: () => mcp.close(),
  };
}
