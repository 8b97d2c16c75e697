/**
 * nodeRequireBearer with a ResourceServer: the gate runs on a head read from IncomingMessage and
 * challenges are written with writeHead/end. Pins that it answers exactly as the web-standard gate
 * does, that a token in a urlencoded body is refused there too, and that the body stays readable.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type NodeRequireBearerOptions, nodeRequireBearer } from "../../src/http/node.js";
import {
  type AccessTokenVerifier,
  type AuthInfo,
  type BearerRequestHead,
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

const RESOURCE = "https://mcp.example.com";
const FORM = "application/x-www-form-urlencoded";

let issuer: TestIssuer;
let gate: ResourceServer;
let readToken: string;
beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    scopesSupported: ["notes:read", "notes:write"],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
  });
  readToken = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
});
afterAll(async () => {
  await issuer.close();
});

let server: Server | undefined;
afterEach(async () => {
  const s = server;
  server = undefined;
  if (s) {
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }
});

interface Seen {
  ran: number;
  body: string | undefined;
  auth: AuthInfo | undefined;
}

/** A server whose handler records that it ran, the auth it got and the body it read in full. */
async function start(
  options: NodeRequireBearerOptions = { scopes: ["notes:read"] },
): Promise<{ url: string; seen: Seen }> {
  const seen: Seen = { ran: 0, body: undefined, auth: undefined };
  server = createServer(
    nodeRequireBearer(gate, options, async (req, res, auth) => {
      seen.ran++;
      seen.auth = auth;
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      seen.body = Buffer.concat(chunks).toString("utf8");
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`handler ran: ${seen.body.length}`);
    }),
  );
  const s = server;
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
}

/** The parts of an answer that the gate decides. */
async function answerOf(res: Response) {
  const pick = (name: string) => res.headers.get(name);
  return {
    status: res.status,
    challenge: pick("www-authenticate"),
    cacheControl: pick("cache-control"),
    pragma: pick("pragma"),
    contentType: pick("content-type"),
    cors: pick("access-control-allow-origin"),
    expose: pick("access-control-expose-headers"),
    retryAfter: pick("retry-after"),
    body: await res.text(),
  };
}

describe("nodeRequireBearer fast path: same answers as the web-standard gate", () => {
  const cases: Array<[string, () => Promise<{ path: string; headers: Record<string, string> }>]> = [
    ["no credentials", async () => ({ path: "/notes", headers: {} })],
    ["another scheme", async () => ({ path: "/notes", headers: { authorization: "Basic dXNlcjpw" } })],
    ["malformed header", async () => ({ path: "/notes", headers: { authorization: "Bearer a b" } })],
    [
      "wrong audience",
      async () => ({
        path: "/notes",
        headers: {
          authorization: `Bearer ${await issuer.sign({ aud: `${RESOURCE}.evil`, scope: "notes:read" })}`,
        },
      }),
    ],
    [
      "insufficient scope",
      async () => ({
        path: "/notes",
        headers: { authorization: `Bearer ${await issuer.sign({ aud: RESOURCE, scope: "other" })}` },
      }),
    ],
    ["token in the query", async () => ({ path: `/notes?access_token=${readToken}`, headers: {} })],
    [
      "percent-encoded token name in the query",
      async () => ({ path: `/notes?acc%65ss_token=${readToken}`, headers: {} }),
    ],
  ];

  it.each(cases)("rule: %s → the challenge the web gate gives, handler not run", async (_name, make) => {
    const { url, seen } = await start();
    const { path, headers } = await make();
    const viaNode = await answerOf(await fetch(`${url}${path}`, { headers }));
    const web = gate.requireBearer({ scopes: ["notes:read"] });
    const viaWeb = await answerOf(
      await web(new Request(`${RESOURCE}${path}`, { headers }), async () => new Response("handler ran")),
    );
    expect(viaNode).toEqual(viaWeb);
    expect(viaNode.status).toBeGreaterThanOrEqual(400);
    expect(seen.ran).toBe(0);
  });

  it("a valid token reaches the handler with the verified auth", async () => {
    const { url, seen } = await start();
    const res = await fetch(`${url}/notes`, { headers: { authorization: `Bearer ${readToken}` } });
    expect(res.status).toBe(200);
    expect(seen.auth?.subject).toBe("alice");
    expect(seen.auth?.scopes).toEqual(["notes:read"]);
  });

  it("rule: a HEAD challenge has the headers and no body", async () => {
    const { url } = await start();
    const res = await fetch(`${url}/notes`, { method: "HEAD" });
    expect(res.status).toBe(401);
    expect(parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "")[0]?.params.resource_metadata).toBe(
      `${RESOURCE}/.well-known/oauth-protected-resource`,
    );
    expect(await res.text()).toBe("");
  });

  it("rule: two Authorization fields are malformed (400), not 'first one wins'", async () => {
    const { url, seen } = await start();
    const { host } = new URL(url);
    const out = await rawRequest(
      url,
      `GET /notes HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${readToken}\r\n` +
        `Authorization: Bearer other\r\nConnection: close\r\n\r\n`,
    );
    expect(out.startsWith("HTTP/1.1 400")).toBe(true);
    expect(out).toMatch(/error="invalid_request"/);
    expect(seen.ran).toBe(0);
  });

  it("rule: the Authorization and Content-Type fields are read whatever the case of their names", async () => {
    const { url, seen } = await start();
    const { host } = new URL(url);
    const send = (fields: string, body = "") =>
      rawRequest(url, `POST /notes HTTP/1.1\r\nHost: ${host}\r\n${fields}Connection: close\r\n\r\n${body}`);
    // Two fields whose names differ only in case are still two fields: malformed.
    const twice = await send(
      `AUTHORIZATION: Bearer ${readToken}\r\nauthorization: Bearer other\r\nContent-Length: 0\r\n`,
    );
    expect(twice.startsWith("HTTP/1.1 400")).toBe(true);
    // RFC 6750 §2.2: a token in a form body is refused, whatever the spelling of Content-Type.
    const form = `access_token=${readToken}`;
    const inForm = await send(
      `CONTENT-TYPE: ${FORM}\r\naUtHoRiZaTiOn: Bearer ${readToken}\r\nContent-Length: ${form.length}\r\n`,
      form,
    );
    expect(inForm.startsWith("HTTP/1.1 400")).toBe(true);
    expect(seen.ran).toBe(0);
    const ok = await send(`AUTHORIZATION: Bearer ${readToken}\r\nContent-Length: 0\r\n`);
    expect(ok.startsWith("HTTP/1.1 200")).toBe(true);
    expect(seen.ran).toBe(1);
  });

  it("rule: after a valid request, a bad Host or an absolute-form target is still answered 400", async () => {
    const { url, seen } = await start();
    const { host } = new URL(url);
    const send = (target: string, hostField: string) =>
      rawRequest(
        url,
        `GET ${target} HTTP/1.1\r\nHost: ${hostField}\r\nAuthorization: Bearer ${readToken}\r\nConnection: close\r\n\r\n`,
      );
    expect((await send("/notes", host)).startsWith("HTTP/1.1 200")).toBe(true);
    expect((await send("/notes", "a%zz")).startsWith("HTTP/1.1 400")).toBe(true);
    expect((await send("http://evil.example/notes", host)).startsWith("HTTP/1.1 400")).toBe(true);
    expect((await send("/notes", host)).startsWith("HTTP/1.1 200")).toBe(true);
    expect(seen.ran).toBe(2);
  });

  it("rule: a Host that is not a URL authority is answered 400 (RFC 9112 §3.2)", async () => {
    const { url, seen } = await start();
    for (const host of ["a%zz", "bad host/"]) {
      const out = await rawRequest(
        url,
        `GET /notes HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${readToken}\r\nConnection: close\r\n\r\n`,
      );
      expect(out.startsWith("HTTP/1.1 400")).toBe(true);
    }
    expect(seen.ran).toBe(0);
  });

  it("a scopes function receives a web Request of the node request", async () => {
    let seenUrl = "";
    const { url, seen } = await start({
      scopes: (request) => {
        seenUrl = request.url;
        return request.method === "POST" ? ["notes:write"] : ["notes:read"];
      },
    });
    const ok = await fetch(`${url}/notes?x=1`, { headers: { authorization: `Bearer ${readToken}` } });
    expect(ok.status).toBe(200);
    expect(seenUrl).toBe(`${url}/notes?x=1`);
    const refused = await fetch(`${url}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${readToken}` },
      body: "{}",
    });
    expect(refused.status).toBe(403);
    expect(seen.ran).toBe(1);
  });

  it("builds no web Request or Response on the protected path (pass, 401 and 403)", async () => {
    const { url, seen } = await start();
    const noScope = await issuer.sign({ aud: RESOURCE, scope: "other" });
    const ask = (authorization?: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `${url}/notes`,
          { headers: authorization ? { authorization } : {} },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
          },
        );
        req.on("error", reject);
        req.end();
      });
    // Warm the verifier (JWKS fetch through the issuer's own web adapter) before counting.
    expect(await ask(`Bearer ${readToken}`)).toBe(200);
    expect(await ask(`Bearer ${noScope}`)).toBe(403);
    const RealRequest = globalThis.Request;
    const RealResponse = globalThis.Response;
    let built = 0;
    globalThis.Request = class extends RealRequest {
      constructor(...args: ConstructorParameters<typeof Request>) {
        super(...args);
        built++;
      }
    };
    globalThis.Response = class extends RealResponse {
      constructor(...args: ConstructorParameters<typeof Response>) {
        super(...args);
        built++;
      }
    };
    let statuses: number[];
    try {
      statuses = [await ask(`Bearer ${readToken}`), await ask(), await ask(`Bearer ${noScope}`)];
    } finally {
      globalThis.Request = RealRequest;
      globalThis.Response = RealResponse;
    }
    expect(statuses).toEqual([200, 401, 403]);
    expect(built).toBe(0);
    expect(seen.ran).toBe(2);
  });
});

describe("nodeRequireBearer: tokens in a urlencoded body (RFC 6750 §2.2, header method only)", () => {
  const post = (url: string, body: BodyInit, headers: Record<string, string> = {}) =>
    fetch(`${url}/notes`, { method: "POST", headers: { "content-type": FORM, ...headers }, body });

  it("rule: access_token in a form body → 400 invalid_request, never validated, handler not run", async () => {
    const { url, seen } = await start();
    for (const body of [`note=x&access_token=${readToken}`, `acc%65ss_token=${readToken}`]) {
      const res = await post(url, body);
      expect(res.status).toBe(400);
      const [c] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
      expect(c?.params.error).toBe("invalid_request");
      expect(await res.text()).not.toContain(readToken);
    }
    // Even with a valid header alongside, and with a charset parameter on the media type.
    const both = await post(url, `access_token=${readToken}`, {
      authorization: `Bearer ${readToken}`,
      "content-type": `${FORM}; charset=UTF-8`,
    });
    expect(both.status).toBe(400);
    expect(seen.ran).toBe(0);
  });

  it("a form body without a token reaches the handler byte for byte", async () => {
    const { url, seen } = await start();
    const res = await post(url, "note=hello&x=%C3%A9", { authorization: `Bearer ${readToken}` });
    expect(res.status).toBe(200);
    expect(seen.body).toBe("note=hello&x=%C3%A9");
  });

  it("a large form body, streamed in chunks without Content-Length, is read and handed back whole", async () => {
    const { url, seen } = await start();
    const part = `a=${"b".repeat(64 * 1024)}&`;
    const stream = new ReadableStream<Uint8Array>({
      async start(c) {
        for (let i = 0; i < 6; i++) {
          c.enqueue(new TextEncoder().encode(part));
          await new Promise((r) => setTimeout(r, 2));
        }
        c.close();
      },
    });
    const res = await fetch(`${url}/notes`, {
      method: "POST",
      headers: { "content-type": FORM, authorization: `Bearer ${readToken}` },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(200);
    expect(seen.body).toBe(part.repeat(6));
  });

  it("a form body over maxBodyBytes → 413, handler not run", async () => {
    const { url, seen } = await start({ scopes: ["notes:read"], maxBodyBytes: 100 });
    const res = await post(url, `a=${"x".repeat(200)}`, { authorization: `Bearer ${readToken}` });
    expect(res.status).toBe(413);
    expect(seen.ran).toBe(0);
  });

  it("other bodies are not read by the gate: a JSON access_token is application data", async () => {
    const { url, seen } = await start({ scopes: ["notes:read"], maxBodyBytes: 10 });
    const body = JSON.stringify({ access_token: "x".repeat(50) });
    const res = await fetch(`${url}/notes`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${readToken}` },
      body,
    });
    expect(res.status).toBe(200);
    expect(seen.body).toBe(body);
  });

  it("a client that goes away while the form body is read does not reach the handler or crash the server", async () => {
    const { url, seen } = await start();
    const { hostname, port, host } = new URL(url);
    await new Promise<void>((resolve) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(
          `POST /notes HTTP/1.1\r\nHost: ${host}\r\nContent-Type: ${FORM}\r\n` +
            `Authorization: Bearer ${readToken}\r\nContent-Length: 1000\r\n\r\nnote=partial`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 50);
      });
    });
    const res = await post(url, "note=after", { authorization: `Bearer ${readToken}` });
    expect(res.status).toBe(200);
    expect(seen.ran).toBe(1);
    expect(seen.body).toBe("note=after");
  });
});

describe("judge: the synchronous warm path keeps every rule", () => {
  const head = (authorization: string | null, url = "/notes"): BearerRequestHead => ({
    url,
    header: (name) => (name === "authorization" ? authorization : null),
    hasBody: false,
    bodyText: async () => "",
  });
  const auth = (over: Partial<AuthInfo> = {}): AuthInfo => ({
    subject: "alice",
    clientId: "c",
    scopes: ["notes:read"],
    audience: [RESOURCE],
    expiresAt: Math.floor(Date.now() / 1000) + 300,
    issuer: "https://as.example",
    ...over,
  });
  /** A verifier whose peek answers for "known" only; verify() counts its calls. */
  const verifierWith = (known: AuthInfo) => {
    const calls = { verify: 0 };
    const verifier: AccessTokenVerifier = {
      async verify() {
        calls.verify++;
        return known;
      },
      peek: (token) => (token === "known" ? known : undefined),
    };
    return { verifier, calls };
  };
  const checkFor = (verifier: AccessTokenVerifier) =>
    createResourceServer({
      resource: RESOURCE,
      authorizationServers: ["https://as.example"],
      verifier,
    }).judge({ scopes: ["notes:read"] });

  it("a verification the verifier holds is answered synchronously, without verify()", () => {
    const { verifier, calls } = verifierWith(auth());
    const verdict = checkFor(verifier)(head("Bearer known"));
    expect(verdict).not.toBeInstanceOf(Promise);
    expect(verdict).toMatchObject({ ok: true, auth: { subject: "alice" } });
    expect(calls.verify).toBe(0);
  });

  it("an unknown token goes through verify() (a promise)", async () => {
    const { verifier, calls } = verifierWith(auth());
    const verdict = checkFor(verifier)(head("Bearer other"));
    expect(verdict).toBeInstanceOf(Promise);
    expect(await verdict).toMatchObject({ ok: true });
    expect(calls.verify).toBe(1);
  });

  it.each([
    ["another audience", auth({ audience: ["https://other.example"] }), 401, "invalid_token"],
    ["expired", auth({ expiresAt: Math.floor(Date.now() / 1000) - 3600 }), 401, "invalid_token"],
    ["too few scopes", auth({ scopes: ["other"] }), 403, "insufficient_scope"],
  ])("rule: a held verification that is %s is still refused (%i %s)", (_name, known, status, error) => {
    const verdict = checkFor(verifierWith(known).verifier)(head("Bearer known"));
    expect(verdict).not.toBeInstanceOf(Promise);
    if (verdict instanceof Promise || verdict.ok) throw new Error("expected a refusal");
    expect(verdict.challenge.status).toBe(status);
    expect(parseWWWAuthenticate(verdict.challenge.headers["www-authenticate"] ?? "")[0]?.params.error).toBe(
      error,
    );
  });

  it("rule: a token in the query is refused even when the header's token is held", () => {
    const verdict = checkFor(verifierWith(auth()).verifier)(head("Bearer known", "/notes?access_token=x"));
    if (verdict instanceof Promise || verdict.ok) throw new Error("expected a refusal");
    expect(verdict.challenge.status).toBe(400);
  });

  it("cachedVerifier.peek: a hit after verify(), nothing for an unknown token or an expired entry", async () => {
    let now = 1_000_000_000_000;
    const inner: AccessTokenVerifier = { verify: async () => auth({ expiresAt: now / 1000 + 60 }) };
    const cache = cachedVerifier(inner, { now: () => now, maxTtlSeconds: 300 });
    expect(cache.peek("t")).toBeUndefined();
    await cache.verify("t");
    expect(cache.peek("t")?.subject).toBe("alice");
    expect(cache.peek("u")).toBeUndefined();
    now += 61_000;
    expect(cache.peek("t")).toBeUndefined();
    expect(cache.size).toBe(0);
  });
});
