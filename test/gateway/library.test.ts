/**
 * `gatehouse-auth/gateway` as a library: `createGateway` from the built package entry
 * (dist/gateway/index.js, what `import "gatehouse-auth/gateway"` loads) and from source, mounted as
 * a node:http listener and used as a fetch handler, in front of an HTTP upstream and a stdio one;
 * its option checks. Tokens are JWTs from a test issuer whose JWKS a loopback server publishes.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as GatewayModule from "../../src/gateway/index.js";
import { createGateway, IDENTITY_ASSERTION_TYP, type RevocationStore } from "../../src/gateway/index.js";
import { silentLogger } from "../../src/shared/log.js";
import { ensureBuilt, ROOT } from "../cli/helpers.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { freePort } from "./everything.js";

const POLICY = { base: ["mcp:use"], default: {}, tools: { delete_file: { scopes: ["files:admin"] } } };

let issuer: TestIssuer;
let upstream: Server;
let upstreamUrl: string;
let dir: string;
/** The headers the upstream last saw. */
let seen: Record<string, string | string[] | undefined> = {};

beforeAll(async () => {
  ensureBuilt();
  issuer = await startIssuer();
  dir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-library-"));
  upstream = createServer((req, res) => {
    seen = req.headers;
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const id = body ? (JSON.parse(body) as { id?: unknown }).id : null;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id, result: { ok: true } }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  await issuer?.close();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function post(resource: string, token: string | undefined, body: unknown): Promise<Response> {
  return fetch(resource, {
    method: "POST",
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    body: JSON.stringify(body),
  });
}

const toolCall = (name: string) => ({
  jsonrpc: "2.0",
  id: 3,
  method: "tools/call",
  params: { name, arguments: {} },
});

/** Mounts `gateway.listener` on the port its resource names. */
async function mount(gateway: GatewayModule.Gateway): Promise<() => Promise<void>> {
  const server = createServer(gateway.listener);
  await new Promise<void>((resolve) =>
    server.listen(Number(new URL(gateway.resource).port), "127.0.0.1", resolve),
  );
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await gateway.close();
  };
}

describe("gatehouse-auth/gateway", () => {
  it("the built entry (dist/gateway/index.js) creates a gateway mountable as a node:http listener", async () => {
    const built = (await import(
      pathToFileURL(join(ROOT, "dist/gateway/index.js")).href
    )) as typeof GatewayModule;
    expect(typeof built.createGateway).toBe("function");
    expect(built.IDENTITY_ASSERTION_TYP).toBe(IDENTITY_ASSERTION_TYP);
    const resource = `http://127.0.0.1:${await freePort()}/mcp`;
    const gateway = await built.createGateway({
      upstream: upstreamUrl,
      resource,
      authorizationServer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      policy: POLICY,
      identityHeaders: { subject: "X-User" },
      logger: silentLogger,
    });
    const close = await mount(gateway);
    try {
      const metadata = await fetch(`${new URL(resource).origin}/.well-known/oauth-protected-resource/mcp`);
      expect(await metadata.json()).toMatchObject({
        resource,
        authorization_servers: [issuer.issuer],
        scopes_supported: expect.arrayContaining(["mcp:use", "files:admin"]),
      });
      expect((await post(resource, undefined, toolCall("read_file"))).status).toBe(401);
      const token = await issuer.sign({ aud: resource, sub: "dana", scope: "mcp:use" });
      const allowed = await post(resource, token, toolCall("read_file"));
      expect(allowed.status).toBe(200);
      expect(await allowed.json()).toMatchObject({ id: 3, result: { ok: true } });
      expect(seen["x-user"]).toBe("dana");
      expect(seen.authorization).toBeUndefined();
      const refused = await post(resource, token, toolCall("delete_file"));
      expect(refused.status).toBe(403);
      expect(refused.headers.get("www-authenticate")).toContain('scope="mcp:use files:admin"');
    } finally {
      await close();
    }
  });

  it("hostile: through the listener a body up to maxBodyBytes (default 4 MiB) is relayed, a larger one is the gate's 413", async () => {
    const resource = `http://127.0.0.1:${await freePort()}/mcp`;
    const gateway = await createGateway({
      upstream: upstreamUrl,
      resource,
      authorizationServer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      policy: POLICY,
      logger: silentLogger,
    });
    const close = await mount(gateway);
    try {
      const token = await issuer.sign({ aud: resource, sub: "dana", scope: "mcp:use" });
      const padded = (bytes: number) => ({
        ...toolCall("read_file"),
        params: { name: "read_file", arguments: { pad: "a".repeat(bytes) } },
      });
      expect((await post(resource, token, padded(2 * 1024 * 1024))).status).toBe(200);
      const tooLarge = await post(resource, token, padded(5 * 1024 * 1024));
      expect(tooLarge.status).toBe(413);
      expect(await tooLarge.json()).toMatchObject({ jsonrpc: "2.0", error: { code: expect.any(Number) } });
    } finally {
      await close();
    }
  });

  it("a stdio upstream from a command line, through fetch; audit events to onAuditEvent", async () => {
    const script = join(dir, "echo-stdio.js");
    writeFileSync(
      script,
      `const rl = require("node:readline").createInterface({ input: process.stdin });
       rl.on("line", (line) => { const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { user: process.env.MCP_USER, secret: process.env.API_KEY ?? null } }) + "\\n"); });`,
    );
    const resource = "http://127.0.0.1:9/mcp";
    const decisions: string[] = [];
    const gateway = await createGateway({
      stdio: {
        command: `"${process.execPath}" "${script}"`,
        env: { PATH: process.env.PATH ?? "", API_KEY: "from-operator" },
        subjectEnv: "MCP_USER",
      },
      resource,
      authorizationServer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      policy: POLICY,
      onAuditEvent: (event) => decisions.push(`${event.method}:${event.decision}`),
      logger: silentLogger,
    });
    try {
      const token = await issuer.sign({ aud: resource, sub: "erin", scope: "mcp:use" });
      const answer = await gateway.fetch(
        new Request(resource, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
        }),
      );
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ id: 1, result: { user: "erin", secret: "from-operator" } });
      expect(decisions).toEqual(["initialize:allowed"]);
    } finally {
      await gateway.close();
    }
  });

  it("stdio.revocation: a child whose grant the shared store shows revoked is stopped within checkSeconds", async () => {
    const script = join(dir, "pid-stdio.js");
    writeFileSync(
      script,
      `require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
         const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { pid: process.pid } }) + "\\n"); });`,
    );
    const resource = "http://127.0.0.1:9/mcp";
    let revokedAt: number | undefined;
    const store = {
      getGrant: async (grantId: string) =>
        grantId === "grant-1" ? { grantId, revokedAt, expiresAt: Date.now() + 3_600_000 } : undefined,
      getUpstreamTokens: async () => undefined,
      getAccessToken: async () => undefined,
    } as unknown as RevocationStore;
    const gateway = await createGateway({
      stdio: {
        command: [process.execPath, script],
        scope: "user",
        revocation: { store, checkSeconds: 0.05 },
      },
      resource,
      authorizationServer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      policy: POLICY,
      logger: silentLogger,
    });
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      const token = await issuer.sign({ aud: resource, sub: "erin", scope: "mcp:use", jti: "grant-1.a" });
      const answer = await gateway.fetch(
        new Request(resource, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
        }),
      );
      expect(answer.status).toBe(200);
      const { pid } = ((await answer.json()) as { result: { pid: number } }).result;
      await new Promise((r) => setTimeout(r, 200));
      expect(alive(pid)).toBe(true);
      revokedAt = Date.now();
      const end = Date.now() + 3000;
      while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 25));
      expect(alive(pid)).toBe(false);
    } finally {
      await gateway.close();
    }
  });

  it("refuses contradictory options before anything runs", async () => {
    const base = {
      resource: "http://127.0.0.1:9/mcp",
      authorizationServer: issuer.issuer,
      policy: POLICY,
    };
    await expect(createGateway({ ...base, jwksUri: issuer.jwksUri })).rejects.toThrow(
      "give exactly one of upstream and stdio",
    );
    await expect(
      createGateway({
        ...base,
        upstream: upstreamUrl,
        stdio: { command: ["node"] },
        jwksUri: issuer.jwksUri,
      }),
    ).rejects.toThrow("give exactly one of upstream and stdio");
    await expect(
      createGateway({
        ...base,
        upstream: upstreamUrl,
        jwksUri: issuer.jwksUri,
        introspection: { endpoint: `${issuer.issuer}/introspect`, clientId: "gw", clientSecret: "s" },
      }),
    ).rejects.toThrow("give jwksUri or introspection, not both");
    await expect(
      createGateway({
        ...base,
        stdio: { command: ["node"] },
        jwksUri: issuer.jwksUri,
        identityAssertion: { header: "X-Id", privateKey: "" },
      }),
    ).rejects.toThrow("an identity assertion is for an HTTP upstream");
    // The test issuer publishes no RFC 8414 metadata: without jwksUri there is nothing to find.
    await expect(createGateway({ ...base, upstream: upstreamUrl })).rejects.toThrow(
      "no authorization server metadata found",
    );
  });
});
