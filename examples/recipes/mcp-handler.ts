/**
 * Recipe: an MCP server built with Vercel's `mcp-handler` (2.4, a web-standard
 * `(request) => Response` handler on the official SDK v2), protected per tool by Gatehouse's
 * operation gate. Everything Gatehouse adds is in {@link protectMcpHandler}: the resource server
 * (metadata, token checks), the policy, and one `gate.handle` around the handler.
 *
 * `mcp-handler`'s own `withMcpAuth` checks a token and a fixed scope list before the handler runs;
 * it cannot answer `403 insufficient_scope` for one tool, because which tool is called is in the
 * body. The gate reads the body once (bounded), judges every JSON-RPC message against the policy,
 * and answers the challenge naming every scope the call needs (2026-07-28 "Insufficient scope"),
 * which a client acts on by stepping up. The verdict reaches the tools as the SDK's `authInfo`
 * (`ctx.http.authInfo`), without the token itself: tools never hold the client's token (spec:
 * no token passthrough).
 */

import {
  type AuthInfo,
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationPolicy,
} from "gatehouse-auth/resource-server";
import { createMcpHandler } from "mcp-handler";
import * as z from "zod";

/** The three-line policy: every call needs `notes:read`; `notes.add` also needs `notes:write`. */
export const POLICY: OperationPolicy = {
  base: ["notes:read"],
  default: {},
  tools: { "notes.add": { scopes: ["notes:write"] } },
};

export interface RecipeOptions {
  /** The canonical URI of the MCP endpoint, e.g. `https://mcp.example.com/mcp`. */
  resource: string;
  /** The authorization server's issuer identifier, and where it publishes its keys. */
  issuer: string;
  jwksUri: string;
  /** One `mcp_operation` audit event per judged message (who, which tool, allowed or not). */
  onAuditEvent?: Parameters<typeof createOperationGate>[1]["onAuditEvent"];
}

/** The MCP server itself, as `mcp-handler`'s documentation writes one. */
function notesHandler(): (request: Request) => Promise<Response> {
  const notesBySubject = new Map<string, string[]>();
  const owner = (authInfo: { extra?: Record<string, unknown> } | undefined) =>
    String(authInfo?.extra?.subject);
  return createMcpHandler(
    (server) => {
      server.registerTool("notes.list", { description: "List your notes" }, async (ctx) => ({
        content: [
          { type: "text", text: JSON.stringify(notesBySubject.get(owner(ctx.http?.authInfo)) ?? []) },
        ],
      }));
      server.registerTool(
        "notes.add",
        { description: "Add a note", inputSchema: z.object({ text: z.string().min(1).max(2000) }) },
        async ({ text }, ctx) => {
          const notes = notesBySubject.get(owner(ctx.http?.authInfo)) ?? [];
          notes.push(text);
          notesBySubject.set(owner(ctx.http?.authInfo), notes);
          return { content: [{ type: "text", text: `added note ${notes.length}` }] };
        },
      );
    },
    { serverInfo: { name: "notes-on-mcp-handler", version: "1.0.0" } },
  );
}

/** What Gatehouse adds: the web handler to serve (`listen` from `gatehouse-auth/node`, Next.js, Hono...). */
export function protectMcpHandler(options: RecipeOptions): (request: Request) => Promise<Response> {
  const resourceServer = createResourceServer({
    resource: options.resource,
    authorizationServers: [options.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: options.issuer, audience: options.resource, jwksUri: options.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, { policy: POLICY, onAuditEvent: options.onAuditEvent });
  const mcp = notesHandler();
  return (request) => {
    // RFC 9728 §3: the metadata document is public.
    if (resourceServer.handles(request)) return Promise.resolve(resourceServer.metadataResponse(request));
    return gate.handle(request, (forwarded, { auth }) =>
      mcp(Object.assign(forwarded, { auth: sdkAuthInfo(auth) })),
    );
  };
}

/**
 * `mcp-handler` hands `request.auth` to the SDK as `authInfo`. The SDK's type has a `token`
 * field; it stays empty on purpose, as Gatehouse never gives handlers the client's token.
 */
function sdkAuthInfo(auth: AuthInfo) {
  return {
    token: "",
    clientId: auth.clientId ?? "",
    scopes: [...auth.scopes],
    expiresAt: auth.expiresAt,
    extra: { subject: auth.subject },
  };
}
