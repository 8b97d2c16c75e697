/**
 * An MCP client whose transport's `fetch` is Gatehouse's `createAuthFetch`: the first request's
 * 401 starts discovery, registration and the authorization code flow with PKCE; a later
 * `403 insufficient_scope` (calling `notes.add` with a read-only token) starts a step-up for the
 * challenged scopes, and the request is retried with the new token. The MCP SDK never sees a 401.
 *
 * Run it against examples/mcp/server.ts (Node 22.6 or newer; `npm run build` first):
 *
 *   node --experimental-strip-types examples/mcp/client.ts http://127.0.0.1:3000/mcp "buy milk"
 *
 * It opens your browser to log in (or prints the URL), listening on a one-shot loopback redirect.
 */
import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { browserSession, type CreateAuthFetchOptions, createAuthFetch } from "gatehouse/client";

/**
 * Connects an MCP client to `serverUrl`. `auth` says how to authorize: at least a user agent
 * (`authorizationSession`, or `userAgent` + `redirectUri`); everything else has defaults
 * (dynamic registration, tokens in memory, revision 2026-07-28).
 */
export async function connectNotesClient(serverUrl: URL, auth: CreateAuthFetchOptions): Promise<Client> {
  const authFetch = createAuthFetch({ clientName: "Gatehouse MCP example", ...auth });
  const transport = new StreamableHTTPClientTransport(serverUrl, { fetch: authFetch });
  const client = new Client({ name: "gatehouse-notes-example-client", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/** The text of a tool result's first content item (the example's tools answer with text). */
export function resultText(result: Awaited<ReturnType<Client["callTool"]>>): string {
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const first = content[0] as { type?: unknown; text?: unknown } | undefined;
  return first?.type === "text" && typeof first.text === "string" ? first.text : "";
}

async function main(): Promise<void> {
  const [serverUrl = "http://127.0.0.1:3000/mcp", note = "hello from the MCP example"] =
    process.argv.slice(2);
  const client = await connectNotesClient(new URL(serverUrl), {
    authorizationSession: browserSession(),
    onEvent: (event) => process.stderr.write(`[auth] ${event.type}\n`),
  });
  try {
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
