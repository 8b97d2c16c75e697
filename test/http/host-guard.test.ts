/**
 * DNS-rebinding defence through every adapter: a gate protecting a loopback resource refuses a
 * request whose Host (or Origin) is not the resource's, even with a valid token, before any token
 * work; the resource's own host and its loopback aliases pass. Real servers on loopback, Host
 * headers set on the wire.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireBearerAuth } from "../../src/http/express.js";
import { type BearerAuthVariables, bearerAuth, withBearerAuth } from "../../src/http/hono.js";
import { nodeRequireBearer, toNodeListener } from "../../src/http/node.js";
import {
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.close();
});

interface Answer {
  status: number;
  body: string;
  challenge: string | undefined;
}

/** One request with the given headers, Host included, exactly as written on the wire. */
function ask(port: number, headers: Record<string, string>, path = "/notes"): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers, setHost: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
      });
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body, challenge: res.headers["www-authenticate"] }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

interface Running {
  port: number;
  /** How many times the protected handler ran. */
  readonly ran: number;
  /** How many times the verifier was asked to verify a token (cache misses). */
  readonly verifications: number;
  token: string;
  close(): Promise<void>;
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Starts a node:http server on 127.0.0.1, then builds the gate for `http://127.0.0.1:<port>` (the
 * resource URI needs the port) and the adapter's listener from it.
 */
async function startLoopback(
  build: (gate: ResourceServer, handlerRan: () => void) => Listener | Promise<Listener>,
): Promise<Running> {
  let listener: Listener = (_req, res) => res.end();
  const server = createServer((req, res) => listener(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  const resource = `http://127.0.0.1:${port}`;
  let verifications = 0;
  const jwt = jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri });
  const gate = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier({
      verify: (token) => {
        verifications++;
        return jwt.verify(token);
      },
    }),
  });
  let ran = 0;
  listener = await build(gate, () => {
    ran++;
  });
  const token = await issuer.sign({ aud: resource, sub: "alice", scope: "notes:read" });
  return {
    port,
    token,
    get ran() {
      return ran;
    },
    get verifications() {
      return verifications;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const adapters: Array<[string, (gate: ResourceServer, ran: () => void) => Listener | Promise<Listener>]> = [
  [
    "node:http fast path (nodeRequireBearer)",
    (gate, ran) =>
      nodeRequireBearer(gate, { scopes: ["notes:read"] }, (_req, res) => {
        ran();
        res.end("resource data");
      }),
  ],
  [
    "node listener (toNodeListener + requireBearer)",
    (gate, ran) => {
      const protect = gate.requireBearer({ scopes: ["notes:read"] });
      return toNodeListener((request) =>
        protect(request, async () => {
          ran();
          return new Response("resource data");
        }),
      );
    },
  ],
  [
    "express (requireBearerAuth)",
    (gate, ran) => {
      const app = express();
      app.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (_req, res) => {
        ran();
        res.send("resource data");
      });
      return app;
    },
  ],
  [
    "hono (bearerAuth)",
    (gate, ran) => {
      const app = new Hono<{ Variables: BearerAuthVariables }>();
      app.use("/notes", bearerAuth(gate, { scopes: ["notes:read"] }));
      app.get("/notes", (c) => {
        ran();
        return c.text("resource data");
      });
      // @hono/node-server's own node:http listener (it builds the URL from Host).
      return getRequestListener(app.fetch) as Listener;
    },
  ],
  [
    "hono (withBearerAuth around the route handler)",
    (gate, ran) => {
      const app = new Hono<{ Variables: BearerAuthVariables }>();
      app.get(
        "/notes",
        withBearerAuth(gate, { scopes: ["notes:read"] }, (c) => {
          ran();
          return c.text("resource data");
        }),
      );
      return getRequestListener(app.fetch) as Listener;
    },
  ],
];

describe.each(adapters)("%s protecting a loopback resource", (_name, build) => {
  let running: Running;
  beforeAll(async () => {
    running = await startLoopback(build);
  });
  afterAll(async () => {
    await running.close();
  });
  const bearer = () => ({ authorization: `Bearer ${running.token}` });

  it("rule: Host evil.example with a valid token → 403, handler not run, no token work", async () => {
    const before = running.verifications;
    for (const host of ["evil.example", `evil.example:${running.port}`, `localhost:${running.port + 1}`]) {
      const res = await ask(running.port, { host, ...bearer() });
      expect(res.status, host).toBe(403);
      expect(res.body).not.toContain("resource data");
      expect(res.body).not.toContain(running.token);
      expect(res.body).not.toContain("127.0.0.1");
      expect(res.challenge).toBeUndefined();
    }
    expect(running.verifications).toBe(before);
    expect(running.ran).toBe(0);
  });

  it("rule: a rebinding request without a token gets 403, not a challenge naming the metadata", async () => {
    const res = await ask(running.port, { host: `evil.example:${running.port}` });
    expect(res.status).toBe(403);
    expect(res.challenge).toBeUndefined();
  });

  it("rule: a cross-origin Origin is refused even with the resource's own Host", async () => {
    const res = await ask(running.port, {
      host: `127.0.0.1:${running.port}`,
      origin: "http://evil.example",
      ...bearer(),
    });
    expect(res.status).toBe(403);
    expect(res.body).not.toContain("resource data");
  });

  it("rule: every request's Host is checked, whatever the Host of the request before it", async () => {
    const before = running.ran;
    const own = `127.0.0.1:${running.port}`;
    const sequence: Array<[string, number]> = [
      [own, 200],
      [`evil.example:${running.port}`, 403],
      [own, 200],
      [own, 200],
      [`127.0.0.1:${running.port + 1}`, 403],
      [`LOCALHOST:${running.port}`, 200],
      ["127.0.0.1", 403],
      [own, 200],
    ];
    for (const [host, status] of sequence) {
      expect((await ask(running.port, { host, ...bearer() })).status, host).toBe(status);
    }
    expect(running.ran).toBe(before + sequence.filter(([, status]) => status === 200).length);
  });

  it("rule: Origin is found whatever the case of its field name, and two Origin fields are refused", async () => {
    const own = `127.0.0.1:${running.port}`;
    const url = `http://${own}`;
    const request = (fields: string) =>
      rawRequest(url, `GET /notes HTTP/1.1\r\nHost: ${own}\r\n${fields}Connection: close\r\n\r\n`);
    const token = `Authorization: Bearer ${running.token}\r\n`;
    const before = running.ran;
    for (const name of ["ORIGIN", "oRiGiN", "Origin"]) {
      const out = await request(`${name}: http://evil.example\r\n${token}`);
      expect(out.startsWith("HTTP/1.1 403"), name).toBe(true);
    }
    const twice = await request(`Origin: http://${own}\r\norigin: http://evil.example\r\n${token}`);
    expect(twice.startsWith("HTTP/1.1 403")).toBe(true);
    expect(running.ran).toBe(before);
    const sameOrigin = await request(`ORIGIN: http://${own}\r\nAUTHORIZATION: Bearer ${running.token}\r\n`);
    expect(sameOrigin.startsWith("HTTP/1.1 200")).toBe(true);
    expect(running.ran).toBe(before + 1);
  });

  it("the resource's own host and its loopback aliases on the same port are allowed", async () => {
    const before = running.ran;
    for (const host of [`127.0.0.1:${running.port}`, `localhost:${running.port}`, `[::1]:${running.port}`]) {
      const res = await ask(running.port, { host, ...bearer() });
      expect(res.status, host).toBe(200);
      expect(res.body).toBe("resource data");
    }
    const sameOrigin = await ask(running.port, {
      host: `localhost:${running.port}`,
      origin: `http://localhost:${running.port}`,
      ...bearer(),
    });
    expect(sameOrigin.status).toBe(200);
    expect(running.ran).toBe(before + 4);
  });
});

describe("behind a trusted proxy the forwarded host is what is checked", () => {
  let running: Running;
  beforeAll(async () => {
    running = await startLoopback((gate, ran) =>
      nodeRequireBearer(gate, { scopes: ["notes:read"], trustProxy: true }, (_req, res) => {
        ran();
        res.end("resource data");
      }),
    );
  });
  afterAll(async () => {
    await running.close();
  });

  it("rule: X-Forwarded-Host evil.example → 403; the resource's own forwarded host → 200", async () => {
    const bearer = { authorization: `Bearer ${running.token}` };
    const own = `127.0.0.1:${running.port}`;
    expect(
      (await ask(running.port, { host: own, "x-forwarded-host": "evil.example", ...bearer })).status,
    ).toBe(403);
    expect(
      (await ask(running.port, { host: "internal:8080", "x-forwarded-host": own, ...bearer })).status,
    ).toBe(200);
  });
});

describe("a non-loopback resource is unaffected by default", () => {
  it("any Host reaches the handler with a valid token", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const port = (server.address() as AddressInfo).port;
    const resource = "https://mcp.example.com";
    const gate = createResourceServer({
      resource,
      authorizationServers: [issuer.issuer],
      verifier: jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    });
    server.on(
      "request",
      nodeRequireBearer(gate, { scopes: ["notes:read"] }, (_req, res) => {
        res.end("resource data");
      }),
    );
    try {
      const token = await issuer.sign({ aud: resource, scope: "notes:read" });
      const res = await ask(port, { host: "evil.example", authorization: `Bearer ${token}` });
      expect(res.status).toBe(200);
    } finally {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
  });
});
