/**
 * gatehouse-auth/hono on @hono/node-server: the gate reads the header fields of the request Hono
 * handles. Pins the cases where the raw header list of the node request and the web `Request`
 * could disagree: an application that rebuilds the request (other headers) and hands Hono the
 * same node-server environment, two `Authorization` fields, any case of a field name, HTTP/2.
 * Both forms (middleware and wrapped handler) give the same answers.
 */
import { createServer as createHttp2Server, connect as http2Connect } from "node:http2";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BearerAuthVariables, bearerAuth, withBearerAuth } from "../../src/http/hono.js";
import {
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

const RESOURCE = "https://mcp.example.com";

let issuer: TestIssuer;
let gate: ResourceServer;
let token: string;
beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
    ),
  });
  token = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
});
afterAll(async () => {
  await issuer.close();
});

type Form = "middleware" | "wrapped";

function appFor(form: Form, before?: (headers: Headers) => void) {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  if (before)
    app.use("/notes", async (c, next) => {
      before(c.req.raw.headers);
      await next();
    });
  const handler = (c: { get(k: "auth"): { subject?: string }; json(v: unknown): Response }) =>
    c.json({ subject: c.get("auth").subject });
  if (form === "middleware") app.get("/notes", bearerAuth(gate, { scopes: ["notes:read"] }), handler);
  else app.get("/notes", withBearerAuth(gate, { scopes: ["notes:read"] }, handler));
  return app;
}

/** Serves `fetch` with @hono/node-server on loopback (HTTP/1.1). */
async function serveFetch(
  fetch: (request: Request, env: unknown) => Response | Promise<Response>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
}

const statusOf = (raw: string) => Number(raw.split(" ")[1]);

describe.each<Form>(["middleware", "wrapped"])("hono %s on @hono/node-server", (form) => {
  it("a token sent once reaches the handler, whatever the case of the field name", async () => {
    const server = await serveFetch(appFor(form).fetch);
    try {
      const ok = await fetch(`${server.url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ subject: "alice" });
      const odd = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuThOrIzAtIoN: Bearer ${token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(odd)).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("rule: two Authorization fields (any case) are malformed → 400 invalid_request, handler not run", async () => {
    const server = await serveFetch(appFor(form).fetch);
    try {
      const twice = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nauthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(twice)).toBe(400);
      expect(twice).toMatch(/error="invalid_request"/);
      expect(twice).not.toContain("alice");
    } finally {
      await server.close();
    }
  });

  it("the gate judges the request Hono handles: a rebuilt request without the token → 401, not the token on the wire", async () => {
    const app = appFor(form);
    // An application front that rebuilds the request (here: drops Authorization) and hands Hono
    // the same node-server environment, whose node request still carries the token.
    const server = await serveFetch((request, env) => {
      const headers = new Headers(request.headers);
      headers.delete("authorization");
      return app.fetch(new Request(request.url, { method: request.method, headers }), env);
    });
    try {
      const res = await fetch(`${server.url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      const [challenge] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
      expect(challenge?.params.error).toBeUndefined();
    } finally {
      await server.close();
    }
  });

  it("and a rebuilt request that carries a token is judged by that token, not by the wire's headers", async () => {
    const app = appFor(form);
    const server = await serveFetch((request, env) => {
      const headers = new Headers(request.headers);
      headers.set("authorization", `Bearer ${token}`);
      return app.fetch(new Request(request.url, { method: request.method, headers }), env);
    });
    try {
      const res = await fetch(`${server.url}/notes`, {
        headers: { authorization: "Bearer wrong.token.here" },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ subject: "alice" });
    } finally {
      await server.close();
    }
  });

  it("a middleware that deletes or sets Authorization on node-server's request: the gate sees the edited header", async () => {
    const dropped = await serveFetch(appFor(form, (h) => h.delete("authorization")).fetch);
    const replaced = await serveFetch(appFor(form, (h) => h.set("authorization", `Bearer ${token}`)).fetch);
    try {
      const res = await fetch(`${dropped.url}/notes`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      const set = await fetch(`${replaced.url}/notes`, {
        headers: { authorization: "Bearer wrong.token.here" },
      });
      expect(set.status).toBe(200);
    } finally {
      await dropped.close();
      await replaced.close();
    }
  });

  it("over HTTP/2 (the raw list holds pseudo-header fields): with the token 200, without 401", async () => {
    const app = appFor(form);
    const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve(
        { fetch: app.fetch, port: 0, hostname: "127.0.0.1", createServer: createHttp2Server },
        () => resolve(s),
      );
    });
    const port = (server.address() as AddressInfo).port;
    const session = http2Connect(`http://127.0.0.1:${port}`);
    const ask = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({ ":method": "GET", ":path": "/notes", ...headers });
        let status = 0;
        let body = "";
        stream.on("response", (h) => {
          status = Number(h[":status"]);
        });
        stream.on("data", (d: Buffer) => {
          body += d.toString();
        });
        stream.on("end", () => resolve({ status, body }));
        stream.on("error", reject);
      });
    try {
      const ok = await ask({ authorization: `Bearer ${token}` });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toEqual({ subject: "alice" });
      expect((await ask({})).status).toBe(401);
    } finally {
      session.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
