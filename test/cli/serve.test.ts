/**
 * `gatehouse serve` as a real process: start-up refusals (spec: authorization server endpoints
 * MUST be HTTPS), config file validation, health and metadata, HTTPS served directly, the
 * TLS-terminating-proxy mode, logs without secrets and a graceful SIGTERM.
 */
import { writeFileSync } from "node:fs";
import { get as httpsGet } from "node:https";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/free-port.js";
import { testTls } from "../support/tls.js";
import { ensureBuilt, logLines, type RunningCli, runCli, startCli, tempDir } from "./helpers.js";

type Ready = { event: string; issuer: string; port: number; tls: boolean };

let dir: ReturnType<typeof tempDir>;
const running: RunningCli<Ready>[] = [];

beforeAll(() => {
  ensureBuilt();
  dir = tempDir();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
});
afterAll(() => dir.remove());

async function serve(args: string[]): Promise<RunningCli<Ready>> {
  const r = await startCli<Ready>(["serve", "--json", "--data", dir.path, ...args]);
  running.push(r);
  return r;
}

const RESOURCE = ["--resource", "http://localhost:9876", "--scopes", "notes:read,notes:write"];

describe("start-up refusals", () => {
  it("refuses a plain-http issuer on a non-loopback host (endpoints MUST be HTTPS)", async () => {
    const r = await runCli([
      "serve",
      "--issuer",
      "http://auth.example.com",
      "--insecure-loopback",
      ...RESOURCE,
      "--data",
      dir.path,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("refusing a plain-http issuer on a non-loopback host");
  });

  it("refuses a plain-http loopback issuer without --insecure-loopback", async () => {
    const r = await runCli(["serve", "--issuer", "http://localhost:9000", ...RESOURCE, "--data", dir.path]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--insecure-loopback");
  });

  it("refuses an https issuer it would answer in plain http (no TLS, no proxy)", async () => {
    const r = await runCli([
      "serve",
      "--issuer",
      "https://auth.example.com",
      ...RESOURCE,
      "--data",
      dir.path,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--tls-cert");
  });

  it("refuses insecure loopback mode bound to a public address", async () => {
    const r = await runCli([
      "serve",
      "--insecure-loopback",
      "--host",
      "0.0.0.0",
      ...RESOURCE,
      "--data",
      dir.path,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("loopback address");
  });

  it("needs a resource and a valid issuer", async () => {
    const noResource = await runCli(["serve", "--insecure-loopback", "--data", dir.path]);
    expect(noResource.code).toBe(2);
    expect(noResource.stderr).toContain("protected resource");
    const query = await runCli(["serve", "--issuer", "https://a.example/?x=1", "--trust-proxy", ...RESOURCE]);
    expect(query.code).toBe(2);
    expect(query.stderr).toContain("query or fragment");
  });

  it("names every bad field of an invalid config file", async () => {
    const file = join(dir.path, "bad.json");
    writeFileSync(
      file,
      JSON.stringify({ port: "eighty", resources: [{ uri: 5, scopes: ["ok", "bad scope"] }], extra: 1 }),
    );
    const r = await runCli(["serve", "--config", file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid config file ${file}`);
    expect(r.stderr).toMatch(/port:/);
    expect(r.stderr).toMatch(/resources\.0\.uri:/);
    expect(r.stderr).toMatch(/resources\.0\.scopes\.1:/);
    expect(r.stderr).toContain("extra");
    const notJson = join(dir.path, "not.json");
    writeFileSync(notJson, "{ issuer: nope");
    const r2 = await runCli(["serve", "--config", notJson]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toContain("not valid JSON");
  });
});

describe("listen errors", () => {
  it("a port already in use is one line naming the port and the way out, exit 1, no stack trace", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await runCli([
        "serve",
        "--insecure-loopback",
        "--port",
        String(port),
        ...RESOURCE,
        "--data",
        dir.path,
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `gatehouse serve: port ${port} on 127.0.0.1 is already in use: stop the other process or pass --port 0 (any free port)`,
      );
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.stdout).toBe("");
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });
});

describe("a running server", () => {
  it("takes its config file, lets flags override it, and serves /health and metadata", async () => {
    const file = join(dir.path, "gatehouse.json");
    writeFileSync(
      file,
      JSON.stringify({
        insecureLoopback: true,
        host: "127.0.0.1",
        port: 0,
        resources: [{ uri: "http://localhost:9876", name: "Files", scopes: ["files:read"] }],
        accessTokenTtlSeconds: 120,
      }),
    );
    const fromFile = await serve(["--config", file]);
    expect(fromFile.ready.event).toBe("ready");
    expect(fromFile.ready.issuer).toBe(`http://localhost:${fromFile.ready.port}`);
    const base = `http://127.0.0.1:${fromFile.ready.port}`;
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    const metadata = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as {
      issuer: string;
      scopes_supported: string[];
    };
    expect(metadata.issuer).toBe(fromFile.ready.issuer);
    expect(metadata.scopes_supported).toContain("files:read");
    await fromFile.stop();

    // A --resource flag replaces the file's resources.
    const overridden = await serve(["--config", file, ...RESOURCE]);
    const scopes = (
      (await (
        await fetch(`http://127.0.0.1:${overridden.ready.port}/.well-known/oauth-authorization-server`)
      ).json()) as {
        scopes_supported: string[];
      }
    ).scopes_supported;
    expect(scopes).toContain("notes:write");
    expect(scopes).not.toContain("files:read");
  });

  it("logs JSON lines without the client secret or the tokens it issued", async () => {
    const added = await runCli([
      "clients",
      "add",
      "--name",
      "svc",
      "--redirect-uri",
      "https://svc.example/cb",
      "--confidential",
      "--client-credentials",
      "--data",
      dir.path,
      "--json",
    ]);
    expect(added.code, added.stderr).toBe(0);
    const { client_id, client_secret } = JSON.parse(added.stdout) as {
      client_id: string;
      client_secret: string;
    };
    const server = await serve(["--insecure-loopback", "--port", "0", ...RESOURCE]);
    const base = `http://127.0.0.1:${server.ready.port}`;
    const token = await fetch(`${base}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({
        grant_type: "client_credentials",
        resource: "http://localhost:9876",
        scope: "notes:read",
      }),
    });
    const body = (await token.json()) as { access_token?: string };
    expect(token.status, JSON.stringify(body)).toBe(200);
    await fetch(`${base}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", code: "not-a-real-code-123", client_id }),
    });
    const { code } = await server.stop();
    expect(code).toBe(0);
    const stderr = server.stderr();
    expect(stderr).not.toContain(client_secret);
    expect(stderr).not.toContain(body.access_token!);
    expect(stderr).not.toContain("not-a-real-code-123");
    const lines = logLines(stderr);
    expect(lines.some((l) => l.event === "request" && l.path === "/token" && l.status === 200)).toBe(true);
    for (const line of lines) expect(typeof line.time).toBe("string");
  });

  it("on SIGTERM stops accepting, finishes the request in flight, then exits 0", async () => {
    const server = await serve(["--insecure-loopback", "--port", "0", ...RESOURCE]);
    const socket = connect(server.ready.port, "127.0.0.1");
    await new Promise<void>((r) => socket.once("connect", () => r()));
    let response = "";
    socket.setEncoding("utf8").on("data", (c: string) => {
      response += c;
    });
    const body = "grant_type=authorization_code&code=abc&client_id=x";
    // Headers and half the body: the request is in flight when the signal arrives.
    socket.write(
      `POST /token HTTP/1.1\r\nHost: 127.0.0.1:${server.ready.port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await new Promise((r) => setTimeout(r, 200));
    server.child.kill("SIGTERM");
    await waitFor(() => logLines(server.stderr()).some((l) => l.event === "shutdown_started"));
    // New connections are refused once shutdown began.
    await expect(fetch(`http://127.0.0.1:${server.ready.port}/health`)).rejects.toThrow();
    socket.end(body.slice(10));
    const { code } = await server.exited;
    expect(code).toBe(0);
    expect(response).toMatch(/^HTTP\/1\.1 (400|401) /);
    expect(response).toContain('"error"');
    expect(logLines(server.stderr()).some((l) => l.event === "shutdown_complete")).toBe(true);
  });

  it("serves HTTPS directly with --tls-cert/--tls-key", async () => {
    const tls = testTls();
    const cert = join(dir.path, "cert.pem");
    const key = join(dir.path, "key.pem");
    writeFileSync(cert, tls.cert);
    writeFileSync(key, tls.key, { mode: 0o600 });
    const port = await freePort();
    const issuer = `https://localhost:${port}`;
    const server = await serve([
      "--issuer",
      issuer,
      "--tls-cert",
      cert,
      "--tls-key",
      key,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      ...RESOURCE,
    ]);
    expect(server.ready).toMatchObject({ issuer, port, tls: true });
    const health = await httpsJson(`https://localhost:${port}/health`, tls.ca);
    expect(health).toEqual({ status: 200, body: { status: "ok" } });
    const metadata = await httpsJson(
      `https://localhost:${port}/.well-known/oauth-authorization-server`,
      tls.ca,
    );
    expect((metadata.body as { issuer: string }).issuer).toBe(issuer);
    expect((metadata.body as { token_endpoint: string }).token_endpoint).toBe(`${issuer}/token`);
    // No plain http on the TLS port.
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it("behind a TLS-terminating proxy (--trust-proxy) takes scheme and host from X-Forwarded-*", async () => {
    const server = await serve([
      "--issuer",
      "https://auth.example.test",
      "--trust-proxy",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      ...RESOURCE,
    ]);
    const res = await fetch(`http://127.0.0.1:${server.ready.port}/.well-known/oauth-authorization-server`, {
      headers: { "x-forwarded-proto": "https", "x-forwarded-host": "auth.example.test" },
    });
    expect(res.status).toBe(200);
    const metadata = (await res.json()) as { issuer: string; authorization_endpoint: string };
    expect(metadata.issuer).toBe("https://auth.example.test");
    expect(metadata.authorization_endpoint).toBe("https://auth.example.test/authorize");
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

function httpsJson(url: string, ca: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    httpsGet(url, { ca }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    }).on("error", reject);
  });
}
