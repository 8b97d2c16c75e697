/**
 * gatehouse-auth/hono on @hono/node-server's lazy request: the gate reads the header fields from
 * the node request while nothing has built the web header list, and then judges exactly what it
 * judged on the web `Request`: the authority and the absolute URL (host allow-list, DPoP `htu`,
 * RFC 9449 §4.3) are the ones @hono/node-server put in `c.req.url` (absolute-form targets, a
 * Host with the default port or capitals, HTTP/1.0 without Host and node-server's default
 * hostname), no X-Forwarded-* is believed (Hono has no trust-proxy setting), a urlencoded body
 * carrying `access_token` is refused (RFC 6750 §2.2) and any other form still reaches the
 * handler in full, a scopes function gets a web `Request`. Both forms (middleware and wrapped).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer, request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BearerAuthVariables, bearerAuth, withBearerAuth } from "../../src/http/hono.js";
import { createResourceServer, jwtVerifier, type ResourceServer } from "../../src/resource-server/index.js";
import { craftProof, type ProofKey, proofKey } from "../resource-server/dpop-support.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";
import { testTls } from "../support/tls.js";

let issuer: TestIssuer;
let key: ProofKey;
beforeAll(async () => {
  issuer = await startIssuer();
  key = await proofKey();
});
afterAll(async () => {
  await issuer.close();
});

type Form = "middleware" | "wrapped";

interface Seen {
  /** The handler ran. */
  ran: number;
  /** Own slots of `c.req.raw` holding a `Headers` when the handler ran (the built header list). */
  builtHeaderLists: number;
  /** What a scopes function was handed. */
  scopesArgument: unknown;
  /** The body the handler read. */
  body: string | undefined;
}

function appFor(
  form: Form,
  gate: ResourceServer,
  seen: Seen,
  scopes?: "function",
  front?: (c: { req: { raw: Request } }) => void,
) {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  if (front)
    app.use("/notes", async (c, next) => {
      front(c);
      await next();
    });
  const required =
    scopes === "function"
      ? (request: Request) => {
          seen.scopesArgument = request;
          return ["notes:read"];
        }
      : ["notes:read"];
  const handler = async (c: {
    req: { raw: Request; method: string; text(): Promise<string> };
    get(k: "auth"): { subject?: string; dpopJkt?: string };
    json(v: unknown): Response;
  }) => {
    seen.ran++;
    const raw = c.req.raw as unknown as Record<symbol, unknown>;
    seen.builtHeaderLists = Object.getOwnPropertySymbols(raw).filter((k) => raw[k] instanceof Headers).length;
    if (c.req.method === "POST") seen.body = await c.req.text();
    return c.json({ subject: c.get("auth").subject, jkt: c.get("auth").dpopJkt ?? null });
  };
  if (form === "middleware")
    app.on(["GET", "POST"], "/notes", bearerAuth(gate, { scopes: required }), handler);
  else app.on(["GET", "POST"], "/notes", withBearerAuth(gate, { scopes: required }, handler));
  return app;
}

interface Started {
  port: number;
  url: string;
  /** A token for this server's resource (`http://127.0.0.1:<port>`). */
  token: string;
  /** Signs a DPoP-bound token (cnf.jkt) for this server's resource. */
  boundToken(): Promise<string>;
  close(): Promise<void>;
}

/**
 * Starts a node:http server on 127.0.0.1 with @hono/node-server's listener, the gate built for
 * `http://127.0.0.1:<port>` (a loopback resource: its Host allow-list is on) with DPoP allowed.
 * `defaultHost` is node-server's authority for a request without Host (its `hostname` option).
 */
async function start(
  form: Form,
  seen: Seen,
  options: {
    scopes?: "function";
    defaultHost?: (port: number) => string;
    tls?: boolean;
    /** A middleware's work on the request before the gate's. */
    front?: (c: { req: { raw: Request } }) => void;
  } = {},
): Promise<Started> {
  let listener: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
  const serve = (req: IncomingMessage, res: ServerResponse) => listener(req, res);
  const server = options.tls
    ? createHttpsServer({ key: testTls().key, cert: testTls().cert }, serve)
    : createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  const resource = `${options.tls ? "https" : "http"}://127.0.0.1:${port}`;
  const gate = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: resource, jwks: { keys: [issuer.publicJwk] } }),
    dpop: { policy: "allowed" },
  });
  const app = appFor(form, gate, seen, options.scopes, options.front);
  listener = getRequestListener(app.fetch, { hostname: options.defaultHost?.(port) }) as typeof listener;
  return {
    port,
    url: resource,
    token: await issuer.sign({ aud: resource, sub: "alice", scope: "notes:read" }),
    boundToken: () =>
      issuer.sign({ aud: resource, sub: "alice", scope: "notes:read", cnf: { jkt: key.jkt } }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const statusOf = (raw: string) => Number(raw.split(" ")[1]);
const fresh = (): Seen => ({ ran: 0, builtHeaderLists: -1, scopesArgument: undefined, body: undefined });

describe.each<Form>(["middleware", "wrapped"])("hono %s on @hono/node-server's lazy request", (form) => {
  it("a warm request is judged without building the request's web header list", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      // The adapter learns node-server's request shape from the first lazy request it sees (whose
      // header list it builds, as the web head would); every later one keeps its list unbuilt.
      const lists: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${server.url}/notes`, {
          headers: { authorization: `Bearer ${server.token}` },
        });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ subject: "alice", jkt: null });
        lists.push(seen.builtHeaderLists);
      }
      expect(lists.slice(1)).toEqual([0, 0]);
    } finally {
      await server.close();
    }
  });

  it("rule: headers a middleware put in front of node-server's list (an own property, a proxy) are what the gate judges", async () => {
    const edited = (): Headers => new Headers({ authorization: "Bearer wrong.token.here" });
    const fronts: Array<(c: { req: { raw: Request } }) => void> = [
      (c) => {
        Object.defineProperty(c.req.raw, "headers", { value: edited() });
      },
      (c) => {
        const headers = edited();
        c.req.raw = new Proxy(c.req.raw, {
          get: (target, name) => (name === "headers" ? headers : Reflect.get(target, name, target)),
        });
      },
    ];
    for (const front of fronts) {
      const seen = fresh();
      const server = await start(form, seen, { front });
      try {
        // Twice: the second request is judged after the adapter has learnt node-server's shape.
        for (let i = 0; i < 2; i++) {
          const res = await fetch(`${server.url}/notes`, {
            headers: { authorization: `Bearer ${server.token}` },
          });
          expect(res.status).toBe(401);
        }
        expect(seen.ran).toBe(0);
      } finally {
        await server.close();
      }
    }
  });

  it("rule: the authority checked is the one node-server put in the URL: an absolute-form target naming another host → 403", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const foreign = await rawRequest(
        server.url,
        `GET http://evil.example/notes HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(foreign)).toBe(403);
      // The converse: the URL names this server, the Host field a stranger; node-server's URL rules.
      const own = await rawRequest(
        server.url,
        `GET http://127.0.0.1:${server.port}/notes HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(own)).toBe(200);
      expect(seen.ran).toBe(1);
    } finally {
      await server.close();
    }
  });

  it("rule: X-Forwarded-Host naming a stranger is not believed, nor one naming this server behind a stranger's Host", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const forwarded = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(forwarded)).toBe(200);
      const stranger = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Host: 127.0.0.1:${server.port}\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(stranger)).toBe(403);
      expect(seen.ran).toBe(1);
    } finally {
      await server.close();
    }
  });

  it("rule: a Host in capitals is checked as node-server's URL writes it; another port → 403", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const capitals = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: LOCALHOST:${server.port}\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(capitals)).toBe(200);
      const otherPort = await rawRequest(
        server.url,
        `GET /notes HTTP/1.1\r\nHost: 127.0.0.1:80\r\nAuthorization: Bearer ${server.token}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(otherPort)).toBe(403);
    } finally {
      await server.close();
    }
  });

  it("rule: HTTP/1.0 without Host takes node-server's default hostname: a stranger's → 403, this server's → 200", async () => {
    const stranger = await start(form, fresh(), { defaultHost: () => "evil.example" });
    try {
      const res = await rawRequest(
        stranger.url,
        `GET /notes HTTP/1.0\r\nAuthorization: Bearer ${stranger.token}\r\n\r\n`,
      );
      expect(statusOf(res)).toBe(403);
    } finally {
      await stranger.close();
    }
    const own = await start(form, fresh(), { defaultHost: (port) => `127.0.0.1:${port}` });
    try {
      const res = await rawRequest(
        own.url,
        `GET /notes HTTP/1.0\r\nAuthorization: Bearer ${own.token}\r\n\r\n`,
      );
      expect(statusOf(res)).toBe(200);
    } finally {
      await own.close();
    }
  });

  it("rule: DPoP htu is node-server's URL (http on a plain socket); a proof for the forwarded https URL → 401", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const at = await server.boundToken();
      const url = `${server.url}/notes?page=2`;
      const ok = await fetch(url, {
        headers: { authorization: `DPoP ${at}`, dpop: await craftProof(key, { url, accessToken: at }) },
      });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ subject: "alice", jkt: key.jkt });
      const forwarded = await fetch(url, {
        headers: {
          authorization: `DPoP ${at}`,
          "x-forwarded-proto": "https",
          "x-forwarded-host": "api.example.com",
          dpop: await craftProof(key, { url: "https://api.example.com/notes?page=2", accessToken: at }),
        },
      });
      expect(forwarded.status).toBe(401);
      const https = await fetch(url, {
        headers: {
          authorization: `DPoP ${at}`,
          dpop: await craftProof(key, { url: url.replace("http:", "https:"), accessToken: at }),
        },
      });
      expect(https.status).toBe(401);
      expect(seen.ran).toBe(1);
    } finally {
      await server.close();
    }
  });

  it("rule: a urlencoded body with access_token → 400 (RFC 6750 §2.2); any other form reaches the handler in full", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const carrying = await fetch(`${server.url}/notes`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.token}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        body: "a=1&access%5Ftoken=x",
      });
      expect(carrying.status).toBe(400);
      expect(carrying.headers.get("www-authenticate")).toMatch(/error="invalid_request"/);
      expect(seen.ran).toBe(0);
      const form = `note=${"x".repeat(70_000)}&b=2`;
      const plain = await fetch(`${server.url}/notes`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.token}`,
          "content-type": "Application/X-WWW-Form-Urlencoded; charset=utf-8",
        },
        body: form,
      });
      expect(plain.status).toBe(200);
      expect(seen.body).toBe(form);
      // Two Content-Type fields are joined as the web header list joins them (not a form).
      const twice = await rawRequest(
        server.url,
        `POST /notes HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nAuthorization: Bearer ${server.token}\r\nContent-Type: application/x-www-form-urlencoded\r\ncontent-type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\naccess_token=x`,
      );
      expect(statusOf(twice)).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("rule: a token in the query of node-server's URL → 400, never validated", async () => {
    const seen = fresh();
    const server = await start(form, seen);
    try {
      const res = await rawRequest(
        server.url,
        `GET /notes?x=1&access_token=${server.token} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(res)).toBe(400);
      expect(seen.ran).toBe(0);
    } finally {
      await server.close();
    }
  });

  it("a scopes function gets the web Request Hono handles", async () => {
    const seen = fresh();
    const server = await start(form, seen, { scopes: "function" });
    try {
      const res = await fetch(`${server.url}/notes?page=2`, {
        headers: { authorization: `Bearer ${server.token}` },
      });
      expect(res.status).toBe(200);
      expect(seen.scopesArgument).toBeInstanceOf(Request);
      const request = seen.scopesArgument as Request;
      expect(request.url).toBe(`${server.url}/notes?page=2`);
      expect(request.headers.get("authorization")).toBe(`Bearer ${server.token}`);
    } finally {
      await server.close();
    }
  });
});

describe.each<Form>(["middleware", "wrapped"])("hono %s on @hono/node-server over TLS", (form) => {
  /** One GET over TLS to 127.0.0.1, trusting the test CA only for this request. */
  const ask = (port: number, headers: Record<string, string>) =>
    new Promise<number>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port, path: "/notes", headers, ca: testTls().ca, servername: "127.0.0.1" },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      req.end();
    });

  it("rule: DPoP htu is https on a TLS socket (node-server's URL); a proof for the http URL → 401", async () => {
    const seen = fresh();
    const server = await start(form, seen, { tls: true });
    try {
      const at = await server.boundToken();
      const url = `${server.url}/notes`;
      expect(url.startsWith("https://")).toBe(true);
      const proofFor = async (u: string) => craftProof(key, { url: u, accessToken: at });
      expect(await ask(server.port, { authorization: `DPoP ${at}`, dpop: await proofFor(url) })).toBe(200);
      const http = url.replace("https:", "http:");
      expect(await ask(server.port, { authorization: `DPoP ${at}`, dpop: await proofFor(http) })).toBe(401);
      expect(await ask(server.port, { authorization: `Bearer ${server.token}` })).toBe(200);
      expect(seen.ran).toBe(2);
    } finally {
      await server.close();
    }
  });
});
