/**
 * onInsufficientScope: a co-hosted authorization server learns which verified token was refused
 * for too few scopes (so the next refresh of that grant can answer invalid_grant, the MCP SDK v1
 * step-up interop rule). Called once per 403 insufficient_scope, with the token's facts (jti as
 * tokenId) and the operation's scopes; never awaited on the response path; its failures are caught
 * and logged without token material.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { nodeRequireBearer } from "../../src/http/node.js";
import {
  type AuthInfo,
  cachedVerifier,
  createResourceServer,
  InsufficientScopeError,
  jwtVerifier,
  type ResourceServerOptions,
} from "../../src/resource-server/index.js";
import type { Logger } from "../../src/shared/log.js";
import { startIssuer, type TestIssuer } from "./fixtures.js";

const RESOURCE = "https://mcp.example.com/api";

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.close();
});

interface Call {
  auth: AuthInfo;
  required: readonly string[];
}

function recordingLogger() {
  const lines: string[] = [];
  const record = (level: string) => (event: string, fields?: Record<string, unknown>) => {
    lines.push(JSON.stringify({ level, event, ...fields }));
  };
  const logger: Logger = { info: record("info"), warn: record("warn"), error: record("error") };
  return { logger, lines };
}

function gateWith(onInsufficientScope: ResourceServerOptions["onInsufficientScope"], logger?: Logger) {
  return createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    scopeHierarchy: { "notes:write": ["notes:read"] },
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwksUri: issuer.jwksUri }),
    ),
    onInsufficientScope,
    logger,
  });
}

const sign = (scope: string, jti = "tok-1") => issuer.sign({ aud: RESOURCE, sub: "alice", scope, jti });
const requestWith = (token?: string) =>
  new Request(`${RESOURCE}/notes`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
const ok = async () => new Response("resource data");

describe("onInsufficientScope", () => {
  it("is called once per 403 insufficient_scope with the verified token (tokenId = jti) and the needed scopes", async () => {
    const calls: Call[] = [];
    const gate = gateWith((auth, required) => {
      calls.push({ auth, required });
    });
    const protect = gate.requireBearer({ scopes: ["notes:read", "notes:export"] });
    const token = await sign("notes:read", "grant-9.at-3");
    const res = await protect(requestWith(token), ok);
    expect(res.status).toBe(403);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.auth).toMatchObject({
      subject: "alice",
      tokenId: "grant-9.at-3",
      scopes: ["notes:read"],
    });
    expect(calls[0]!.required).toEqual(["notes:read", "notes:export"]);
    // The hook gets the token's facts, never the token itself.
    expect(JSON.stringify(calls[0])).not.toContain(token);

    // A second refusal of the same token, now answered from the verification cache (warm path).
    expect((await protect(requestWith(token), ok)).status).toBe(403);
    expect(calls).toHaveLength(2);
  });

  it("is not called for a pass (also through the scope hierarchy), a 401 or a 400", async () => {
    const calls: Call[] = [];
    const gate = gateWith((auth, required) => {
      calls.push({ auth, required });
    });
    const protect = gate.requireBearer({ scopes: ["notes:read"] });
    expect((await protect(requestWith(await sign("notes:write")), ok)).status).toBe(200);
    expect((await protect(requestWith(), ok)).status).toBe(401);
    const foreign = await issuer.sign({ aud: "https://other.example", scope: "x" });
    expect((await protect(requestWith(foreign), ok)).status).toBe(401);
    expect((await protect(requestWith("not a token"), ok)).status).toBe(400);
    expect(calls).toHaveLength(0);
  });

  it("is not awaited: the 403 is answered while the hook is still pending", async () => {
    let finish: () => void = () => {};
    let started = 0;
    const gate = gateWith(() => {
      started++;
      return new Promise<void>((resolve) => {
        finish = resolve;
      });
    });
    const res = await gate.requireBearer({ scopes: ["notes:admin"] })(
      requestWith(await sign("notes:read")),
      ok,
    );
    expect(res.status).toBe(403);
    // Called before the answer was handed back (so a synchronous mark is in place first).
    expect(started).toBe(1);
    finish();
  });

  it("rule: a hook that throws or rejects changes nothing in the answer and is logged without token material", async () => {
    for (const failing of [
      (auth: AuthInfo) => {
        throw new Error(`store down for ${JSON.stringify(auth)}`);
      },
      async (auth: AuthInfo) => {
        throw new Error(`store down for ${JSON.stringify(auth)}`);
      },
    ]) {
      const { logger, lines } = recordingLogger();
      const gate = gateWith(failing, logger);
      const token = await sign("notes:read", "jti-secretish");
      const res = await gate.requireBearer({ scopes: ["notes:admin"] })(requestWith(token), ok);
      expect(res.status).toBe(403);
      expect(res.headers.get("www-authenticate")).toMatch(/insufficient_scope/);
      await new Promise((resolve) => setImmediate(resolve));
      const failure = lines.find((l) => l.includes("resource.on_insufficient_scope_failed"));
      expect(failure, lines.join("\n")).toBeDefined();
      const all = lines.join("\n");
      expect(all).not.toContain(token);
      // The error's message (which here embeds the AuthInfo) is not logged either, only its name.
      expect(all).not.toContain("store down");
      expect(all).not.toContain("jti-secretish");
    }
  });

  it("authenticate() calls it too when it throws InsufficientScopeError", async () => {
    const calls: Call[] = [];
    const gate = gateWith((auth, required) => {
      calls.push({ auth, required });
    });
    await expect(
      gate.authenticate(requestWith(await sign("notes:read")), ["notes:admin"]),
    ).rejects.toBeInstanceOf(InsufficientScopeError);
    expect(calls.map((c) => c.required)).toEqual([["notes:admin"]]);
  });

  it("rule: a non-function is a misconfiguration, refused at start-up", () => {
    expect(() => gateWith("notify" as unknown as ResourceServerOptions["onInsufficientScope"])).toThrow(
      /onInsufficientScope/,
    );
  });
});

describe("onInsufficientScope through the node fast path", () => {
  let server: Server | undefined;
  afterEach(async () => {
    const s = server;
    server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  });

  it("is called for a 403 written by nodeRequireBearer, cold and warm", async () => {
    const calls: Call[] = [];
    const gate = gateWith((auth, required) => {
      calls.push({ auth, required });
    });
    server = createServer(
      nodeRequireBearer(gate, { scopes: ["notes:admin"] }, (_req, res) => {
        res.end("resource data");
      }),
    );
    const s = server;
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()));
    const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}/notes`;
    const token = await sign("notes:read", "node-jti");
    for (let i = 0; i < 2; i++) {
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(403);
      await res.text();
    }
    expect(calls.map((c) => [c.auth.tokenId, c.required])).toEqual([
      ["node-jti", ["notes:admin"]],
      ["node-jti", ["notes:admin"]],
    ]);
  });
});
