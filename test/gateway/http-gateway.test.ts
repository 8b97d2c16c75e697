/**
 * The gateway in front of real Streamable HTTP MCP servers: @modelcontextprotocol/server-everything
 * (its own process, sessions, SSE) driven by the official SDK v2 client, and a recording upstream
 * on loopback that shows exactly what the gateway sends: never the client's token, DPoP proof,
 * cookies or forged identity headers; the identity headers the operator named; the body as judged.
 * Hostile: Host rebinding, a session id of another user, mixed batches, oversized bodies.
 */
import type { ChildProcess } from "node:child_process";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationAuditEvent,
  type OperationPolicy,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { freePort, startEverything } from "./everything.js";

const POLICY: OperationPolicy = {
  base: ["mcp:use"],
  default: "deny",
  methods: { "tools/list": {}, "resources/list": {}, "prompts/list": {}, "resources/templates/list": {} },
  tools: { echo: {}, "get-sum": { scopes: ["math"] } },
};

interface Recorded {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A plain upstream that records each request and answers every JSON-RPC request with `{}`. */
async function startRecorder(): Promise<{ url: string; seen: Recorded[]; server: Server }> {
  const seen: Recorded[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      seen.push({ headers: req.headers, body });
      const message = body ? (JSON.parse(body) as { id?: unknown }) : {};
      res.writeHead(200, {
        "content-type": "application/json",
        "set-cookie": "upstream=1",
        "mcp-session-id": "up-session-1",
      });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: message.id ?? null, result: {} }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, server };
}

interface Gateway {
  url: string;
  events: OperationAuditEvent[];
  server: Pick<ListeningServer, "url" | "close">;
}

/** The two ways in: `fetch` behind the web listener, and the gateway's own node listener. */
type Way = "web" | "node";
const WAYS: Way[] = ["web", "node"];

/** A node:http server on loopback whose listener is set once the gateway (needing its URL) exists. */
async function listenNode(
  listener: () => (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Pick<ListeningServer, "url" | "close">> {
  const server = createServer((req, res) => listener()(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function startGateway(
  issuer: TestIssuer,
  upstream: string,
  filterListings = false,
  way: Way = "web",
  extra: { policy?: OperationPolicy; upstreamTimeoutMs?: number } = {},
): Promise<Gateway> {
  const events: OperationAuditEvent[] = [];
  let gateway: ReturnType<typeof createHttpGateway> | undefined;
  let node: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const starting = (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(503);
    res.end();
  };
  const server =
    way === "web"
      ? await listen(
          (request) => gateway?.fetch(request) ?? Promise.resolve(new Response(null, { status: 503 })),
        )
      : await listenNode(() => node ?? starting);
  const resource = `${server.url}/mcp`;
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, {
    policy: extra.policy ?? POLICY,
    filterListings,
    maxBodyBytes: 32 * 1024,
    onAuditEvent: (e) => events.push(e),
  });
  gateway = createHttpGateway({
    upstream,
    resourceServer,
    gate,
    identityHeaders: {
      subject: "X-Gatehouse-User",
      clientId: "X-Gatehouse-Client",
      scopes: "X-Gatehouse-Scopes",
    },
    ...(extra.upstreamTimeoutMs !== undefined && { upstreamTimeoutMs: extra.upstreamTimeoutMs }),
  });
  node = gateway.nodeListener();
  return { url: resource, events, server };
}

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

describe.each(WAYS)(
  "in front of @modelcontextprotocol/server-everything (HTTP), with the SDK v2 client (%s)",
  (way) => {
    let everything: { url: string; child: ChildProcess };
    let gateway: Gateway;
    beforeAll(async () => {
      everything = await startEverything();
      gateway = await startGateway(issuer, everything.url, true, way);
    }, 30_000);
    afterAll(async () => {
      await gateway?.server.close();
      everything?.child.kill("SIGKILL");
    });

    const connect = async (scope: string, sub = "alice") => {
      const token = await issuer.sign({ aud: gateway.url, sub, client_id: "app", scope });
      const transport = new StreamableHTTPClientTransport(new URL(gateway.url), {
        fetch: (url, init) => {
          const headers = new Headers(init?.headers);
          headers.set("authorization", `Bearer ${token}`);
          return fetch(url, { ...init, headers });
        },
      });
      const client = new Client({ name: "gateway-test", version: "1.0.0" });
      await client.connect(transport);
      return { client, transport, token };
    };

    it("lists only the permitted tools, calls echo through the gateway, refuses get-sum with 403", async () => {
      const { client } = await connect("mcp:use");
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["echo"]);
        const echoed = await client.callTool({ name: "echo", arguments: { message: "through the gate" } });
        expect(JSON.stringify(echoed.content)).toContain("through the gate");
        await expect(client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } })).rejects.toThrow(
          /insufficient scope|403/i,
        );
        expect(gateway.events.at(-1)).toMatchObject({
          decision: "insufficient_scope",
          target: "get-sum",
          missing_scopes: ["math"],
        });
      } finally {
        await client.close();
      }
    });

    it("with the second scope, get-sum answers", async () => {
      const { client } = await connect("mcp:use math");
      try {
        const sum = await client.callTool({ name: "get-sum", arguments: { a: 2, b: 3 } });
        expect(JSON.stringify(sum.content)).toContain("5");
      } finally {
        await client.close();
      }
    });

    it("a session id issued to one user is unknown to another (404), and works for its owner", async () => {
      const { client, transport } = await connect("mcp:use");
      try {
        const session = transport.sessionId!;
        expect(session).toMatch(/\.[A-Za-z0-9_-]{22}$/);
        const other = await issuer.sign({
          aud: gateway.url,
          sub: "mallory",
          client_id: "app",
          scope: "mcp:use",
        });
        const owner = await issuer.sign({
          aud: gateway.url,
          sub: "alice",
          client_id: "app",
          scope: "mcp:use",
        });
        const ask = (token: string, id: string) =>
          fetch(gateway.url, {
            method: "POST",
            headers: {
              authorization: `Bearer ${token}`,
              "content-type": "application/json",
              accept: "application/json, text/event-stream",
              "mcp-session-id": id,
              "mcp-protocol-version": "2025-11-25",
            },
            body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
          });
        expect((await ask(other, session)).status).toBe(404);
        // The bare upstream id (without the gateway's binding) is unknown too.
        expect((await ask(owner, session.slice(0, session.lastIndexOf(".")))).status).toBe(404);
        const mine = await ask(owner, session);
        expect(mine.status).toBe(200);
        await mine.body?.cancel();
      } finally {
        await client.close();
      }
    });

    it("GET opens the session's SSE stream through the gateway (streamed, not buffered)", async () => {
      const token = await issuer.sign({ aud: gateway.url, sub: "alice", client_id: "app", scope: "mcp:use" });
      const headers = {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
      };
      const initialize = await fetch(gateway.url, {
        method: "POST",
        headers,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2025-11-25",
            capabilities: {},
            clientInfo: { name: "raw", version: "1" },
          },
        }),
      });
      expect(initialize.status).toBe(200);
      const session = initialize.headers.get("mcp-session-id")!;
      await initialize.body?.cancel();
      const initialized = await fetch(gateway.url, {
        method: "POST",
        headers: { ...headers, "mcp-session-id": session },
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
      });
      expect(initialized.status).toBe(202);
      const controller = new AbortController();
      const stream = await fetch(gateway.url, {
        headers: { ...headers, accept: "text/event-stream", "mcp-session-id": session },
        signal: controller.signal,
      });
      // The headers arrive while the upstream keeps the stream open: relayed, not buffered.
      expect(stream.status).toBe(200);
      expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);
      controller.abort();
      const end = await fetch(gateway.url, {
        method: "DELETE",
        headers: { ...headers, "mcp-session-id": session },
      });
      expect(end.status).toBe(200);
    });
  },
);

describe.each(WAYS)("what reaches the upstream (a recording server) (%s)", (way) => {
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let gateway: Gateway;
  beforeAll(async () => {
    recorder = await startRecorder();
    gateway = await startGateway(issuer, recorder.url, false, way);
  });
  afterAll(async () => {
    await gateway?.server.close();
    await new Promise<void>((resolve) => recorder?.server.close(() => resolve()));
  });

  const send = (token: string | undefined, body: unknown, extra: Record<string, string> = {}) =>
    fetch(gateway.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...extra,
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });

  it("never the token, DPoP, cookies or forged identity headers; the operator's identity headers instead", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", client_id: "app-7", scope: "mcp:use" });
    const response = await send(
      token,
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { message: "m" } } },
      {
        dpop: "proof-that-must-not-travel",
        cookie: "session=secret",
        "x-gatehouse-user": "admin",
        "x-forwarded-for": "10.0.0.1",
      },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("set-cookie")).toBeNull();
    const seen = recorder.seen.at(-1)!;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers.dpop).toBeUndefined();
    expect(seen.headers.cookie).toBeUndefined();
    expect(seen.headers["x-forwarded-for"]).toBeUndefined();
    expect(seen.headers["x-gatehouse-user"]).toBe("alice");
    expect(seen.headers["x-gatehouse-client"]).toBe("app-7");
    expect(seen.headers["x-gatehouse-scopes"]).toBe("mcp:use");
    expect(JSON.stringify(seen)).not.toContain(token.split(".")[2]!);
  });

  it("the body the upstream reads is the one judged: duplicate keys cannot smuggle another tool", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    // JSON.parse keeps the last "name"; a parser keeping the first would see get-sum.
    const text = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-sum","name":"echo"}}';
    expect((await send(token, text)).status).toBe(200);
    expect(JSON.parse(recorder.seen.at(-1)!.body)).toEqual({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "echo" },
    });
    expect(recorder.seen.at(-1)!.body).not.toContain("get-sum");
  });

  it("Mcp-Method and Mcp-Name go upstream as the gate judged the body, never as the client wrote them", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    const response = await send(
      token,
      { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "echo" } },
      { "mcp-method": "tools/call", "mcp-name": "get-sum" },
    );
    expect(response.status).toBe(200);
    const seen = recorder.seen.at(-1)!;
    expect(seen.headers["mcp-method"]).toBe("tools/call");
    expect(seen.headers["mcp-name"]).toBe("echo");
  });

  it("a batch mixing a permitted and a forbidden call never reaches the upstream", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    const before = recorder.seen.length;
    const response = await send(token, [
      { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo" } },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "get-sum" } },
    ]);
    expect(response.status).toBe(403);
    expect(response.headers.get("www-authenticate")).toContain('scope="mcp:use math"');
    expect(recorder.seen.length).toBe(before);
  });

  it("an oversized body is 413 and never reaches the upstream; no token is 401", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    const before = recorder.seen.length;
    const big = {
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: { name: "echo", arguments: { message: "x".repeat(40_000) } },
    };
    expect((await send(token, big)).status).toBe(413);
    expect((await send(undefined, { jsonrpc: "2.0", id: 4, method: "tools/list" })).status).toBe(401);
    expect(recorder.seen.length).toBe(before);
  });

  it("Host rebinding: a request naming another host is refused before any token work", async () => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    const before = recorder.seen.length;
    const port = new URL(gateway.url).port;
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/mcp",
          method: "POST",
          headers: {
            host: `rebound.example:${port}`,
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.once("error", reject);
      req.end(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/list" }));
    });
    expect(status).toBe(403);
    expect(recorder.seen.length).toBe(before);
  });

  it("/health answers without a token; an unreachable upstream is a 502 JSON-RPC error", async () => {
    const health = await fetch(`${new URL(gateway.url).origin}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok" });
    const dead = await startGateway(issuer, `http://127.0.0.1:${await freePort()}/mcp`, false, way);
    try {
      const token = await issuer.sign({ aud: dead.url, sub: "alice", scope: "mcp:use" });
      const response = await fetch(dead.url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 6, method: "tools/list" }),
      });
      expect(response.status).toBe(502);
      expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 6, error: { code: -32603 } });
    } finally {
      await dead.server.close();
    }
  });
});

describe.each(WAYS)("the relay's bounds and streams (%s)", (way) => {
  /** What the upstream does with the next request; it sees its request's close (client or gateway). */
  let behave: (req: IncomingMessage, res: ServerResponse) => void;
  let closed: Promise<void>;
  let upstream: Server;
  let gateway: Gateway;
  beforeAll(async () => {
    upstream = createServer((req, res) => {
      closed = new Promise((resolve) => res.once("close", () => resolve()));
      req.resume();
      req.once("end", () => behave(req, res));
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
    gateway = await startGateway(issuer, url, false, way, {
      policy: { ...POLICY, default: {} },
      upstreamTimeoutMs: 1500,
    });
  });
  afterAll(async () => {
    await gateway?.server.close();
    upstream?.closeAllConnections();
    await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  });

  const call = async (body: unknown, init: RequestInit = {}, extra: Record<string, string> = {}) => {
    const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
    return fetch(gateway.url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...extra,
      },
      body: JSON.stringify(body),
      ...init,
    });
  };
  const echo = { jsonrpc: "2.0", id: 11, method: "tools/call", params: { name: "echo" } };

  it("an upstream that never answers is a 502 JSON-RPC error after upstreamTimeoutMs, its request cut", async () => {
    behave = () => {};
    const started = Date.now();
    const response = await call(echo);
    expect(response.status).toBe(502);
    expect(await response.json()).toMatchObject({ jsonrpc: "2.0", id: 11, error: { code: -32603 } });
    // Past the first second (when the client starts being watched) and on to the 1.5 s bound.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    await closed;
  });

  it("a client that leaves while the upstream works has the upstream's request cut", async () => {
    behave = () => {};
    const controller = new AbortController();
    const pending = call(echo, { signal: controller.signal }).catch((error: unknown) => error);
    // After the first second: the gateway watches for the client from then on.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const cut = Date.now();
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    await closed;
    expect(Date.now() - cut).toBeLessThan(1000);
  });

  it("a JSON answer: framed anew, the session bound, the upstream's CORS exposure and cookies not relayed", async () => {
    behave = (_req, res) => {
      const body = JSON.stringify({ jsonrpc: "2.0", id: 11, result: { content: [] } });
      res.writeHead(200, {
        "content-type": "application/json",
        "access-control-expose-headers": "X-Secret",
        "set-cookie": "a=1",
        "mcp-session-id": "s-1",
        "x-upstream": "kept",
      });
      res.end(body);
    };
    const response = await call(echo);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(JSON.parse(text)).toEqual({ jsonrpc: "2.0", id: 11, result: { content: [] } });
    expect(response.headers.get("content-length")).toBe(String(Buffer.byteLength(text)));
    expect(response.headers.get("access-control-expose-headers")).toBe("Mcp-Session-Id, WWW-Authenticate");
    expect(response.headers.get("set-cookie")).toBeNull();
    expect(response.headers.get("x-upstream")).toBe("kept");
    expect(response.headers.get("mcp-session-id")).toMatch(/^s-1\.[A-Za-z0-9_-]{22}$/);
  });

  it("an SSE answer streams as it comes, and the client leaving closes the upstream's stream", async () => {
    behave = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n');
    };
    const controller = new AbortController();
    const response = await call(echo, { signal: controller.signal });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain("notifications/progress");
    controller.abort();
    await closed;
  });

  it("an Mcp-Method a header cannot carry is left out, not a 500 (odd Unicode in the method)", async () => {
    let seen: IncomingHttpHeaders = {};
    behave = (req, res) => {
      seen = req.headers;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: 12, result: {} }));
    };
    const response = await call({ jsonrpc: "2.0", id: 12, method: "x/\u2603" }, {}, { "mcp-method": "x" });
    expect(response.status).toBe(200);
    expect(seen["mcp-method"]).toBeUndefined();
  });
});

describe.each(WAYS)("the upstream's idle connections (%s)", (way) => {
  it("are closed by the gateway before the upstream's keep-alive timeout, so none is reused as it closes", async () => {
    const ended: boolean[] = [];
    const upstream = createServer((req, res) => {
      req.resume();
      req.once("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: {} }));
      });
    });
    // Node's server announces "Keep-Alive: timeout=4" and closes an idle connection after 4 s.
    upstream.keepAliveTimeout = 4000;
    const closed = new Promise<void>((resolve) =>
      upstream.on("connection", (socket) => {
        let peerEnded = false;
        socket.once("end", () => {
          peerEnded = true;
        });
        socket.once("close", () => {
          ended.push(peerEnded);
          resolve();
        });
      }),
    );
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
    const gateway = await startGateway(issuer, url, false, way);
    try {
      const token = await issuer.sign({ aud: gateway.url, sub: "alice", scope: "mcp:use" });
      const response = await fetch(gateway.url, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo" } }),
      });
      expect(response.status).toBe(200);
      await response.text();
      await closed;
      // The gateway's end came first (a FIN the upstream read), not the upstream's own timeout.
      expect(ended).toEqual([true]);
    } finally {
      await gateway.server.close();
      upstream.closeAllConnections();
      await new Promise<void>((resolve) => upstream.close(() => resolve()));
    }
  });
});

it("an identity header may not be named Host or Content-Length (the relay sets them)", async () => {
  const resourceServer = createResourceServer({
    resource: "http://127.0.0.1:1/mcp",
    authorizationServers: ["https://issuer.example"],
    verifier: jwtVerifier({
      issuer: "https://issuer.example",
      audience: "http://127.0.0.1:1/mcp",
      jwks: { keys: [] },
    }),
  });
  const gate = createOperationGate(resourceServer, { policy: POLICY });
  for (const name of ["Host", "content-length"]) {
    expect(() =>
      createHttpGateway({
        upstream: "http://127.0.0.1:1/mcp",
        resourceServer,
        gate,
        identityHeaders: { subject: name },
      }),
    ).toThrow(/would replace a header of the MCP transport/);
  }
});
