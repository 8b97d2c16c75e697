/**
 * A handler that fails, in every adapter: it throws synchronously, hands back a `Response` where a
 * promise (or nothing) was expected, returns a rejected promise, or fails after its response has
 * started. Each time that one request gets a 500 (or, once bytes are on the wire, a cut
 * connection), the failure is reported once to the adapter's error hook, and the server goes on
 * serving: a process that dies on one bad request is a denial of service.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { requireBearerAuth } from "../../src/http/express.js";
import { type BearerAuthVariables, bearerAuth, withBearerAuth } from "../../src/http/hono.js";
import { type FetchHandler, type ListeningServer, listen, nodeRequireBearer } from "../../src/http/node.js";
import {
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

const RESOURCE = "https://mcp.example.com";
const SECRET = "internal-detail-4f1c";

let issuer: TestIssuer;
let gate: ResourceServer;
beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    // Cached: a token seen before is judged synchronously, so handlers run on both paths.
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
    ),
  });
});
afterAll(async () => {
  await issuer?.close();
});

const running: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((close) => close()));
});

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function serveNode(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  running.push(() => closeServer(server));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function serveWeb(handler: FetchHandler, onError?: (error: unknown) => void): Promise<string> {
  const server: ListeningServer = await listen(handler, onError ? { onError } : {});
  running.push(() => server.close());
  return server.url;
}

/** A body that sends one chunk, then fails once the head and that chunk are on the wire. */
function failingStream(): ReadableStream<Uint8Array> {
  let sent = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(new TextEncoder().encode("partial "));
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 30));
      controller.error(new Error(SECRET));
    },
  });
}

/**
 * A fresh token (judged asynchronously: the cold path), the same one again until the verification
 * cache holds it (judged synchronously: the warm path), and another fresh one.
 */
async function tokens(): Promise<string[]> {
  const token = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
  return [token, token, token, await issuer.sign({ aud: RESOURCE, sub: "bob", scope: "notes:read" })];
}

/** GET `path` with `token`: the status, or "cut" when the connection ended before a whole response. */
async function outcome(url: string, path: string, token?: string): Promise<number | "cut"> {
  try {
    const res = await fetch(`${url}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    const text = await res.text();
    expect(text).not.toContain(SECRET);
    return res.status;
  } catch {
    return "cut";
  }
}

/** Each path is requested once per token of {@link tokens}. */
const ROUNDS = 4;

/**
 * Every failure, with each of {@link tokens}: the expected answer, and after each one a working
 * request on the same server.
 */
async function expectSurvives(url: string, expected: Record<string, number | "cut">): Promise<void> {
  for (const [path, answer] of Object.entries(expected)) {
    for (const token of await tokens()) {
      expect({ path, got: await outcome(url, path, token) }).toEqual({ path, got: answer });
      expect(await outcome(url, "/ok", token)).toBe(200);
    }
  }
}

describe("toNodeListener (gatehouse/node) with a failing web handler", () => {
  const handler = ((request: Request): Promise<Response> | Response => {
    switch (new URL(request.url).pathname) {
      case "/sync-throw":
        throw new Error(SECRET);
      case "/plain":
        return new Response("a Response, not a promise of one");
      case "/rejected":
        return Promise.reject(new Error(SECRET));
      case "/after-start":
        return Promise.resolve(new Response(failingStream()));
      case "/not-a-response":
        return Promise.resolve(undefined as unknown as Response);
      default:
        return Promise.resolve(new Response("ok"));
    }
  }) as FetchHandler;

  it("one failing request gets a 500 (or a cut connection once started), one report, and the server keeps serving", async () => {
    const errors: unknown[] = [];
    const url = await serveWeb(handler, (error) => errors.push(error));
    await expectSurvives(url, {
      "/sync-throw": 500,
      "/plain": 200,
      "/rejected": 500,
      "/after-start": "cut",
      "/not-a-response": 500,
    });
    await expect.poll(() => errors.length).toBe(4 * ROUNDS);
  });

  it("without onError a failure is still one log line on stderr, naming the error's kind and not its message", async () => {
    const lines: string[] = [];
    const write = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      const url = await serveWeb(handler);
      expect(await outcome(url, "/sync-throw")).toBe(500);
      expect(await outcome(url, "/ok")).toBe(200);
    } finally {
      write.mockRestore();
    }
    const logged = lines.filter((l) => l.includes("handler_error"));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: "error", event: "handler_error", error: "Error" });
    expect(logged[0]).not.toContain(SECRET);
  });
});

/** The Hono app both Hono tests run: the gate as middleware and around single route handlers. */
function honoApp(): Hono<{ Variables: BearerAuthVariables }> {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  const gated = { scopes: ["notes:read"] };
  // Hono's own error hook answers 500 for a handler that throws or rejects.
  app.get(
    "/sync-throw",
    withBearerAuth(gate, gated, () => {
      throw new Error(SECRET);
    }),
  );
  // A synchronous route behind withBearerAuth: with a warm token, app.fetch returns a Response.
  app.get(
    "/plain",
    withBearerAuth(gate, gated, (c) => c.text("plain")),
  );
  app.use("/rejected", bearerAuth(gate, gated));
  app.get("/rejected", () => Promise.reject(new Error(SECRET)));
  app.use("/after-start", bearerAuth(gate, gated));
  app.get("/after-start", () => new Response(failingStream()));
  app.get(
    "/ok",
    withBearerAuth(gate, gated, (c) => c.text("ok")),
  );
  app.onError((_error, c) => c.text("Internal Server Error", 500));
  return app;
}

const HONO_EXPECTED = { "/sync-throw": 500, "/plain": 200, "/rejected": 500, "/after-start": "cut" } as const;

describe("Hono with the gate, served by gatehouse/node's listen (app.fetch may return a Response)", () => {
  it("every failure answers that request only and the server keeps serving", async () => {
    const errors: unknown[] = [];
    const url = await serveWeb(honoApp().fetch as FetchHandler, (error) => errors.push(error));
    // Only the body failing after the start reaches the listener; Hono answers the others itself.
    await expectSurvives(url, HONO_EXPECTED);
    await expect.poll(() => errors.length).toBe(ROUNDS);
  });
});

describe("Hono with the gate, served by @hono/node-server", () => {
  it("every failure answers that request only and the server keeps serving", async () => {
    const app = honoApp();
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
    });
    running.push(() => closeServer(server));
    await expectSurvives(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, HONO_EXPECTED);
  });
});

describe("Express with requireBearerAuth", () => {
  it("every failure answers that request only and the server keeps serving", async () => {
    const app = express();
    const gated = requireBearerAuth(gate, { scopes: ["notes:read"] });
    app.get("/sync-throw", gated, () => {
      throw new Error(SECRET);
    });
    app.get("/rejected", gated, () => Promise.reject(new Error(SECRET)));
    app.get("/after-start", gated, (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("partial ");
      throw new Error(SECRET);
    });
    app.get("/ok", gated, (_req, res) => void res.send("ok"));
    const errors: unknown[] = [];
    app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error);
      if (res.headersSent) res.destroy();
      else res.status(500).send("Internal Server Error");
    });
    const url = await serveNode(createServer(app));
    await expectSurvives(url, { "/sync-throw": 500, "/rejected": 500, "/after-start": "cut" });
    await expect.poll(() => errors.length).toBe(3 * ROUNDS);
  });
});

describe("nodeRequireBearer (gatehouse/node) with a failing node-style handler", () => {
  const handler = (req: IncomingMessage, res: ServerResponse): void | Promise<void> => {
    switch (req.url) {
      case "/sync-throw":
        throw new Error(SECRET);
      case "/plain":
        // A web Response returned by a node-style handler answers nothing: it must not hang.
        return new Response("never sent") as unknown as undefined;
      case "/rejected":
        return Promise.reject(new Error(SECRET));
      case "/after-start":
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("partial ");
        throw new Error(SECRET);
      default:
        res.end("ok");
    }
  };

  it("every failure answers that request only, is reported once, and the server keeps serving", async () => {
    const errors: unknown[] = [];
    const url = await serveNode(
      createServer(
        nodeRequireBearer(gate, { scopes: ["notes:read"], onError: (error) => errors.push(error) }, handler),
      ),
    );
    await expectSurvives(url, { "/sync-throw": 500, "/plain": 500, "/rejected": 500, "/after-start": "cut" });
    await expect.poll(() => errors.length).toBe(4 * ROUNDS);
  });
});
