import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireBearerAuth } from "../../src/http/express.js";
import { type BearerAuthVariables, bearerAuth, withBearerAuth } from "../../src/http/hono.js";
import { nodeRequireBearer } from "../../src/http/node.js";
import { createResourceServer, jwtVerifier, type ResourceServer } from "../../src/resource-server/index.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

const RESOURCE = "https://mcp.example.com";

let issuer: TestIssuer;
let gate: ResourceServer;
beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
  });
});
afterAll(async () => {
  await issuer.close();
});

function listenOn(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** The same protocol checks for every adapter. */
function adapterContract(name: string, start: () => Promise<{ url: string; close(): Promise<void> }>) {
  describe(name, () => {
    let url: string;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ url, close } = await start());
    });
    afterAll(async () => {
      await close();
    });

    it("rule: no token → 401 challenge without error, handler not run", async () => {
      const res = await fetch(`${url}/notes`);
      expect(res.status).toBe(401);
      const [c] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
      expect(c?.params.error).toBeUndefined();
      expect(c?.params.resource_metadata).toBe(`${RESOURCE}/.well-known/oauth-protected-resource`);
      expect(await res.text()).not.toContain("handler ran");
    });

    it("a valid token reaches the handler with auth set", async () => {
      const token = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
      const res = await fetch(`${url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ ran: "handler ran", subject: "alice" });
    });

    it("rule: too few scopes → 403 insufficient_scope", async () => {
      const token = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "other" });
      const res = await fetch(`${url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(403);
      expect(parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "")[0]?.params.scope).toBe(
        "notes:read",
      );
    });

    it("rule: wrong audience → 401 invalid_token", async () => {
      const token = await issuer.sign({ aud: `${RESOURCE}.evil`, scope: "notes:read" });
      const res = await fetch(`${url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      expect(parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "")[0]?.params.error).toBe(
        "invalid_token",
      );
    });

    it("rule: token in the query → 400", async () => {
      const token = await issuer.sign({ aud: RESOURCE, scope: "notes:read" });
      const res = await fetch(`${url}/notes?access_token=${token}`);
      expect(res.status).toBe(400);
    });
  });
}

adapterContract("node:http (nodeRequireBearer)", async () => {
  const server = createServer(
    nodeRequireBearer(gate, { scopes: ["notes:read"] }, (_req, res, auth) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ ran: "handler ran", subject: auth.subject }));
    }),
  );
  const url = await listenOn(server);
  return { url, close: () => closeServer(server) };
});

adapterContract("express (requireBearerAuth)", async () => {
  const app = express();
  app.use(express.urlencoded({ extended: false }));
  app.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
    res.json({ ran: "handler ran", subject: req.auth?.subject });
  });
  app.post("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
    res.json({ ran: "handler ran", body: req.body });
  });
  const server = createServer(app);
  const url = await listenOn(server);
  return { url, close: () => closeServer(server) };
});

adapterContract("hono (bearerAuth)", async () => {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  app.use("/notes", bearerAuth(gate, { scopes: ["notes:read"] }));
  app.get("/notes", (c) => c.json({ ran: "handler ran", subject: c.get("auth").subject }));
  app.post("/notes", async (c) => c.json({ ran: "handler ran", body: await c.req.text() }));
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => closeServer(server) };
});

adapterContract("hono (withBearerAuth around the route handler)", async () => {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  app.get(
    "/notes",
    withBearerAuth(gate, { scopes: ["notes:read"] }, (c) =>
      c.json({ ran: "handler ran", subject: c.get("auth").subject }),
    ),
  );
  app.post(
    "/notes",
    withBearerAuth(gate, { scopes: ["notes:read"] }, async (c) =>
      c.json({ ran: "handler ran", body: await c.req.text() }),
    ),
  );
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => closeServer(server) };
});

/**
 * RFC 6750 §2.2 is not offered, so a token in a urlencoded body gets 400 without validation; a form
 * without one, sent with a header token, reaches the handler with its body intact (`handlerSaw`).
 */
async function expectFormTokenRefusedAndBodyKept(url: string, handlerSaw: unknown): Promise<void> {
  const token = await issuer.sign({ aud: RESOURCE, scope: "notes:read" });
  const refused = await fetch(`${url}/notes`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: `access_token=${token}`,
  });
  expect(refused.status).toBe(400);
  const ok = await fetch(`${url}/notes`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Bearer ${token}` },
    body: "text=hello",
  });
  expect(await ok.json()).toEqual(handlerSaw);
}

describe("form bodies through the adapters", () => {
  it("express: a token in a parsed form body is refused; a form without one reaches the handler", async () => {
    const app = express();
    app.use(express.urlencoded({ extended: false }));
    app.post("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
      res.json({ body: req.body });
    });
    const server = createServer(app);
    const url = await listenOn(server);
    try {
      await expectFormTokenRefusedAndBodyKept(url, { body: { text: "hello" } });
    } finally {
      await closeServer(server);
    }
  });

  it("hono: the handler still reads the body after the gate looked at the form", async () => {
    const app = new Hono<{ Variables: BearerAuthVariables }>();
    app.use("/notes", bearerAuth(gate, { scopes: ["notes:read"] }));
    app.post("/notes", async (c) => c.json({ body: await c.req.text() }));
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await expectFormTokenRefusedAndBodyKept(url, { body: "text=hello" });
    } finally {
      await closeServer(server);
    }
  });

  it("hono withBearerAuth: the handler still reads the body after the gate looked at the form", async () => {
    const app = new Hono<{ Variables: BearerAuthVariables }>();
    app.post(
      "/notes",
      withBearerAuth(gate, { scopes: ["notes:read"] }, async (c) => c.json({ body: await c.req.text() })),
    );
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await expectFormTokenRefusedAndBodyKept(url, { body: "text=hello" });
    } finally {
      await closeServer(server);
    }
  });
});
