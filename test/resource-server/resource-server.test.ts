import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  type AuthInfo,
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
  type Revision,
} from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";
import { REVISIONS } from "../../src/shared/revision.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { newKey, startIssuer, type TestIssuer } from "./fixtures.js";

const RESOURCE = "https://mcp.example.com/api";
const METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/api";

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.close();
});

function challengeOf(res: Response) {
  const header = res.headers.get("www-authenticate");
  expect(header, "WWW-Authenticate present").not.toBeNull();
  const challenges = parseWWWAuthenticate(header!);
  expect(challenges).toHaveLength(1);
  expect(challenges[0]!.scheme).toBe("Bearer");
  return { ...challenges[0]!.params };
}

describe.each(REVISIONS)("the gate, revision %s", (revision: Revision) => {
  let gate: ResourceServer;
  let server: ListeningServer;
  let resourceHits = 0;

  beforeAll(async () => {
    gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      scopesSupported: ["notes:read", "notes:write"],
      scopeHierarchy: { "notes:admin": ["notes:write"], "notes:write": ["notes:read"] },
      revision,
      verifier: cachedVerifier(
        jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
      ),
    });
    const ok = async (_r: Request, auth: AuthInfo) => {
      resourceHits++;
      return Response.json({ secret: "resource data", subject: auth.subject, scopes: auth.scopes });
    };
    const read = gate.requireBearer({ scopes: ["notes:read"] });
    const write = gate.requireBearer({ scopes: ["notes:write"] });
    const both = gate.requireBearer({ scopes: ["notes:read", "notes:write", "notes:export"] });
    // Scopes computed from the request (2026-07-28 allows it): ?folder=x needs folder:x too.
    const dynamic = gate.requireBearer({
      scopes: (request) => {
        const folder = new URL(request.url).searchParams.get("folder");
        return folder ? ["notes:read", `folder:${folder}`] : ["notes:read"];
      },
    });
    server = await listen(async (request) => {
      if (gate.handles(request)) return gate.metadataResponse(request);
      const path = new URL(request.url).pathname;
      if (path === "/api/read") return read(request, ok);
      if (path === "/api/write") return write(request, ok);
      if (path === "/api/both") return both(request, ok);
      if (path === "/api/dynamic") return dynamic(request, ok);
      return new Response(null, { status: 404 });
    });
  });
  afterAll(async () => {
    await server.close();
  });

  const call = (path: string, init: RequestInit = {}) => fetch(`${server.url}${path}`, init);
  const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
    ...init,
    headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
  });
  const sign = (claims: Record<string, unknown> = {}) =>
    issuer.sign({ sub: "alice", client_id: "c1", aud: RESOURCE, scope: "notes:read", ...claims });

  async function expectNoResource(res: Response) {
    const text = await res.text();
    expect(text).not.toContain("resource data");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("access-control-expose-headers")).toMatch(/www-authenticate/i);
  }

  it("rule: no credentials → 401 with resource_metadata and scope, and NO error (RFC 6750 §3.1)", async () => {
    const before = resourceHits;
    const res = await call("/api/read");
    expect(res.status).toBe(401);
    expect(challengeOf(res)).toEqual({ resource_metadata: METADATA_URL, scope: "notes:read" });
    await expectNoResource(res);
    expect(resourceHits).toBe(before);
  });

  it("rule: another auth scheme counts as no credentials (401 without error)", async () => {
    const res = await call("/api/read", { headers: { authorization: "Basic YWxpY2U6cHc=" } });
    expect(res.status).toBe(401);
    expect(challengeOf(res).error).toBeUndefined();
  });

  it("a valid token with enough scope reaches the resource with AuthInfo (no raw token)", async () => {
    const token = await sign();
    const res = await call("/api/read", bearer(token));
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({ subject: "alice", scopes: ["notes:read"] });
    expect(JSON.stringify(body)).not.toContain(token);
  });

  it("rule: the scheme name is case-insensitive", async () => {
    const token = await sign();
    const res = await call("/api/read", { headers: { authorization: `bEARER ${token}` } });
    expect(res.status).toBe(200);
  });

  it.each([
    ["expired", { exp: Math.floor(Date.now() / 1000) - 120 }],
    ["not yet valid", { nbf: Math.floor(Date.now() / 1000) + 600 }],
    ["foreign issuer", { iss: "https://evil.example.com" }],
    ["wrong audience", { aud: "https://other.example.com/api" }],
    ["audience that merely starts with ours", { aud: `${RESOURCE}-evil` }],
    ["audience that is a sub-path of ours", { aud: `${RESOURCE}/sub` }],
    ["audience with a trailing slash", { aud: `${RESOURCE}/` }],
    ["audience differing in case only", { aud: RESOURCE.toUpperCase() }],
    ["no audience", { aud: undefined }],
  ])("rule: %s token → 401 invalid_token with resource_metadata", async (_name, claims) => {
    const token = await sign(claims);
    const res = await call("/api/read", bearer(token));
    expect(res.status).toBe(401);
    const c = challengeOf(res);
    expect(c.error).toBe("invalid_token");
    expect(c.resource_metadata).toBe(METADATA_URL);
    await expectNoResource(res);
  });

  it("rule: a token signed by an unknown key → 401 invalid_token", async () => {
    const { privateKey } = await newKey("k1");
    const res = await call("/api/read", bearer(await issuer.sign({ aud: RESOURCE }, { key: privateKey })));
    expect(res.status).toBe(401);
    expect(challengeOf(res).error).toBe("invalid_token");
  });

  it("rule: a token that is not a JWT at all → 401 invalid_token", async () => {
    const res = await call("/api/read", bearer("not-a-jwt"));
    expect(res.status).toBe(401);
    expect(challengeOf(res).error).toBe("invalid_token");
  });

  it("rule: a token in the query string is refused with 400 invalid_request and never validated", async () => {
    const token = await sign();
    const before = resourceHits;
    for (const url of [`/api/read?access_token=${token}`, `/api/read?x=1&access_token=${token}`]) {
      const res = await call(url);
      expect(res.status).toBe(400);
      expect(challengeOf(res).error).toBe("invalid_request");
      await expectNoResource(res);
    }
    // Even with a valid header alongside.
    const both = await call(`/api/read?access_token=${token}`, bearer(token));
    expect(both.status).toBe(400);
    expect(resourceHits).toBe(before);
  });

  it("rule: a token in a form body is refused with 400 invalid_request", async () => {
    const token = await sign({ scope: "notes:write" });
    const res = await call("/api/write", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `note=x&access_token=${token}`,
    });
    expect(res.status).toBe(400);
    expect(challengeOf(res).error).toBe("invalid_request");
  });

  it("a form body without a token still reaches the handler intact", async () => {
    let seen = "";
    const handler = gate.requireBearer({ scopes: ["notes:write"] });
    const token = await sign({ scope: "notes:write" });
    const res = await handler(
      new Request(`${RESOURCE}/write`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
        body: "note=hello",
      }),
      async (request) => {
        seen = await request.text();
        return new Response("ok");
      },
    );
    expect(res.status).toBe(200);
    expect(seen).toBe("note=hello");
  });

  it.each([
    ["Bearer"],
    ["Bearer "],
    ["Bearer a b"],
    ["Bearer tok,en"],
    ['Bearer "quoted"'],
    ["Bearer=abc"],
    ["(garbage)"],
  ])("rule: malformed Authorization header %j → 400 invalid_request", async (header) => {
    const res = await call("/api/read", { headers: { authorization: header } });
    expect(res.status).toBe(400);
    expect(challengeOf(res).error).toBe("invalid_request");
  });

  it("rule: two Authorization headers → 400 invalid_request", async () => {
    const token = await sign();
    const headers = new Headers();
    headers.append("authorization", `Bearer ${token}`);
    headers.append("authorization", `Bearer ${token}`);
    const res = await call("/api/read", { headers });
    expect(res.status).toBe(400);
  });

  it("rule: a token the cache holds is still refused in a malformed header, and only it is admitted", async () => {
    const token = await sign();
    expect((await call("/api/read", bearer(token))).status).toBe(200);
    const hits = resourceHits;
    const twice = new Headers();
    twice.append("authorization", `Bearer ${token}`);
    twice.append("authorization", `Bearer ${token}`);
    expect((await call("/api/read", { headers: twice })).status).toBe(400);
    for (const header of [`Bearer ${token} x`, `Bearer ${token}"`, `Bearer ${token},`]) {
      const res = await call("/api/read", { headers: { authorization: header } });
      expect(res.status).toBe(400);
      expect(challengeOf(res).error).toBe("invalid_request");
    }
    // Another string (the cached token with padding added, or a character of its signature
    // changed) is a token of its own: verified, and refused.
    const changed = token.at(-10) === "A" ? "B" : "A";
    for (const other of [`${token}=`, `${token.slice(0, -10)}${changed}${token.slice(-9)}`]) {
      const res = await call("/api/read", bearer(other));
      expect(res.status).toBe(401);
      expect(challengeOf(res).error).toBe("invalid_token");
    }
    expect(resourceHits).toBe(hits);
    expect((await call("/api/read", bearer(token))).status).toBe(200);
  });

  it("rule: too few scopes → 403 insufficient_scope listing every needed scope in ONE challenge", async () => {
    const token = await sign({ scope: "notes:read" });
    const res = await call("/api/both", bearer(token));
    expect(res.status).toBe(403);
    const c = challengeOf(res);
    expect(c.error).toBe("insufficient_scope");
    expect(c.resource_metadata).toBe(METADATA_URL);
    expect(c.error_description).toBeTruthy();
    const scopes = c.scope!.split(" ");
    expect(scopes).toEqual(expect.arrayContaining(["notes:read", "notes:write", "notes:export"]));
    await expectNoResource(res);
  });

  it("rule: the scope hierarchy decides sufficiency (notes:write covers notes:read; admin covers both)", async () => {
    expect((await call("/api/read", bearer(await sign({ scope: "notes:write" })))).status).toBe(200);
    expect((await call("/api/write", bearer(await sign({ scope: "notes:admin" })))).status).toBe(200);
    expect((await call("/api/write", bearer(await sign({ scope: "notes:read" })))).status).toBe(403);
  });

  it("rule: scopes computed from the request are all emitted together", async () => {
    const res = await call("/api/dynamic?folder=work", bearer(await sign({ scope: "notes:read" })));
    expect(res.status).toBe(403);
    expect(challengeOf(res).scope!.split(" ")).toEqual(expect.arrayContaining(["notes:read", "folder:work"]));
    const anonymous = await call("/api/dynamic?folder=work");
    expect(challengeOf(anonymous).scope).toBe("notes:read folder:work");
  });

  it("rule: offline_access never appears in a challenge", async () => {
    const res = await call("/api/write", bearer(await sign({ scope: "notes:read offline_access" })));
    expect(res.status).toBe(403);
    expect(challengeOf(res).scope).not.toContain("offline_access");
  });

  if (revision === "2026-07-28") {
    it("2026-07-28: the 403 scope is exactly the operation's needed scopes (granted ones need not be repeated)", async () => {
      const res = await call("/api/write", bearer(await sign({ scope: "notes:read profile" })));
      expect(challengeOf(res).scope).toBe("notes:write");
    });
  } else {
    it("2025-11-25 (recommended strategy): the 403 scope repeats granted relevant scopes with the new ones", async () => {
      const res = await call("/api/write", bearer(await sign({ scope: "notes:read profile" })));
      const scopes = challengeOf(res).scope!.split(" ");
      expect(scopes).toEqual(expect.arrayContaining(["notes:write", "notes:read"]));
      // Unrelated granted scopes are not this resource's business.
      expect(scopes).not.toContain("profile");
    });
  }

  it("CORS: challenges expose WWW-Authenticate to browser clients", async () => {
    const res = await call("/api/read", { headers: { origin: "https://app.example" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate");
  });
});

describe("gate edge cases", () => {
  it("rule: the gate re-checks the audience whatever the verifier says", async () => {
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      verifier: {
        verify: async () => ({
          subject: "x",
          clientId: "c",
          scopes: [],
          audience: ["https://elsewhere.example"],
          expiresAt: Date.now() / 1000 + 60,
          issuer: issuer.issuer,
        }),
      },
    });
    const res = await gate.requireBearer()(
      new Request(`${RESOURCE}/x`, { headers: { authorization: "Bearer abc" } }),
      async () => new Response("leak"),
    );
    expect(res.status).toBe(401);
    expect(await res.text()).not.toContain("leak");
  });

  it("rule: an unreachable JWKS is 503 temporarily_unavailable, not a 401 that would send clients to re-authorize", async () => {
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      verifier: jwtVerifier({
        issuer: issuer.issuer,
        audience: RESOURCE,
        jwksUri: "http://127.0.0.1:1/jwks",
      }),
    });
    const token = await issuer.sign({ aud: RESOURCE });
    const res = await gate.requireBearer()(
      new Request(`${RESOURCE}/x`, { headers: { authorization: `Bearer ${token}` } }),
      async () => new Response("leak"),
    );
    expect(res.status).toBe(503);
    expect(res.headers.get("www-authenticate")).toBeNull();
    expect(await res.text()).not.toContain("leak");
  });

  it("a verifier that throws something unexpected gives a bare 500 and logs no token", async () => {
    const logged: string[] = [];
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      logger: {
        info: (e, f) => logged.push(JSON.stringify([e, f])),
        warn: (e, f) => logged.push(JSON.stringify([e, f])),
        error: (e, f) => logged.push(JSON.stringify([e, f])),
      },
      verifier: {
        verify: async (t) => {
          throw new Error(`boom ${t}`);
        },
      },
    });
    const res = await gate.requireBearer()(
      new Request(`${RESOURCE}/x`, { headers: { authorization: "Bearer sekrit-token" } }),
      async () => new Response("leak"),
    );
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text).not.toContain("sekrit");
    expect(logged.join("\n")).not.toContain("sekrit");
  });

  it("a verifier's peek is asked once per request: a miss goes to verify, a hit is decided at once", async () => {
    const held = new Set<string>();
    const peeked: string[] = [];
    const verified: string[] = [];
    const answer = (token: string): AuthInfo => ({
      subject: token,
      clientId: "c",
      scopes: ["notes:read"],
      audience: [RESOURCE],
      expiresAt: Date.now() / 1000 + 60,
      issuer: issuer.issuer,
    });
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      verifier: {
        peek: (token) => {
          peeked.push(token);
          return held.has(token) ? answer(token) : undefined;
        },
        verify: async (token) => {
          verified.push(token);
          if (token !== "good") throw new OAuthError("invalid_token");
          held.add(token);
          return answer(token);
        },
      },
    });
    const judge = gate.judge({ scopes: ["notes:read"] });
    const head = (authorization: string) => ({
      url: "/api/x",
      method: "GET",
      header: (name: string) => (name === "authorization" ? authorization : null),
      hasBody: false,
      bodyText: async () => "",
    });
    // Cold: one lookup, then verify.
    const cold = judge(head("Bearer good"));
    expect(cold).toBeInstanceOf(Promise);
    expect((await cold).ok).toBe(true);
    expect(peeked).toEqual(["good"]);
    expect(verified).toEqual(["good"]);
    // Warm: one lookup, no verify, a synchronous verdict.
    expect(judge(head("Bearer good"))).toMatchObject({ ok: true, auth: { subject: "good" } });
    expect(peeked).toEqual(["good", "good"]);
    // A token refused by verify is refused on every request, each time verified again.
    for (let i = 0; i < 2; i++) {
      const refused = await judge(head("Bearer bad"));
      expect(refused.ok).toBe(false);
    }
    expect(verified).toEqual(["good", "bad", "bad"]);
    expect(peeked).toEqual(["good", "good", "bad", "bad"]);
    // The fast path looked up another string than the token extracted ("good " with its trailing
    // space): that lookup does not stand for the token's, which is looked up itself.
    peeked.length = 0;
    expect(judge(head("Bearer good "))).toMatchObject({ ok: true, auth: { subject: "good" } });
    expect(peeked).toEqual(["good ", "good"]);
    // A scheme in other case skips the fast path: looked up once, when verifying.
    peeked.length = 0;
    expect(judge(head("bEARER good"))).toMatchObject({ ok: true, auth: { subject: "good" } });
    expect(peeked).toEqual(["good"]);
    expect(verified).toEqual(["good", "bad", "bad"]);
  });

  it("authenticate / challengeResponse can be used without the middleware", async () => {
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [issuer.issuer],
      verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
    });
    const token = await issuer.sign({ aud: RESOURCE, scope: "a" });
    const auth = await gate.authenticate(
      new Request(`${RESOURCE}/x`, { headers: { authorization: `Bearer ${token}` } }),
      ["a"],
    );
    expect(auth.scopes).toEqual(["a"]);
    expect(Object.values(auth)).not.toContain(token);
    try {
      await gate.authenticate(
        new Request(`${RESOURCE}/x`, { headers: { authorization: `Bearer ${token}` } }),
        ["b"],
      );
      expect.unreachable();
    } catch (error) {
      const res = gate.challengeResponse(error);
      expect(res.status).toBe(403);
      expect(challengeOf(res).scope).toBe("b");
    }
  });
});
