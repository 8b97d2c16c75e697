/**
 * DNS-rebinding defence in the gate (hostile review finding): a request whose Host (or Origin, when
 * present) is not this resource's is refused with 403 before any token work, by default for a
 * loopback resource. Adapter-level cases (real servers, raw Host headers) are in
 * test/http/host-guard.test.ts; these pin the rule on the gate itself.
 */
import { describe, expect, it } from "vitest";
import {
  type AccessTokenVerifier,
  type AuthInfo,
  type BearerRequestHead,
  createResourceServer,
  HostNotAllowedError,
  type ResourceServerOptions,
} from "../../src/resource-server/index.js";

const LOOPBACK = "http://localhost:3000/mcp";
const PUBLIC = "https://mcp.example.com/mcp";

/** A verifier that accepts "good" for `resource` and counts every call (verify and peek). */
function countingVerifier(resource: string) {
  const calls = { verify: 0, peek: 0 };
  const auth = (): AuthInfo => ({
    subject: "alice",
    clientId: "c",
    scopes: ["notes:read"],
    audience: [resource],
    expiresAt: Math.floor(Date.now() / 1000) + 300,
    issuer: "https://as.example",
  });
  const verifier: AccessTokenVerifier = {
    async verify(token) {
      calls.verify++;
      if (token !== "good") throw new Error("unexpected token");
      return auth();
    },
    peek(token) {
      calls.peek++;
      return token === "good" ? auth() : undefined;
    },
  };
  return { verifier, calls };
}

function gateFor(resource: string, options: Partial<ResourceServerOptions> = {}) {
  const { verifier, calls } = countingVerifier(resource);
  const gate = createResourceServer({
    resource,
    authorizationServers: ["https://as.example"],
    verifier,
    ...options,
  });
  let ran = 0;
  const protect = gate.requireBearer({ scopes: ["notes:read"] });
  const ask = async (url: string, headers: Record<string, string> = {}) => {
    const res = await protect(
      new Request(url, { headers: { authorization: "Bearer good", ...headers } }),
      async () => {
        ran++;
        return new Response("resource data");
      },
    );
    return { status: res.status, body: await res.text(), headers: res.headers };
  };
  return {
    gate,
    calls,
    ask,
    get ran() {
      return ran;
    },
  };
}

describe("Host allow-list, on by default for a loopback resource", () => {
  it("rule: Host evil.example with a valid token → 403, no token work, nothing of the resource", async () => {
    const g = gateFor(LOOPBACK);
    for (const url of [
      "http://evil.example/mcp",
      "http://evil.example:3000/mcp",
      "http://localhost:3001/mcp",
    ]) {
      const res = await g.ask(url);
      expect(res.status, url).toBe(403);
      expect(res.body).not.toContain("resource data");
      // Nothing that helps a rebinding page: no challenge, no metadata URL, no resource URI.
      expect(res.headers.get("www-authenticate")).toBeNull();
      expect(res.body).not.toContain("localhost");
      expect(res.headers.get("cache-control")).toBe("no-store");
    }
    expect(g.calls).toEqual({ verify: 0, peek: 0 });
    expect(g.ran).toBe(0);
  });

  it("rule: a rebinding request without a token is 403 too, not a 401 challenge naming the metadata", async () => {
    const g = gateFor(LOOPBACK);
    const res = await g.gate.requireBearer()(new Request("http://evil.example:3000/mcp"), async () => {
      throw new Error("handler must not run");
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("www-authenticate")).toBeNull();
  });

  it("the resource's own host:port and its loopback aliases on the same port are allowed", async () => {
    const g = gateFor(LOOPBACK);
    for (const url of [
      "http://localhost:3000/mcp",
      "http://LOCALHOST:3000/mcp",
      "http://127.0.0.1:3000/mcp",
      "http://[::1]:3000/mcp",
    ]) {
      expect((await g.ask(url)).status, url).toBe(200);
    }
    expect(g.ran).toBe(4);
  });

  it("a loopback resource on the scheme's default port allows Host with and without the port", async () => {
    const g = gateFor("http://127.0.0.1/api");
    expect((await g.ask("http://127.0.0.1/api")).status).toBe(200);
    expect((await g.ask("http://localhost:80/api")).status).toBe(200);
    expect((await g.ask("http://127.0.0.1:8080/api")).status).toBe(403);
  });

  it("rule: a cross-origin Origin is refused; the resource's own origins are allowed", async () => {
    const g = gateFor(LOOPBACK);
    for (const origin of ["http://evil.example", "http://localhost:3001", "https://localhost:3000", "null"]) {
      const res = await g.ask("http://localhost:3000/mcp", { origin });
      expect(res.status, origin).toBe(403);
      expect(res.body).not.toContain("resource data");
    }
    expect(g.calls).toEqual({ verify: 0, peek: 0 });
    for (const origin of ["http://localhost:3000", "http://127.0.0.1:3000", "http://[::1]:3000"]) {
      expect((await g.ask("http://localhost:3000/mcp", { origin })).status, origin).toBe(200);
    }
  });

  it("rule: the check runs before a scopes function (no request work for a rebinding request)", async () => {
    const { verifier } = countingVerifier(LOOPBACK);
    const gate = createResourceServer({
      resource: LOOPBACK,
      authorizationServers: ["https://as.example"],
      verifier,
    });
    let computed = 0;
    const protect = gate.requireBearer({
      scopes: () => {
        computed++;
        return ["notes:read"];
      },
    });
    const res = await protect(
      new Request("http://evil.example:3000/mcp", { headers: { authorization: "Bearer good" } }),
      async () => new Response("resource data"),
    );
    expect(res.status).toBe(403);
    expect(computed).toBe(0);
  });

  it("authenticate and verifyAccessToken refuse too; challengeResponse answers 403", async () => {
    const g = gateFor(LOOPBACK);
    const request = new Request("http://evil.example:3000/mcp", {
      headers: { authorization: "Bearer good" },
    });
    await expect(g.gate.authenticate(request, ["notes:read"])).rejects.toBeInstanceOf(HostNotAllowedError);
    await expect(g.gate.verifyAccessToken(request)).rejects.toBeInstanceOf(HostNotAllowedError);
    const error = await g.gate.authenticate(request).catch((e: unknown) => e);
    expect(g.gate.challengeResponse(error).status).toBe(403);
    expect(g.calls).toEqual({ verify: 0, peek: 0 });
  });

  it("judge: the head's host is checked; without one, its Host header", () => {
    const g = gateFor(LOOPBACK);
    const check = g.gate.judge({ scopes: ["notes:read"] });
    const head = (host: string | undefined, hostHeader: string | null): BearerRequestHead => ({
      url: "/mcp",
      ...(host === undefined ? {} : { host }),
      header: (name) => (name === "authorization" ? "Bearer good" : name === "host" ? hostHeader : null),
      hasBody: false,
      bodyText: async () => "",
    });
    const status = (verdict: ReturnType<typeof check>) => {
      if (verdict instanceof Promise) throw new Error("expected a synchronous verdict");
      return verdict.ok ? 200 : verdict.challenge.status;
    };
    expect(status(check(head("localhost:3000", "evil.example")))).toBe(200);
    expect(status(check(head("evil.example", "localhost:3000")))).toBe(403);
    expect(status(check(head(undefined, "127.0.0.1:3000")))).toBe(200);
    expect(status(check(head(undefined, "evil.example")))).toBe(403);
    // No host at all: refused (fail closed).
    expect(status(check(head(undefined, null)))).toBe(403);
  });
});

describe("every request is judged on its own Host and Origin", () => {
  it("rule: an allowed Host or Origin lets nothing else through on the requests after it", () => {
    const g = gateFor(LOOPBACK);
    const check = g.gate.judge({ scopes: ["notes:read"] });
    const status = (host: string | null, origin: string | null = null) => {
      const fields: Record<string, string | null> = { authorization: "Bearer good", host, origin };
      const verdict = check({
        url: "/mcp",
        header: (name) => fields[name] ?? null,
        hasBody: false,
        bodyText: async () => "",
      });
      if (verdict instanceof Promise) throw new Error("expected a synchronous verdict");
      return verdict.ok ? 200 : verdict.challenge.status;
    };
    const own = "localhost:3000";
    const ownOrigin = "http://localhost:3000";
    const answers = [
      status(own),
      status("evil.example:3000"),
      status(own),
      status(null),
      status("LOCALHOST:3000"),
      status("localhost:3001"),
      status(own, ownOrigin),
      status(own, "http://evil.example:3000"),
      status(own, ownOrigin),
      status(own, "HTTP://LOCALHOST:3000"),
      status(own, "null"),
      status("evil.example:3000", ownOrigin),
    ];
    expect(answers).toEqual([200, 403, 200, 403, 200, 403, 200, 403, 200, 200, 403, 403]);
  });
});

describe("Host allow-list off by default elsewhere, configurable everywhere", () => {
  it("a non-loopback resource is unaffected by default (Host and Origin are not checked)", async () => {
    const g = gateFor(PUBLIC);
    expect((await g.ask("http://evil.example/mcp")).status).toBe(200);
    expect((await g.ask("https://mcp.example.com/mcp", { origin: "https://evil.example" })).status).toBe(200);
  });

  it("an explicit allow-list is honoured (case-insensitive host:port) on a non-loopback resource", async () => {
    const g = gateFor(PUBLIC, { allowedHosts: ["mcp.example.com", "MCP.internal:8443"] });
    expect((await g.ask("https://mcp.example.com/mcp")).status).toBe(200);
    expect((await g.ask("https://mcp.internal:8443/mcp")).status).toBe(200);
    expect((await g.ask("https://evil.example/mcp")).status).toBe(403);
    expect((await g.ask("https://mcp.internal:9443/mcp")).status).toBe(403);
    // Origins default to the allowed hosts on the resource's scheme.
    expect((await g.ask("https://mcp.example.com/mcp", { origin: "https://mcp.example.com" })).status).toBe(
      200,
    );
    expect((await g.ask("https://mcp.example.com/mcp", { origin: "https://evil.example" })).status).toBe(403);
  });

  it("an explicit allow-list replaces the loopback defaults", async () => {
    const g = gateFor(LOOPBACK, { allowedHosts: ["localhost:3000"] });
    expect((await g.ask("http://localhost:3000/mcp")).status).toBe(200);
    expect((await g.ask("http://127.0.0.1:3000/mcp")).status).toBe(403);
  });

  it("allowedOrigins alone checks Origin on a non-loopback resource; a request without Origin passes", async () => {
    const g = gateFor(PUBLIC, { allowedOrigins: ["https://app.example.com"] });
    expect((await g.ask(PUBLIC)).status).toBe(200);
    expect((await g.ask(PUBLIC, { origin: "https://APP.example.com" })).status).toBe(200);
    expect((await g.ask(PUBLIC, { origin: "https://evil.example" })).status).toBe(403);
    // Host is still not checked: only the Origin list was configured.
    expect((await g.ask("https://evil.example/mcp")).status).toBe(200);
  });

  it("allowedOrigins extends what a loopback resource accepts from browsers (e.g. a local inspector)", async () => {
    const g = gateFor(LOOPBACK, { allowedOrigins: ["http://localhost:6274"] });
    expect((await g.ask("http://localhost:3000/mcp", { origin: "http://localhost:6274" })).status).toBe(200);
    // The list replaces the default origins; Host is still checked against the defaults.
    expect((await g.ask("http://localhost:3000/mcp", { origin: "http://localhost:3000" })).status).toBe(403);
    expect((await g.ask("http://evil.example:3000/mcp", { origin: "http://localhost:6274" })).status).toBe(
      403,
    );
  });

  it("allowedHosts: false turns the check off for a loopback resource", async () => {
    const g = gateFor(LOOPBACK, { allowedHosts: false });
    expect((await g.ask("http://evil.example/mcp")).status).toBe(200);
    expect((await g.ask("http://localhost:3000/mcp", { origin: "http://evil.example" })).status).toBe(200);
  });

  it.each([
    ["an empty host list", { allowedHosts: [] }],
    ["a host with a path", { allowedHosts: ["localhost:3000/x"] }],
    ["a host with spaces", { allowedHosts: ["bad host"] }],
    ["a non-string host", { allowedHosts: [42] }],
    ["an origin with a path", { allowedOrigins: ["https://app.example/"] }],
    ["an origin without a scheme", { allowedOrigins: ["app.example"] }],
    ["allowedHosts: true", { allowedHosts: true }],
  ])("a misconfiguration throws at start-up: %s", (_name, bad) => {
    expect(() => gateFor(PUBLIC, bad as Partial<ResourceServerOptions>)).toThrow(/allowed(Hosts|Origins)/);
  });
});
