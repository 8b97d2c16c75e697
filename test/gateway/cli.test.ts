/**
 * `gatehouse gateway` as a process (dist/cli/main.js): usage errors, a policy file with a bad line
 * refused at start-up, and a running gateway with a three-line policy in front of a loopback MCP
 * upstream: the metadata, a 401, a permitted call relayed, an audit line on stderr without the
 * token, /health, and a graceful exit on SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { importJWK, type JWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, MAIN, runCli } from "../cli/helpers.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { freePort } from "../support/free-port.js";

let issuer: TestIssuer;
let upstream: Server;
let upstreamUrl: string;
let dir: string;
beforeAll(async () => {
  ensureBuilt();
  issuer = await startIssuer();
  dir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-cli-"));
  upstream = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const id = body ? (JSON.parse(body) as { id?: unknown }).id : null;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id,
          result: {
            saw_authorization: req.headers.authorization !== undefined,
            user: req.headers["x-user"] ?? null,
            identity: req.headers["x-gatehouse-identity"] ?? null,
          },
        }),
      );
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

/** A free loopback port (the gateway's --port, which its --resource names). */

interface GatewayProcess {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  exited: Promise<number | null>;
}

/** Runs `gatehouse gateway <args>` and waits for its first line on stdout (it is ready then). */
async function startGatewayProcess(args: string[]): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [MAIN, "gateway", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr!.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${stderr}`)), 20_000);
    child.stdout!.on("data", () => {
      if (stdout.includes("\n")) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
  };
}

/**
 * `gatehouse gateway` in front of `upstream` (`--upstream URL` or `--stdio ...`) on a free port,
 * with the test issuer's keys and `policy`, plus `extra` flags: the process and its resource URI.
 */
async function startGatewayFor(policy: string, upstream: string[], extra: string[]) {
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/mcp`;
  const gateway = await startGatewayProcess([
    ...upstream,
    ...["--resource", resource, "--authorization-server", issuer.issuer, "--jwks-uri", issuer.jwksUri],
    ...["--policy", policy, "--port", String(port)],
    ...extra,
  ]);
  return { port, resource, gateway };
}

describe("gatehouse gateway", () => {
  it("--help names every flag; a missing flag is a usage error (status 2)", async () => {
    const help = await runCli(["gateway", "--help"]);
    expect(help.code).toBe(0);
    for (const f of [
      "--upstream",
      "--resource",
      "--authorization-server",
      "--policy",
      "--user-header",
      "--filter-listings",
      "--introspection-client-id",
      "--introspection-client-secret-file",
      "GATEHOUSE_INTROSPECTION_CLIENT_SECRET",
      "--data",
      "--database-url",
      "--config",
    ]) {
      expect(help.stdout).toContain(f);
    }
    const missing = await runCli(["gateway", "--upstream", upstreamUrl]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--resource is required");
  });

  it("--upstream and --stdio: exactly one of them", async () => {
    const both = await runCli(["gateway", "--upstream", upstreamUrl, "--stdio", "node server.js"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("give exactly one of --upstream and --stdio");
    const neither = await runCli(["gateway", "--resource", "http://127.0.0.1:1/mcp"]);
    expect(neither.code).toBe(2);
  });

  it("--stdio runs a stdio server per session with the environment it names", async () => {
    const script = join(dir, "fake-stdio.js");
    writeFileSync(
      script,
      `const rl = require("node:readline").createInterface({ input: process.stdin });
       rl.on("line", (line) => { const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { key: process.env.API_KEY ?? null, user: process.env.MCP_USER ?? null } }) + "\\n"); });`,
    );
    const policy = join(dir, "stdio-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\ndefault: {}\n");
    const { resource, gateway } = await startGatewayFor(
      policy,
      [
        "--stdio",
        `"${process.execPath}" "${script}"`,
        "--env",
        "API_KEY=from-operator",
        "--user-env",
        "MCP_USER",
      ],
      ["--json"],
    );
    try {
      const token = await issuer.sign({ aud: resource, sub: "dana", scope: "mcp:use" });
      const response = await fetch(resource, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: {
            protocolVersion: "2025-11-25",
            capabilities: {},
            clientInfo: { name: "t", version: "1" },
          },
        }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get("mcp-session-id")).toBeTruthy();
      expect(await response.json()).toMatchObject({ id: 1, result: { key: "from-operator", user: "dana" } });
    } finally {
      gateway.child.kill("SIGTERM");
    }
    expect(await gateway.exited).toBe(0);
  }, 40_000);

  it("--stdio-scope and the upstream-token flags: bad values and missing companions are usage errors", async () => {
    const policy = join(dir, "usage-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\n");
    const base = ["gateway", "--resource", "http://127.0.0.1:1/mcp", "--authorization-server", issuer.issuer];
    const cases: [string[], string][] = [
      [["--stdio", "node s.js", "--stdio-scope", "tenant"], "--stdio-scope takes user or session"],
      [["--upstream", upstreamUrl, "--stdio-scope", "user"], "--stdio-scope needs --stdio"],
      [
        ["--stdio", "node s.js", "--stdio-upstream-token-env", "GITHUB_TOKEN=github"],
        "--stdio-upstream-token-env needs --upstream-token-client-id and --upstream-token-client-secret-file",
      ],
      [
        ["--stdio", "node s.js", "--upstream-token-client-id", "gw"],
        "--upstream-token-client-id and its secret file go with --stdio-upstream-token-env",
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runCli([...base, "--policy", policy, ...args]);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toContain(message);
    }
  });

  it("--stdio-scope user: one child per user, shared by that user's sessions", async () => {
    const script = join(dir, "pid-stdio.js");
    writeFileSync(
      script,
      `const rl = require("node:readline").createInterface({ input: process.stdin });
       rl.on("line", (line) => { const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { pid: process.pid, user: process.env.MCP_USER } }) + "\\n"); });`,
    );
    const policy = join(dir, "user-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\ndefault: {}\n");
    const { resource, gateway } = await startGatewayFor(
      policy,
      ["--stdio", `"${process.execPath}" "${script}"`, "--stdio-scope", "user", "--user-env", "MCP_USER"],
      ["--json"],
    );
    const call = async (token: string, method: string, session?: string) => {
      const response = await fetch(resource, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(session ? { "mcp-session-id": session } : {}),
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: {} }),
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { result: { pid: number; user: string } };
      return { session: response.headers.get("mcp-session-id")!, ...body.result };
    };
    try {
      const dana = await issuer.sign({ aud: resource, sub: "dana", scope: "mcp:use" });
      const erin = await issuer.sign({ aud: resource, sub: "erin", scope: "mcp:use" });
      const first = await call(dana, "initialize");
      const second = await call(dana, "initialize");
      expect(second.session).not.toBe(first.session);
      // The second session's own request reaches the same process as the first's.
      expect((await call(dana, "ping", second.session)).pid).toBe(first.pid);
      const other = await call(erin, "initialize");
      expect(other.pid).not.toBe(first.pid);
      expect(other.user).toBe("erin");
    } finally {
      gateway.child.kill("SIGTERM");
    }
    expect(await gateway.exited).toBe(0);
  }, 40_000);

  it("--identity-assertion-header: the upstream verifies the caller with the key the ready line prints", async () => {
    const keyFile = join(dir, "identity.pem");
    writeFileSync(
      keyFile,
      generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ type: "pkcs8", format: "pem" }),
    );
    const policy = join(dir, "identity-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\ndefault: {}\n");
    const usage = [
      "gateway",
      "--resource",
      "http://127.0.0.1:1/mcp",
      "--authorization-server",
      issuer.issuer,
      "--policy",
      policy,
    ];
    const alone = await runCli([...usage, "--upstream", upstreamUrl, "--identity-assertion-header", "X-Id"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain(
      "--identity-assertion-header and --identity-assertion-key-file go together",
    );
    const notKey = join(dir, "not-a-key.pem");
    writeFileSync(notKey, "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXRleHQ=\n-----END PRIVATE KEY-----\n");
    const bad = await runCli([
      ...usage,
      "--upstream",
      upstreamUrl,
      "--identity-assertion-header",
      "X-Id",
      "--identity-assertion-key-file",
      notKey,
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--identity-assertion-key-file: not a PEM private key");
    expect(bad.stderr).not.toContain("c2VjcmV0LXRleHQ");

    const { resource, gateway } = await startGatewayFor(
      policy,
      ["--upstream", upstreamUrl],
      [
        "--identity-assertion-header",
        "X-Gatehouse-Identity",
        "--identity-assertion-key-file",
        keyFile,
        "--json",
      ],
    );
    try {
      const ready = JSON.parse(gateway.stdout.split("\n")[0]!) as { identity_assertion_jwk: JWK };
      expect(ready.identity_assertion_jwk).toMatchObject({ kty: "EC", alg: "ES256" });
      expect(ready.identity_assertion_jwk.d).toBeUndefined();
      const token = await issuer.sign({
        aud: resource,
        sub: "carol",
        client_id: "cli-app",
        scope: "mcp:use",
      });
      const relayed = await fetch(resource, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "x-gatehouse-identity": "forged",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(relayed.status).toBe(200);
      const { result } = (await relayed.json()) as { result: { identity: string } };
      const { payload } = await jwtVerify(result.identity, await importJWK(ready.identity_assertion_jwk), {
        typ: "gatehouse-identity+jwt",
        issuer: resource,
        audience: upstreamUrl,
      });
      expect(payload).toMatchObject({ sub: "carol", client_id: "cli-app", scope: "mcp:use" });
    } finally {
      gateway.child.kill("SIGTERM");
    }
    expect(await gateway.exited).toBe(0);
  }, 40_000);

  it("hostile: a body up to --max-body-bytes (default 4 MiB) is relayed, a larger one gets the gate's JSON-RPC 413", async () => {
    const policy = join(dir, "body-policy.yaml");
    writeFileSync(policy, "base: [mcp:use]\ndefault: {}\n");
    const { resource, gateway } = await startGatewayFor(policy, ["--upstream", upstreamUrl], []);
    try {
      const token = await issuer.sign({ aud: resource, sub: "carol", scope: "mcp:use" });
      const send = (padding: number) =>
        fetch(resource, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 5,
            method: "tools/call",
            params: { name: "read_file", arguments: { pad: "a".repeat(padding) } },
          }),
        });
      const twoMiB = await send(2 * 1024 * 1024);
      expect(twoMiB.status).toBe(200);
      expect(await twoMiB.json()).toMatchObject({ id: 5, result: { saw_authorization: false } });
      const fiveMiB = await send(5 * 1024 * 1024);
      expect(fiveMiB.status).toBe(413);
      expect(await fiveMiB.json()).toMatchObject({ jsonrpc: "2.0", error: { code: expect.any(Number) } });
    } finally {
      gateway.child.kill("SIGTERM");
    }
    expect(await gateway.exited).toBe(0);
  }, 40_000);

  it("a policy with a bad value is refused at start-up, naming the file and the line", async () => {
    const policy = join(dir, "bad.yaml");
    writeFileSync(policy, 'base: [mcp:use]\ntools:\n  delete_file: { scopes: ["files admin"] }\n');
    const result = await runCli([
      "gateway",
      "--upstream",
      upstreamUrl,
      "--resource",
      "http://127.0.0.1:1/mcp",
      "--authorization-server",
      issuer.issuer,
      "--jwks-uri",
      issuer.jwksUri,
      "--policy",
      policy,
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `operation policy ${policy} line 3: tools.delete_file.scopes[0] is not a valid scope token`,
    );
  });

  it("runs with a three-line policy: metadata, 401, a relayed call, an audit line, /health, SIGTERM", async () => {
    const policy = join(dir, "policy.yaml");
    writeFileSync(
      policy,
      "base: [mcp:use]\ndefault: {}\ntools: { delete_file: { scopes: [files:admin] } }\n",
    );
    const { port, resource, gateway } = await startGatewayFor(
      policy,
      ["--upstream", upstreamUrl],
      ["--user-header", "X-User", "--json"],
    );
    try {
      expect(JSON.parse(gateway.stdout.split("\n")[0]!)).toMatchObject({ resource, upstream: upstreamUrl });

      const metadata = (await (
        await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`)
      ).json()) as Record<string, unknown>;
      expect(metadata).toMatchObject({ resource, authorization_servers: [issuer.issuer] });
      expect((metadata.scopes_supported as string[]).sort()).toEqual(["files:admin", "mcp:use"]);

      const call = (token?: string, name = "read_file") =>
        fetch(resource, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name } }),
        });
      expect((await call()).status).toBe(401);
      const token = await issuer.sign({
        aud: resource,
        sub: "carol",
        client_id: "cli-app",
        scope: "mcp:use",
      });
      const relayed = await call(token);
      expect(relayed.status).toBe(200);
      expect(await relayed.json()).toMatchObject({ result: { saw_authorization: false, user: "carol" } });
      const stepUp = await call(token, "delete_file");
      expect(stepUp.status).toBe(403);
      expect(stepUp.headers.get("www-authenticate")).toContain('scope="mcp:use files:admin"');

      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 50));
      const audit = gateway.stderr.split("\n").filter((l) => l.includes('"mcp.operation"'));
      expect(
        audit.some(
          (l) =>
            l.includes('"target":"read_file"') &&
            l.includes('"decision":"allowed"') &&
            l.includes('"sub":"carol"'),
        ),
      ).toBe(true);
      expect(
        audit.some(
          (l) => l.includes('"target":"delete_file"') && l.includes('"missing_scopes":["files:admin"]'),
        ),
      ).toBe(true);
      expect(gateway.stderr).not.toContain(token.split(".")[2]!);
    } finally {
      gateway.child.kill("SIGTERM");
    }
    expect(await gateway.exited).toBe(0);
    expect(gateway.stderr).toContain("shutdown_complete");
  }, 40_000);
});
