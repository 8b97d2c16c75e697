/**
 * An MCP server (Streamable HTTP, stateless) behind Gatehouse's operation gate, with a scope per
 * tool, declared as a policy:
 *
 * | MCP request | scopes needed |
 * |---|---|
 * | any request to the endpoint (initialize, tools/list, ...) | `notes:read` |
 * | `tools/call` of `notes.list` | `notes:read` |
 * | `tools/call` of `notes.add` | `notes:write` (which implies `notes:read`) |
 * | anything else (another tool, resources, prompts, ...) | refused (403) |
 *
 * The gate (`createOperationGate`) reads the JSON-RPC body once, before the message is
 * dispatched, and judges every message of it against {@link NOTES_POLICY}: a token without
 * `notes:write` calling `notes.add` gets a real `403 insufficient_scope` challenge naming the
 * scopes needed (spec "Insufficient scope"), which an MCP client can act on by stepping up. The
 * parsed body is handed to the SDK (`parsedBody`), which does not parse it again, and every
 * decision is an audit line on stderr. The tool handlers check the same table again, as a second
 * line of defence.
 *
 * The MCP side is the official SDK v2 (`@modelcontextprotocol/server`): `createMcpHandler` serves
 * both protocol eras (2026-07-28's per-request envelopes, and a stateless `initialize` for
 * 2025-era clients), so it answers a 2026-07-28 client that the v1 SDK refused.
 *
 * Run it (any Node 20.11+; `npm run build` first so `gatehouse/*` resolves; `REVISION` is optional):
 *
 *   ISSUER=http://localhost:9000 RESOURCE=http://127.0.0.1:3000/mcp \
 *     node --import ./scripts/typescript.mjs examples/mcp/server.ts
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { pathToFileURL } from "node:url";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { jsonLogger, REVISIONS, type Revision, ScopeHierarchy } from "gatehouse-auth";
import { listen } from "gatehouse-auth/node";
import {
  type AuthInfo,
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationPolicy,
} from "gatehouse-auth/resource-server";
import * as z from "zod";

/** The scopes each tool needs: the one table the policy and the tool handlers read. */
export const TOOL_SCOPES: Readonly<Record<string, readonly string[]>> = {
  "notes.list": ["notes:read"],
  "notes.add": ["notes:write"],
};

/**
 * The operation policy (the same document could be a YAML file, see docs/resource-server.md):
 * every request needs `notes:read`, `tools/list` is open to it, each tool needs its scopes, and
 * anything not named is refused.
 */
export const NOTES_POLICY: OperationPolicy = {
  base: ["notes:read"],
  default: "deny",
  methods: { "tools/list": {} },
  tools: Object.fromEntries(Object.entries(TOOL_SCOPES).map(([tool, scopes]) => [tool, { scopes }])),
};

/** `notes:write` implies `notes:read` (2026-07-28: the resource server MUST honour its hierarchy). */
export const NOTES_HIERARCHY: Readonly<Record<string, readonly string[]>> = {
  "notes:write": ["notes:read"],
};

export interface NotesMcpServerOptions {
  /** The canonical URI of the MCP endpoint, e.g. `https://mcp.example.com/mcp`. */
  resource: string;
  /** The issuer identifier of the authorization server that protects it. */
  issuer: string;
  /** Where that issuer publishes its signing keys (`jwks_uri` in its metadata). */
  jwksUri: string;
  /** Spec revision whose resource-server rules apply (default `2026-07-28`). */
  revision?: Revision;
}

export interface NotesMcpServer {
  /** The web-standard handler: serve it with `listen` or `toNodeListener` from `gatehouse-auth/node`. */
  fetch(request: Request): Promise<Response>;
  /** The metadata URL that challenges point to. */
  resourceMetadataUrl: string;
  /** Ends the MCP handler's open streams. */
  close(): Promise<void>;
}

/**
 * Creates the protected MCP endpoint. Options and the policy are checked now (a bad resource URI,
 * issuer or policy throws at start-up, not on the first request).
 */
export function createNotesMcpServer(options: NotesMcpServerOptions): NotesMcpServer {
  const hierarchy = new ScopeHierarchy(NOTES_HIERARCHY);
  const resourceServer = createResourceServer({
    resource: options.resource,
    authorizationServers: [options.issuer],
    scopesSupported: ["notes:read", "notes:write"],
    resourceName: "Notes (MCP example)",
    scopeHierarchy: hierarchy,
    revision: options.revision,
    verifier: cachedVerifier(
      jwtVerifier({ issuer: options.issuer, audience: options.resource, jwksUri: options.jwksUri }),
    ),
  });
  // One audit line per decision (user, client, tool, decision, missing scopes) on stderr.
  const gate = createOperationGate(resourceServer, { policy: NOTES_POLICY, logger: jsonLogger() });
  const endpointPath = new URL(resourceServer.resource).pathname;
  const notesBySubject = new Map<string, string[]>();

  /** Second line of defence: a tool never runs without its scopes, whatever the HTTP layer did. */
  const assertToolScopes = (auth: AuthInfo, tool: string): void => {
    const missing = hierarchy.missing(auth.scopes, TOOL_SCOPES[tool] ?? []);
    if (missing.size > 0) throw new Error(`${tool} needs the scope ${[...missing].join(" ")}`);
  };
  /** One MCP server per request (the SDK's handler asks), knowing who is calling. */
  const mcpServerFor = (auth: AuthInfo): McpServer => {
    const owner = auth.subject ?? `client:${auth.clientId ?? "unknown"}`;
    const server = new McpServer({ name: "gatehouse-notes-example", version: "1.0.0" });
    server.registerTool("notes.list", { description: "List your notes (needs notes:read)" }, async () => {
      assertToolScopes(auth, "notes.list");
      const notes = notesBySubject.get(owner) ?? [];
      return { content: [{ type: "text", text: JSON.stringify(notes) }] };
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

  // The gate's verdict for the request being served. (Not the SDK's `authInfo`: that carries the
  // raw token, which Gatehouse's AuthInfo deliberately keeps out of handlers.)
  const currentAuth = new AsyncLocalStorage<AuthInfo>();
  const mcp = createMcpHandler(() => {
    const auth = currentAuth.getStore();
    // Only the gate calls the handler, so every request has a verified token.
    if (!auth) throw new Error("MCP request without a verified token");
    return mcpServerFor(auth);
  });

  return {
    resourceMetadataUrl: resourceServer.resourceMetadataUrl,
    async fetch(request) {
      // RFC 9728 §3: the metadata document is public.
      if (resourceServer.handles(request)) return resourceServer.metadataResponse(request);
      if (new URL(request.url).pathname !== endpointPath) return new Response("not found", { status: 404 });
      // The gate read and parsed the body once; the SDK takes the parsed value as it is.
      return gate.handle(request, (forwarded, context) =>
        currentAuth.run(context.auth, () => mcp.fetch(forwarded, { parsedBody: context.body })),
      );
    },
    close: () => mcp.close(),
  };
}

/** Reads the issuer's `jwks_uri` from its RFC 8414 metadata. */
export async function discoverJwksUri(issuer: string): Promise<string> {
  const url = `${issuer.replace(/\/$/, "")}/.well-known/oauth-authorization-server`;
  const response = await fetch(url).catch((error: unknown) => {
    throw new Error(`cannot reach the authorization server at ${issuer}`, { cause: error });
  });
  if (!response.ok) throw new Error(`no authorization server metadata at ${issuer} (${response.status})`);
  const metadata = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
  // RFC 8414 §3.3: the metadata's issuer must be exactly the one we asked.
  if (metadata.issuer !== issuer || typeof metadata.jwks_uri !== "string") {
    throw new Error("the authorization server metadata does not match the issuer");
  }
  return metadata.jwks_uri;
}

/** `REVISION` (default 2026-07-28): the spec revision whose resource-server rules apply. */
function revisionFromEnvironment(): Revision {
  const value = process.env.REVISION ?? "2026-07-28";
  const revision = REVISIONS.find((known) => known === value);
  if (!revision) throw new Error(`REVISION must be one of ${REVISIONS.join(", ")}, not ${value}`);
  return revision;
}

async function main(): Promise<void> {
  const issuer = process.env.ISSUER ?? "http://localhost:9000";
  const resource = process.env.RESOURCE ?? "http://127.0.0.1:3000/mcp";
  const revision = revisionFromEnvironment();
  const url = new URL(resource);
  const server = createNotesMcpServer({ resource, issuer, revision, jwksUri: await discoverJwksUri(issuer) });
  const running = await listen(server.fetch, { host: url.hostname, port: Number(url.port || 80) });
  process.stdout.write(
    `MCP server on ${running.url}${url.pathname}, protected by ${issuer} (revision ${revision})\n`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
