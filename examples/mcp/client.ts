/**
 * An MCP client whose transport's `fetch` is Gatehouse's `createAuthFetch`: the first request's
 * 401 starts discovery, registration and the authorization code flow with PKCE; a later
 * `403 insufficient_scope` (calling `notes.add` with a read-only token) starts a step-up for the
 * challenged scopes, and the request is retried with the new token. The MCP SDK never sees a 401.
 *
 * The MCP side is the official SDK v2 (`@modelcontextprotocol/client`), pinned to protocol
 * revision 2026-07-28 unless `REVISION=2025-11-25` asks for the earlier one.
 *
 * Run it against examples/mcp/server.ts (any Node 20.11+; `npm run build` first):
 *
 *   node --import ./scripts/typescript.mjs examples/mcp/client.ts http://127.0.0.1:3000/mcp "buy milk"
 *
 * It opens your browser to log in (or prints the URL), listening on a one-shot loopback redirect.
 */
import { pathToFileURL } from "node:url";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  type AuthEvent,
  browserSession,
  type CreateAuthFetchOptions,
  createAuthFetch,
  type Revision,
} from "gatehouse-auth/client";

/**
 * Connects an MCP client to `serverUrl`. `auth` says how to authorize: at least a user agent
 * (`authorizationSession`, or `userAgent` + `redirectUri`); everything else has defaults
 * (dynamic registration, tokens in memory, revision 2026-07-28). The MCP protocol revision follows
 * `auth.revision`, so the authorization rules and the wire agree.
 */
export async function connectNotesClient(serverUrl: URL, auth: CreateAuthFetchOptions): Promise<Client> {
  const revision: Revision = auth.revision ?? "2026-07-28";
  const authFetch = createAuthFetch({ clientName: "Gatehouse MCP example", ...auth, revision });
  const transport = new StreamableHTTPClientTransport(serverUrl, { fetch: authFetch });
  const client = new Client(
    { name: "gatehouse-notes-example-client", version: "1.0.0" },
    // 2025-11-25 is what the SDK negotiates by default; 2026-07-28 has to be asked for.
    revision === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
  );
  await client.connect(transport);
  return client;
}

/** The text of a tool result's first content item (the example's tools answer with text). */
export function resultText(result: Awaited<ReturnType<Client["callTool"]>>): string {
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const first = content[0] as { type?: unknown; text?: unknown } | undefined;
  return first?.type === "text" && typeof first.text === "string" ? first.text : "";
}

/** One line per authorization event, for the terminal: what happened and for which scopes. */
export function describeEvent(event: AuthEvent): string {
  switch (event.type) {
    case "authorization_started":
      return `${event.stepUp ? "step-up" : "authorization"} started for scope "${event.scope ?? ""}"`;
    case "authorized":
      return `authorized with scope "${event.scope ?? ""}"`;
    default:
      return event.type;
  }
}

function revisionFromEnvironment(): Revision {
  const value = process.env.REVISION ?? "2026-07-28";
  if (value !== "2025-11-25" && value !== "2026-07-28") {
    throw new Error(`REVISION must be 2025-11-25 or 2026-07-28, not ${value}`);
  }
  return value;
}

async function main(): Promise<void> {
  const [serverUrl = "http://127.0.0.1:3000/mcp", note = "hello from the MCP example"] =
    process.argv.slice(2);
  const client = await connectNotesClient(new URL(serverUrl), {
    authorizationSession: browserSession(),
    revision: revisionFromEnvironment(),
    onEvent: (event) => process.stderr.write(`[auth] ${describeEvent(event)}\n`),
  });
  try {
    process.stdout.write(`protocol: ${client.getNegotiatedProtocolVersion()}\n`);
    const { tools } = await client.listTools();
    process.stdout.write(`tools: ${tools.map((t) => t.name).join(", ")}\n`);
    process.stdout.write(`notes.list → ${resultText(await client.callTool({ name: "notes.list" }))}\n`);
    // Needs notes:write: the server answers 403 insufficient_scope and the client steps up.
    process.stdout.write(
      `notes.add → ${resultText(await client.callTool({ name: "notes.add", arguments: { text: note } }))}\n`,
    );
    process.stdout.write(`notes.list → ${resultText(await client.callTool({ name: "notes.list" }))}\n`);
  } finally {
    await client.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
