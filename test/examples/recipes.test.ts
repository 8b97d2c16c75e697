/**
 * examples/recipes: MCP servers built with other people's frameworks (Vercel's mcp-handler 2.4,
 * fastmcp 4.20), protected per tool by Gatehouse, run on loopback against the repository's
 * authorization server (in process, memory store, one user). A real MCP client (the official SDK
 * v2 over Gatehouse's authorizing fetch, examples/mcp/client.ts) logs in with `notes:read`, calls
 * a permitted tool, is refused `notes.add` with `403 insufficient_scope` naming what it needs, steps
 * up (a second consent, no second login) and calls it. Each judged message is an audit event.
 *
 * What the frameworks' own auth hooks could not do (measured when issue 24 was filed): answer that
 * 403 for one tool, because they decide before the body says which tool is called.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
} from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { OperationAuditEvent } from "../../src/resource-server/index.js";
import { silentLogger } from "../../src/shared/log.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { ensureBuilt } from "../cli/helpers.js";
import { freePort } from "../support/free-port.js";
import { FormUserAgent } from "./form-user-agent.js";

const PASSWORD = "correct horse battery staple";

interface Recipe {
  name: string;
  /** The MCP protocol revision the framework's SDK speaks (fastmcp is on the v1 SDK). */
  revision: "2025-11-25" | "2026-07-28";
  start(
    resource: string,
    port: number,
    onAuditEvent: (event: OperationAuditEvent) => void,
  ): Promise<{ stop: () => Promise<void>; upstream?: string }>;
}

const RECIPES: Recipe[] = [
  {
    name: "mcp-handler",
    revision: "2026-07-28",
    async start(resource, port, onAuditEvent) {
      const { protectMcpHandler } = await import("../../examples/recipes/mcp-handler.js");
      const handler = protectMcpHandler({ resource, issuer, jwksUri: `${issuer}/jwks.json`, onAuditEvent });
      const running = await listen(handler, { host: "127.0.0.1", port });
      return { stop: () => running.close() };
    },
  },
  {
    name: "fastmcp",
    revision: "2025-11-25",
    async start(resource, port, onAuditEvent) {
      const { startFastmcpBehindGateway } = await import("../../examples/recipes/fastmcp.js");
      const running = await startFastmcpBehindGateway({
        resource,
        issuer,
        jwksUri: `${issuer}/jwks.json`,
        fastmcpPort: await freePort(),
        port,
        onAuditEvent,
      });
      return { stop: () => running.close(), upstream: running.upstream };
    },
  },
];

let issuer: string;
let as: AuthorizationServer;
let asHttp: ListeningServer;
const resources = new Map<string, string>();

beforeAll(async () => {
  ensureBuilt(); // the recipes import `gatehouse-auth/*`, which resolves to dist/
  let asHandler: ((request: Request) => Promise<Response>) | undefined;
  asHttp = await listen((request) => asHandler!(request));
  issuer = asHttp.url;
  for (const recipe of RECIPES) resources.set(recipe.name, `http://127.0.0.1:${await freePort()}/mcp`);
  const store = createMemoryStore();
  as = await createAuthorizationServer({
    issuer,
    allowInsecureLoopback: true,
    store,
    resources: [...resources].map(([name, uri]) => ({ uri, name, scopes: ["notes:read", "notes:write"] })),
    scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Add notes" },
    maintenanceIntervalMs: 0,
    logger: silentLogger,
  });
  asHandler = as.fetch;
  await store.createUser({
    id: "u-alice",
    username: "alice",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
}, 60_000);

afterAll(async () => {
  await as?.close();
  await asHttp?.close();
});

describe.each(RECIPES)("examples/recipes: $name", (recipe) => {
  const audit: OperationAuditEvent[] = [];
  let resource: string;
  let stop: (() => Promise<void>) | undefined;
  let upstream: string | undefined;

  beforeAll(async () => {
    resource = resources.get(recipe.name)!;
    ({ stop, upstream } = await recipe.start(resource, Number(new URL(resource).port), (event) =>
      audit.push(event),
    ));
  }, 60_000);
  afterAll(async () => {
    await stop?.();
  });

  it("answers an anonymous notes.add with 401 naming the tool's scopes and the metadata", async () => {
    const response = await fetch(resource, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "notes.add" } }),
    });
    expect(response.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenge?.params.scope?.split(" ").sort()).toEqual(["notes:read", "notes:write"]);
    const metadata = (await (await fetch(challenge!.params.resource_metadata!)).json()) as Record<
      string,
      unknown
    >;
    expect(metadata.resource).toBe(resource);
    expect(metadata.authorization_servers).toEqual([issuer]);
  });

  // Only the fastmcp recipe has a server behind the gateway that a local process could reach.
  if (recipe.name === "fastmcp") {
    it("fastmcp refuses a request that did not come through the gateway", async () => {
      // Someone on the host talking to fastmcp's loopback port directly: no identity header.
      const response = await fetch(upstream!, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2025-11-25",
            capabilities: {},
            clientInfo: { name: "x", version: "1" },
          },
        }),
      });
      expect(response.status).toBe(401);
    });
  }

  it("a real MCP client logs in with notes:read, is refused notes.add with 403, steps up, and calls it", async () => {
    const { connectNotesClient, resultText } = await import("../../examples/mcp/client.js");
    const agent = new FormUserAgent("alice", PASSWORD);
    const client = await connectNotesClient(new URL(resource), {
      revision: recipe.revision,
      redirectUri: "http://127.0.0.1:9/callback",
      userAgent: async (url) => agent.open(url),
    });
    try {
      const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
      expect(tools).toEqual(["notes.add", "notes.list"]);
      expect(resultText(await client.callTool({ name: "notes.list" }))).toBe("[]");
      expect(resultText(await client.callTool({ name: "notes.add", arguments: { text: "buy milk" } }))).toBe(
        "added note 1",
      );
      expect(resultText(await client.callTool({ name: "notes.list" }))).toBe('["buy milk"]');
    } finally {
      await client.close();
    }
    // First authorization: login and consent for notes:read only; then the step-up for notes.add:
    // the signed-in browser, a consent naming the added scope.
    expect(agent.visits).toHaveLength(2);
    expect(agent.visits[0]).toMatchObject({ login: true, consent: true });
    expect(agent.visits[0]!.consentPage).not.toContain("Add notes");
    expect(agent.visits[1]).toMatchObject({ login: false, consent: true });
    expect(agent.visits[1]!.consentPage).toContain("Add notes");

    // One audit event per judged tools/call: the refusal names what was missing.
    const calls = audit.filter((event) => event.method === "tools/call");
    const denied = calls.filter((event) => event.decision === "insufficient_scope");
    expect(denied.map((event) => [event.target, event.missing_scopes])).toEqual([
      ["notes.add", ["notes:write"]],
    ]);
    expect(denied[0]!.sub).toBe("u-alice");
    expect(calls.filter((event) => event.decision === "allowed").map((event) => event.target)).toEqual([
      "notes.list",
      "notes.add",
      "notes.list",
    ]);
  }, 60_000);
});
