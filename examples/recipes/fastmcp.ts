/**
 * Recipe: an MCP server built with `fastmcp` (4.20) behind Gatehouse's gateway, with a scope per
 * tool. fastmcp serves Streamable HTTP from its own node:http server (through mcp-proxy), so
 * nothing can sit between its socket and its dispatcher; its `authenticate` hook sees the request
 * before the body is read and cannot tell which tool is called. So the recipe runs fastmcp on
 * loopback and `createGateway` (`gatehouse-auth/gateway`, what `gatehouse gateway` runs) in front
 * of it, in the same process: the gateway serves the metadata and the challenges, judges every
 * JSON-RPC message against the policy (a `403 insufficient_scope` naming every scope the tool
 * needs), never passes the client's token on, and tells fastmcp who is calling in a header only
 * the gateway can set (it drops a client's own copy). fastmcp's `authenticate` reads that header
 * and refuses a request without it (someone on the host talking to the loopback port directly).
 *
 * Sessions: the gateway binds fastmcp's `Mcp-Session-Id` to the caller, so another user presenting
 * it gets 404; fastmcp keeps the identity it read at `initialize` for the session's life.
 */
import type { IncomingMessage, Server } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { FastMCP } from "fastmcp";
import { createGateway, type Gateway } from "gatehouse-auth/gateway";
import type { OperationPolicy } from "gatehouse-auth/resource-server";
import * as z from "zod";

/** The three-line policy: every call needs `notes:read`; `notes.add` also needs `notes:write`. */
export const POLICY: OperationPolicy = {
  base: ["notes:read"],
  default: {},
  tools: { "notes.add": { scopes: ["notes:write"] } },
};

/** The header the gateway writes with the token's `sub` (and removes from what clients send). */
const USER_HEADER = "x-gatehouse-user";

export interface RecipeOptions {
  /** The public URI of the MCP endpoint (the gateway's), e.g. `https://mcp.example.com/mcp`. */
  resource: string;
  issuer: string;
  jwksUri: string;
  /** The loopback port fastmcp listens on (not reachable from outside the host). */
  fastmcpPort: number;
  /** Where the gateway listens (default 127.0.0.1, a free port). */
  host?: string;
  port?: number;
  onAuditEvent?: Parameters<typeof createGateway>[0]["onAuditEvent"];
}

export interface RunningRecipe {
  /** The gateway's base URL (`http://host:port`); the endpoint is the resource's path on it. */
  url: string;
  /** fastmcp's own loopback endpoint (what the gateway relays to). */
  upstream: string;
  close(): Promise<void>;
}

/** The MCP server itself, as fastmcp's documentation writes one, plus `authenticate`. */
function notesServer(): FastMCP<{ subject: string }> {
  const notesBySubject = new Map<string, string[]>();
  const server = new FastMCP<{ subject: string }>({
    name: "notes-on-fastmcp",
    version: "1.0.0",
    // Only the gateway sets the header (it removes one a client sends); no header, no session.
    authenticate: async (request: IncomingMessage) => {
      const subject = request.headers[USER_HEADER];
      return typeof subject === "string" && subject !== "" ? { subject } : undefined;
    },
  });
  server.addTool({
    name: "notes.list",
    description: "List your notes",
    execute: async (_args, { session }) => JSON.stringify(notesBySubject.get(session!.subject) ?? []),
  });
  server.addTool({
    name: "notes.add",
    description: "Add a note",
    parameters: z.object({ text: z.string().min(1).max(2000) }),
    execute: async ({ text }, { session }) => {
      const notes = notesBySubject.get(session!.subject) ?? [];
      notes.push(text);
      notesBySubject.set(session!.subject, notes);
      return `added note ${notes.length}`;
    },
  });
  return server;
}

/** Starts fastmcp on loopback and the gateway in front of it. */
export async function startFastmcpBehindGateway(options: RecipeOptions): Promise<RunningRecipe> {
  const fastmcp = notesServer();
  await fastmcp.start({
    transportType: "httpStream",
    httpStream: { host: "127.0.0.1", port: options.fastmcpPort, endpoint: "/mcp" },
  });
  let gateway: Gateway | undefined;
  let http: Server | undefined;
  try {
    gateway = await createGateway({
      upstream: `http://127.0.0.1:${options.fastmcpPort}/mcp`,
      resource: options.resource,
      authorizationServer: options.issuer,
      jwksUri: options.jwksUri,
      policy: POLICY,
      identityHeaders: { subject: USER_HEADER },
      onAuditEvent: options.onAuditEvent,
    });
    http = createServer(gateway.listener);
    await new Promise<void>((resolve, reject) => {
      http!.once("error", reject).listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
    });
  } catch (error) {
    await gateway?.close();
    await fastmcp.stop();
    throw error;
  }
  const { address, port } = http.address() as AddressInfo;
  const running = { gateway, http };
  return {
    url: `http://${address}:${port}`,
    upstream: `http://127.0.0.1:${options.fastmcpPort}/mcp`,
    async close() {
      await running.gateway.close();
      running.http.closeAllConnections();
      await new Promise((resolve) => running.http.close(resolve));
      await fastmcp.stop();
    },
  };
}
