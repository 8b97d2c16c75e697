/**
 * A reader that stops at its own cap cancels the request body while the client is still sending: the
 * authorization server's form reader does at 64 KiB (core/request-body.ts). The listener must
 * then drop the rest of the body quietly; the client gets the reader's 413 and the process keeps
 * serving (before: node's next `data`/`end` event enqueued into or closed the cancelled stream, an
 * uncaught ERR_INVALID_STATE that ends the process).
 */
import { afterEach, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { postChunked } from "../support/chunked-body.js";

let running: ListeningServer | undefined;
let as: AuthorizationServer | undefined;
afterEach(async () => {
  await as?.close();
  as = undefined;
  await running?.close();
  running = undefined;
});

describe("a request body cancelled by its reader", () => {
  it("the authorization server's 64 KiB form cap holds for a chunked body with no Content-Length (413 invalid_request), and the server goes on", async () => {
    let server: AuthorizationServer | undefined;
    running = await listen((request, info) => server!.fetch(request, info));
    server = await createAuthorizationServer({
      issuer: running.url,
      allowInsecureLoopback: true,
      store: createMemoryStore(),
      resources: [{ uri: "https://rs.example.test/mcp", scopes: ["notes:read"] }],
      maintenanceIntervalMs: 0,
    });
    as = server;
    for (let round = 0; round < 3; round++) {
      const r = await postChunked(
        `${running.url}/token`,
        ["grant_type=client_credentials&pad=", "a".repeat(40_000), "a".repeat(40_000)],
        { "content-type": "application/x-www-form-urlencoded" },
      );
      expect(r.status).toBe(413);
      expect(((await r.json()) as Record<string, string>).error).toBe("invalid_request");
    }
    const discovery = await fetch(`${running.url}/.well-known/oauth-authorization-server`);
    expect(discovery.status).toBe(200);
  });

  it("a handler that reads one chunk and cancels: its answer is sent, the rest of the body dropped", async () => {
    running = await listen(async (request) => {
      const reader = request.body!.getReader();
      const first = await reader.read();
      await reader.cancel();
      return new Response(`first ${first.value?.byteLength ?? 0}`);
    });
    for (let round = 0; round < 3; round++) {
      const r = await postChunked(running.url, ["x".repeat(10), "y".repeat(70_000), "z".repeat(70_000)]);
      expect(r.status).toBe(200);
      expect(await r.text()).toMatch(/^first \d+$/);
    }
  });
});
