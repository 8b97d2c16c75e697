/**
 * `requireBearer` on a warm token (the verifier already holds its verification): the verdict is
 * synchronous and acted on without awaiting it (issue 25's hot path), and the middleware keeps its
 * promise contract there too: a `next` that throws synchronously reaches the caller as a
 * rejection, never as a throw out of the middleware call; a scopes function still gets the request,
 * and its throw stays the gate's own 500.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "./fixtures.js";

const RESOURCE = "https://notes.example/mcp";
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

const request = (folder = "a") =>
  new Request(`https://notes.example/mcp?folder=${folder}`, {
    headers: { authorization: `Bearer ${token}` },
  });

describe("requireBearer with a warm token", () => {
  it("answers through next once warm, and the verdict is synchronous by then", async () => {
    const protect = gate.requireBearer({ scopes: ["notes:read"] });
    const cold = await protect(request(), async (_r, auth) => Response.json({ sub: auth.subject }));
    expect(await cold.json()).toEqual({ sub: "alice" });
    const verdict = gate.judge({ scopes: ["notes:read"] })({
      method: "GET",
      url: "https://notes.example/mcp",
      headers: { authorization: `Bearer ${token}` },
    } as never);
    expect(verdict instanceof Promise).toBe(false);
    const warm = protect(request(), async (_r, auth) => Response.json({ sub: auth.subject }));
    expect(warm).toBeInstanceOf(Promise);
    expect(await (await warm).json()).toEqual({ sub: "alice" });
  });

  it("a next that throws synchronously is a rejection, not a throw", async () => {
    const protect = gate.requireBearer({ scopes: ["notes:read"] });
    await protect(request(), async () => new Response("warm-up"));
    const thrown = new Error("handler broke");
    let result: Promise<Response> | undefined;
    expect(() => {
      result = protect(request(), () => {
        throw thrown;
      });
    }).not.toThrow();
    await expect(result).rejects.toBe(thrown);
  });

  it("a scopes function gets the request; its throw is the gate's own 500, never a throw", async () => {
    const seen: string[] = [];
    const protect = gate.requireBearer({
      scopes: (r) => {
        const folder = new URL(r.url).searchParams.get("folder") ?? "";
        seen.push(folder);
        if (folder === "boom") throw new Error("scopes broke");
        return ["notes:read"];
      },
    });
    const ok = await protect(request("x"), async () => new Response("fine"));
    expect(await ok.text()).toBe("fine");
    expect(seen).toContain("x");
    let result: Promise<Response> | undefined;
    expect(() => {
      result = protect(request("boom"), async () => new Response("never"));
    }).not.toThrow();
    const failed = await result!;
    expect(failed.status).toBe(500);
    expect(await failed.text()).not.toContain("scopes broke");
  });

  it("an insufficient scope is still the challenge, never next", async () => {
    const protect = gate.requireBearer({ scopes: ["notes:write"] });
    let called = false;
    const res = await protect(request(), async () => {
      called = true;
      return new Response("never");
    });
    expect(called).toBe(false);
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
  });
});
