/**
 * gatehouse-auth/hono withBearerAuth: the gate around one Hono route handler (no middleware chain).
 * Pins that it keeps every rule of the gate (challenges, header-only tokens, DPoP-bound tokens
 * refused as Bearer, scopes), that the handler's own answer passes through, and that a warm
 * request is answered in the same call as Hono's `fetch` (no promise), which is what makes the
 * form cheaper than the middleware.
 */
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

const RESOURCE = "https://mcp.example.com";

let issuer: TestIssuer;
let gate: ResourceServer;
let readToken: string;
beforeAll(async () => {
  issuer = await startIssuer();
  gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
    ),
  });
  readToken = await issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read" });
});
afterAll(async () => {
  await issuer.close();
});

/** An app whose one route is protected by withBearerAuth; `ran` counts the handler's runs. */
function appWith(scopes: Parameters<typeof withBearerAuth>[1]["scopes"] = ["notes:read"]) {
  const seen = { ran: 0, subject: undefined as string | undefined };
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  app.get(
    "/notes/:id",
    withBearerAuth(gate, { scopes }, (c) => {
      seen.ran++;
      seen.subject = c.get("auth").subject;
      return c.json({ id: c.req.param("id"), subject: c.get("auth").subject }, 201);
    }),
  );
  return { app, seen };
}

const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
  new Request(`${RESOURCE}${path}`, { method, headers });

describe("withBearerAuth keeps the gate's rules", () => {
  it("a valid token reaches the handler, whose own answer (status, body, params) is returned", async () => {
    const { app, seen } = appWith();
    const res = await app.fetch(get("/notes/7", { authorization: `Bearer ${readToken}` }));
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ id: "7", subject: "alice" });
    expect(seen).toEqual({ ran: 1, subject: "alice" });
  });

  it("rule: no token → 401 challenge without error code naming the metadata, handler not run", async () => {
    const { app, seen } = appWith();
    const res = await app.fetch(get("/notes/1"));
    expect(res.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
    expect(challenge?.scheme.toLowerCase()).toBe("bearer");
    expect(challenge?.params.error).toBeUndefined();
    expect(challenge?.params.resource_metadata).toBe(`${RESOURCE}/.well-known/oauth-protected-resource`);
    expect(seen.ran).toBe(0);
  });

  it("rule: a token anywhere but the Authorization header is not a token (401), in the query it is 400", async () => {
    const { app, seen } = appWith();
    const elsewhere = await app.fetch(
      get("/notes/1", { cookie: `access_token=${readToken}`, "x-access-token": readToken }),
    );
    expect(elsewhere.status).toBe(401);
    const inQuery = await app.fetch(get(`/notes/1?access_token=${readToken}`));
    expect(inQuery.status).toBe(400);
    expect(seen.ran).toBe(0);
  });

  it("rule: too few scopes → 403 insufficient_scope; a scopes function gets the request", async () => {
    const { app, seen } = appWith(["notes:write"]);
    const res = await app.fetch(get("/notes/1", { authorization: `Bearer ${readToken}` }));
    expect(res.status).toBe(403);
    expect(parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "")[0]?.params.error).toBe(
      "insufficient_scope",
    );
    let askedFor = "";
    const byRequest = appWith((request) => {
      askedFor = new URL(request.url).pathname;
      return ["notes:read"];
    });
    const ok = await byRequest.app.fetch(get("/notes/2", { authorization: `Bearer ${readToken}` }));
    expect(ok.status).toBe(201);
    expect(askedFor).toBe("/notes/2");
    expect(seen.ran).toBe(0);
  });

  it("rule: a DPoP-bound token presented with the Bearer scheme → 401 invalid_token (RFC 9449 §7.2)", async () => {
    const { app, seen } = appWith();
    const bound = await issuer.sign({
      aud: RESOURCE,
      scope: "notes:read",
      cnf: { jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" },
    });
    for (let i = 0; i < 2; i++) {
      // Twice: the second time the verification is held by the cache (the warm path).
      const res = await app.fetch(get("/notes/1", { authorization: `Bearer ${bound}` }));
      expect(res.status).toBe(401);
      expect(parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "")[0]?.params.error).toBe(
        "invalid_token",
      );
    }
    expect(seen.ran).toBe(0);
  });

  it("rule: a HEAD challenge has the headers and no body", async () => {
    const { app } = appWith();
    const res = await app.fetch(get("/notes/1", {}, "HEAD"));
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect(await res.text()).toBe("");
  });
});

describe("withBearerAuth answers a warm request in the same call", () => {
  it("once the verification is held, fetch returns the handler's Response itself, not a promise", async () => {
    const { app, seen } = appWith();
    const request = () => get("/notes/3", { authorization: `Bearer ${readToken}` });
    // The first verification of a fresh token may wait (signature check, JWKS).
    const fresh = await issuer.sign({ aud: RESOURCE, sub: "bob", scope: "notes:read" });
    const first = app.fetch(get("/notes/3", { authorization: `Bearer ${fresh}` }));
    expect((await first).status).toBe(201);
    await app.fetch(request());
    const warm = app.fetch(request());
    expect(warm).toBeInstanceOf(Response);
    expect((warm as Response).status).toBe(201);
    const refused = app.fetch(get("/notes/3"));
    expect(refused).toBeInstanceOf(Response);
    expect((refused as Response).status).toBe(401);
    expect(seen.ran).toBe(3);
  });

  it("the middleware form gives the same answers on the same requests", async () => {
    const wrapped = appWith().app;
    const middleware = new Hono<{ Variables: BearerAuthVariables }>();
    middleware.use("/notes/*", bearerAuth(gate, { scopes: ["notes:read"] }));
    middleware.get("/notes/:id", (c) =>
      c.json({ id: c.req.param("id"), subject: c.get("auth").subject }, 201),
    );
    const noScope = await issuer.sign({ aud: RESOURCE, scope: "other" });
    const cases: Array<[string, Record<string, string>]> = [
      ["/notes/1", { authorization: `Bearer ${readToken}` }],
      ["/notes/1", {}],
      ["/notes/1", { authorization: "Bearer a b" }],
      ["/notes/1", { authorization: `Bearer ${noScope}` }],
      [`/notes/1?access_token=${readToken}`, {}],
    ];
    for (const [path, headers] of cases) {
      const [a, b] = await Promise.all([
        wrapped.fetch(get(path, headers)),
        middleware.fetch(get(path, headers)),
      ]);
      expect(a.status, path).toBe(b.status);
      expect(a.headers.get("www-authenticate"), path).toBe(b.headers.get("www-authenticate"));
      expect(await a.text(), path).toBe(await b.text());
    }
  });
});
