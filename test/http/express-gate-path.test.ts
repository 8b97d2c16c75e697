/**
 * The Express adapter's per-request path (src/http/express.ts, `requireBearerAuth`) pinned before
 * its cost is cut: what it reads from Express on every request must keep meaning the same thing.
 * - The form body: only a form Express's parser read is looked at, a token in it is refused (RFC
 *   6750 §2.2, never validated), whatever the media type's parameters; never for GET; a JSON body
 *   is no form.
 * - Express's own `trust proxy` setting, read per request (a change after the route was mounted
 *   counts): a hop count as such, anything else truthy as one trusted proxy.
 * - HEAD gets the GET's answer without a body; two `Authorization` fields are malformed (RFC 6750
 *   §2.1 allows one credential), whatever their spelling.
 * Real servers on loopback, requests written on the wire.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type Express } from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireBearerAuth } from "../../src/http/express.js";
import { createResourceServer, jwtVerifier, type ResourceServer } from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

const RESOURCE = "https://mcp.example.com";
/** The one Host the gate allows: the socket's own authority (127.0.0.1:port) is refused with 403. */
const ALLOWED_HOST = "good.example";

let issuer: TestIssuer;
let gate: ResourceServer;
let token: string;
const servers: Server[] = [];

beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    allowedHosts: [ALLOWED_HOST],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
  });
  token = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
});
afterAll(async () => {
  for (const server of servers) {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
  await issuer.close();
});

/** Serves `app` on loopback; answers its port. */
async function serve(app: Express): Promise<number> {
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return (server.address() as AddressInfo).port;
}

/** One request as written on the wire (`headers` as pairs, so a field may repeat). */
async function send(port: number, method: string, path: string, headers: Array<[string, string]>, body = "") {
  const lines = headers.map(([k, v]) => `${k}: ${v}\r\n`).join("");
  const length = body === "" ? "" : `Content-Length: ${Buffer.byteLength(body)}\r\n`;
  const raw = await rawRequest(
    `http://127.0.0.1:${port}`,
    `${method} ${path} HTTP/1.1\r\n${lines}${length}Connection: close\r\n\r\n${body}`,
  );
  const [head = "", rest = ""] = raw.split("\r\n\r\n");
  return { status: Number(head.split(" ")[1]), head: head.toLowerCase(), body: rest };
}

const bearer = (): [string, string] => ["Authorization", `Bearer ${token}`];
const allowedHost: [string, string] = ["Host", ALLOWED_HOST];
const form: [string, string] = ["Content-Type", "application/x-www-form-urlencoded"];

describe("requireBearerAuth (Express): the form body", () => {
  let port: number;
  beforeAll(async () => {
    const app = express();
    const handler = (req: express.Request, res: express.Response) => {
      res.json({ subject: req.auth?.subject, body: req.body ?? null });
    };
    const guarded = requireBearerAuth(gate, { scopes: ["notes:read"] });
    app.post("/form", express.urlencoded({ extended: false }), guarded, handler);
    app.get("/form", express.urlencoded({ extended: false }), guarded, handler);
    app.post("/json", express.json(), guarded, handler);
    // No parser: the stream is Express's (or the handler's), the gate reads no body.
    app.post("/unparsed", guarded, handler);
    port = await serve(app);
  });

  it("rule: a parsed form carrying access_token → 400 invalid_request, even with a header token", async () => {
    for (const headers of [
      [allowedHost, form],
      [allowedHost, form, bearer()],
    ]) {
      const res = await send(port, "POST", "/form", headers, `access_token=${token}`);
      expect(res.status).toBe(400);
      expect(res.head).toContain('error="invalid_request"');
      expect(res.body).not.toContain("alice");
    }
  });

  it("rule: the media type's parameters and case do not hide the form (RFC 9110 §8.3.1)", async () => {
    for (const type of [
      "application/x-www-form-urlencoded; charset=utf-8",
      "Application/X-WWW-Form-Urlencoded",
    ]) {
      const res = await send(
        port,
        "POST",
        "/form",
        [allowedHost, ["Content-Type", type], bearer()],
        `access_token=${token}`,
      );
      expect(res.status).toBe(400);
    }
  });

  it("a parsed form without access_token reaches the handler whole, with req.auth", async () => {
    const res = await send(port, "POST", "/form", [allowedHost, form, bearer()], "text=hello&n=1");
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ subject: "alice", body: { text: "hello", n: "1" } });
  });

  it("rule: the form method never applies to GET (RFC 6750 §2.2): a GET's parsed form is not looked at", async () => {
    const res = await send(port, "GET", "/form", [allowedHost, form, bearer()], `access_token=${token}`);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).subject).toBe("alice");
  });

  it("a JSON body is no form: an access_token member in it is the handler's business", async () => {
    const body = JSON.stringify({ access_token: "not-a-form" });
    const res = await send(
      port,
      "POST",
      "/json",
      [allowedHost, ["Content-Type", "application/json"], bearer()],
      body,
    );
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ subject: "alice", body: { access_token: "not-a-form" } });
  });

  it("a form no parser read is not read by the gate: the header token decides", async () => {
    const withToken = await send(
      port,
      "POST",
      "/unparsed",
      [allowedHost, form, bearer()],
      `access_token=${token}`,
    );
    expect(withToken.status).toBe(200);
    const without = await send(port, "POST", "/unparsed", [allowedHost, form], `access_token=${token}`);
    expect(without.status).toBe(401);
    expect(without.head).not.toContain("error=");
  });
});

describe("requireBearerAuth (Express): the trust proxy setting", () => {
  /** A route behind the gate in an app with `trust proxy` set to `setting` (unset when undefined). */
  async function appTrusting(setting: unknown): Promise<{ port: number; app: Express }> {
    const app = express();
    if (setting !== undefined) app.set("trust proxy", setting);
    app.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
      res.send(`notes of ${req.auth?.subject}`);
    });
    return { port: await serve(app), app };
  }
  /** The status when the socket's authority is sent as Host and the allowed one is forwarded. */
  const forwarded = (port: number) =>
    send(port, "GET", "/notes", [
      ["Host", `127.0.0.1:${port}`],
      ["X-Forwarded-Host", ALLOWED_HOST],
      bearer(),
    ]).then((res) => res.status);
  const direct = (port: number) =>
    send(port, "GET", "/notes", [allowedHost, ["X-Forwarded-Host", `127.0.0.1:${port}`], bearer()]).then(
      (res) => res.status,
    );

  it("rule: unset, false or 0 → X-Forwarded-Host ignored, Host judged", async () => {
    for (const setting of [undefined, false, 0]) {
      const { port } = await appTrusting(setting);
      expect(await forwarded(port)).toBe(403);
      expect(await direct(port)).toBe(200);
    }
  });

  it("true, a hop count or another truthy value (a proxy list) → the forwarded host is judged", async () => {
    for (const setting of [true, 1, 2, "loopback"]) {
      const { port } = await appTrusting(setting);
      expect(await forwarded(port)).toBe(200);
      expect(await direct(port)).toBe(403);
    }
  });

  it("rule: the setting is read per request: changed after the route was mounted, it counts", async () => {
    const { port, app } = await appTrusting(undefined);
    expect(await forwarded(port)).toBe(403);
    app.set("trust proxy", 1);
    expect(await forwarded(port)).toBe(200);
    app.set("trust proxy", false);
    expect(await forwarded(port)).toBe(403);
  });
});

describe("requireBearerAuth (Express): HEAD and the Authorization field", () => {
  let port: number;
  beforeAll(async () => {
    const app = express();
    app.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), (req, res) => {
      res.send(`notes of ${req.auth?.subject}`);
    });
    port = await serve(app);
  });

  it("HEAD with a valid token: the GET's 200 and length, no body", async () => {
    const get = await send(port, "GET", "/notes", [allowedHost, bearer()]);
    const head = await send(port, "HEAD", "/notes", [allowedHost, bearer()]);
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect(head.head).toContain(`content-length: ${Buffer.byteLength(get.body)}`);
  });

  it("rule: two Authorization fields → 400 invalid_request, whatever their spelling; the handler never runs", async () => {
    for (const names of [
      ["Authorization", "Authorization"],
      ["authorization", "AUTHORIZATION"],
    ]) {
      const res = await send(port, "GET", "/notes", [
        allowedHost,
        [names[0]!, `Bearer ${token}`],
        [names[1]!, `Bearer ${token}`],
      ]);
      expect(res.status).toBe(400);
      expect(res.head).toContain('error="invalid_request"');
      expect(res.body).not.toContain("alice");
    }
  });

  it("rule: a refused HEAD gets the challenge without a body", async () => {
    const res = await send(port, "HEAD", "/notes", [allowedHost, ["Authorization", "Bearer not-a-jwt"]]);
    expect(res.status).toBe(401);
    expect(res.head).toContain('error="invalid_token"');
    expect(res.body).toBe("");
  });
});
