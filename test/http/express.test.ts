/**
 * The Express adapter (src/http/express.ts) judges the request head as the node adapter does: the
 * authority as sent, checked by the Host guard (any case, the default-port spellings), 400 for a
 * Host or target that does not make a URL, Express's own `trust proxy` setting for the forwarded
 * host, a scopes function given a web `Request` with the original URL and the client address, and
 * a challenge without a body for HEAD. Real server on loopback, Host headers written on the wire.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireBearerAuth } from "../../src/http/express.js";
import { clientAddress } from "../../src/http/node.js";
import { createResourceServer, jwtVerifier } from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

let issuer: TestIssuer;
let server: Server;
let port: number;
let token: string;
/** What the scopes function saw: the request URL and the client address. */
const scopesSaw: Array<{ url: string; address: string | undefined }> = [];

beforeAll(async () => {
  issuer = await startIssuer();
  server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  port = (server.address() as AddressInfo).port;
  const resource = `http://127.0.0.1:${port}`;
  const gate = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
  });
  token = await issuer.sign({ aud: resource, sub: "alice", scope: "notes:read" });
  const app = express();
  app.set("trust proxy", 1);
  const byRequest = requireBearerAuth(gate, {
    scopes: (request) => {
      scopesSaw.push({ url: request.url, address: clientAddress(request) });
      return ["notes:read"];
    },
  });
  const router = express.Router();
  router.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
    res.send(`notes of ${req.auth?.subject}`);
  });
  router.get("/computed", byRequest, (req, res) => {
    res.send(`computed for ${req.auth?.subject}`);
  });
  app.use("/api", router);
  server.on("request", app);
});
afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  await issuer.close();
});

/** One request as written on the wire; returns the status line's code, the headers and the body. */
async function send(method: string, path: string, headers: Record<string, string>) {
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  const raw = await rawRequest(
    `http://127.0.0.1:${port}`,
    `${method} ${path} HTTP/1.1\r\n${lines.join("")}Connection: close\r\n\r\n`,
  );
  const [head = "", body = ""] = raw.split("\r\n\r\n");
  return { status: Number(head.split(" ")[1]), head: head.toLowerCase(), body };
}

describe("requireBearerAuth (Express)", () => {
  it("the Host check takes the authority in any case of an allowed spelling", async () => {
    const authorization = `Bearer ${token}`;
    expect((await send("GET", "/api/notes", { Host: `127.0.0.1:${port}`, authorization })).status).toBe(200);
    expect((await send("GET", "/api/notes", { Host: `LOCALHOST:${port}`, authorization })).status).toBe(200);
    expect((await send("GET", "/api/notes", { Host: `evil.example:${port}`, authorization })).status).toBe(
      403,
    );
  });

  it("rule: behind the trusted proxy, a forwarded host that is not allowed → 403, no challenge", async () => {
    const res = await send("GET", "/api/notes", {
      Host: `127.0.0.1:${port}`,
      "X-Forwarded-Host": "evil.example",
      authorization: `Bearer ${token}`,
    });
    expect(res.status).toBe(403);
    expect(res.head).not.toContain("www-authenticate");
  });

  it("a missing Host is answered 400 before the gate", async () => {
    expect((await send("GET", "/api/notes", {})).status).toBe(400);
  });

  it("rule: after a valid request, a bad Host or an absolute-form target is still answered 400", async () => {
    const host = `127.0.0.1:${port}`;
    const authorization = `Bearer ${token}`;
    expect((await send("GET", "/api/notes", { Host: host, authorization })).status).toBe(200);
    for (const bad of ["a%zz", "bad host/", `127.0.0.1:${port}/x`]) {
      expect((await send("GET", "/api/notes", { Host: bad, authorization })).status).toBe(400);
    }
    expect((await send("GET", `http://evil.example/api/notes`, { Host: host, authorization })).status).toBe(
      400,
    );
    // The same authority and scheme again, after the refusals: still judged, still 200.
    expect((await send("GET", "/api/notes", { Host: host, authorization })).status).toBe(200);
    expect((await send("GET", "/api/notes", { Host: host })).status).toBe(401);
  });

  it("behind the trusted proxy, the forwarded scheme and host make the origin (a bad one is 400)", async () => {
    const authorization = `Bearer ${token}`;
    const host = `127.0.0.1:${port}`;
    // Allowed: the forwarded host is the resource's own authority, whatever Host the proxy sent.
    expect(
      (await send("GET", "/api/notes", { Host: "internal:1", "X-Forwarded-Host": host, authorization }))
        .status,
    ).toBe(200);
    expect(
      (await send("GET", "/api/notes", { Host: host, "X-Forwarded-Host": "a%zz", authorization })).status,
    ).toBe(400);
  });

  it("HEAD without a token gets the 401 challenge, the GET's header fields and no body", async () => {
    const res = await send("HEAD", "/api/notes", { Host: `127.0.0.1:${port}` });
    expect(res.status).toBe(401);
    expect(res.head).toContain("www-authenticate: bearer resource_metadata=");
    // RFC 9110 §9.3.2: the header fields a GET would get, its Content-Length: 0 included.
    expect(res.head).toContain("content-length: 0");
    expect(res.body).toBe("");
  });

  it("a scopes function gets a web Request with the original URL and the client address", async () => {
    const res = await send("GET", "/api/computed?x=1", {
      Host: `127.0.0.1:${port}`,
      "X-Forwarded-For": "203.0.113.9",
      authorization: `Bearer ${token}`,
    });
    expect(res.status).toBe(200);
    expect(res.body).toBe("computed for alice");
    expect(scopesSaw.at(-1)).toEqual({
      url: `http://127.0.0.1:${port}/api/computed?x=1`,
      address: "203.0.113.9",
    });
  });
});
