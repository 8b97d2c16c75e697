/**
 * Issue 6, "errors say what to do next": a transport failure names the cause found down the
 * `cause` chain and the next step, for real sockets — a closed port, a name under `.invalid`
 * (RFC 6761 §6.4: never resolves), a server whose certificate chains to an unknown CA, and a
 * server that accepts and never answers. The CLI commands run in this process so the test sees
 * exactly what they write to stderr.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { describeError } from "../../src/cli/client-commands.js";
import { run as runFetch } from "../../src/cli/commands/fetch.js";
import { run as runLogin } from "../../src/cli/commands/login.js";
import { AuthClient, AuthorizationFlowError, MemoryTokenStore } from "../../src/client/index.js";
import { explainNetworkError } from "../../src/client/protocol/network-errors.js";
import { followRedirect } from "../client/fixtures.js";
import { startTestHttpsServer } from "../support/tls.js";

const DEMO_HINT = "is the server running? (for the demo: npm start)";

/** A port on 127.0.0.1 that was just free: bound, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e,
  );
}

/** Runs a CLI command in this process; returns its exit status and what it wrote to stderr. */
async function cli(
  command: (args: string[]) => Promise<number>,
  args: string[],
): Promise<{ code: number; stderr: string }> {
  let stderr = "";
  const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    return true;
  });
  try {
    return { code: await command(args), stderr };
  } finally {
    spy.mockRestore();
  }
}

let configDir: string;
beforeAll(() => {
  configDir = mkdtempSync(join(tmpdir(), "gatehouse-cli-support-"));
  process.env.GATEHOUSE_CONFIG_DIR = configDir;
});
afterAll(() => {
  rmSync(configDir, { recursive: true, force: true });
});

describe("describeError: transport failures say what to do next", () => {
  it("ECONNREFUSED (a closed port) → nothing is listening at <origin>, is the server running", async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}/mcp`;
    const error = await failure(fetch(url));
    expect(explainNetworkError(error, url)).toMatchObject({
      kind: "connection_refused",
      code: "ECONNREFUSED",
    });
    expect(describeError(error, { url })).toBe(
      `nothing is listening at http://127.0.0.1:${port}: ${DEMO_HINT} (ECONNREFUSED)`,
    );
  });

  it("ECONNREFUSED inside the flow names the unreachable authorization server, not the resource, and keeps the step", async () => {
    const asPort = await closedPort();
    const issuer = `http://127.0.0.1:${asPort}`;
    // A resource whose metadata points at an authorization server that is not running.
    const http = createHttpServer((req, res) => {
      const base = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
      if (req.url === "/.well-known/oauth-protected-resource/mcp") {
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ resource: `${base}/mcp`, authorization_servers: [issuer] }));
        return;
      }
      res
        .writeHead(401, {
          "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
        })
        .end();
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
    try {
      const base = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
      const client = new AuthClient({
        store: new MemoryTokenStore(),
        redirectUri: "http://127.0.0.1:9/callback",
        userAgent: followRedirect,
      });
      const error = await failure(client.fetch(`${base}/mcp`));
      expect(error).toBeInstanceOf(AuthorizationFlowError);
      const flow = error as AuthorizationFlowError;
      expect(flow.code).toBe("transport_failed");
      expect(flow.url).toBe(`${issuer}/.well-known/oauth-authorization-server`);
      const line = describeError(flow, { url: `${base}/mcp` });
      expect(line).toContain(
        `authorization server metadata (${issuer}/.well-known/oauth-authorization-server)`,
      );
      expect(line).toContain(`nothing is listening at ${issuer}: ${DEMO_HINT}`);
      // The code is for programs (error.code); the line for the user does not carry it.
      expect(line).not.toContain("transport_failed");
    } finally {
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    }
  });

  it("ENOTFOUND (a .invalid name) → cannot resolve <host>: check the URL", async () => {
    const url = "https://gatehouse-test.invalid/mcp";
    const error = await failure(fetch(url));
    const network = explainNetworkError(error, url);
    expect(network?.kind).toBe("host_not_found");
    expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(network?.code);
    expect(describeError(error, { url })).toMatch(/^cannot resolve gatehouse-test\.invalid: check the URL/);
  });

  it("an unknown CA → the certificate of <host> is not trusted, set NODE_EXTRA_CA_CERTS", async () => {
    const server = await startTestHttpsServer((_req, res) => res.end("hello"));
    try {
      const url = `${server.origin}/mcp`;
      const error = await failure(fetch(url));
      const network = explainNetworkError(error, url);
      expect(network?.kind).toBe("untrusted_certificate");
      expect(describeError(error, { url })).toBe(
        `the TLS certificate of 127.0.0.1:${server.port} is not trusted (${network?.code}): set NODE_EXTRA_CA_CERTS=<ca.pem> for a private CA`,
      );
    } finally {
      await server.close();
    }
  });

  it("https to a plain-HTTP port → did not answer with TLS, use http://", async () => {
    const http = createHttpServer((_req, res) => res.end("plain"));
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
    try {
      const url = `https://127.0.0.1:${(http.address() as { port: number }).port}/mcp`;
      const error = await failure(fetch(url));
      expect(explainNetworkError(error, url)?.kind).toBe("not_tls");
      expect(describeError(error, { url })).toContain("did not answer with TLS");
    } finally {
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    }
  });

  it("a server that never answers → timeout is named as such", async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    try {
      const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}/mcp`;
      const error = await failure(fetch(url, { signal: AbortSignal.timeout(200) }));
      expect(explainNetworkError(error, url)?.kind).toBe("timeout");
      expect(describeError(error, { url })).toMatch(/did not answer in time/);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it("a protocol refusal is not mistaken for a transport failure", () => {
    const error = new AuthorizationFlowError("issuer_mismatch", "issuer differs", {
      kind: "refused",
      step: "authorization server metadata (x)",
    });
    expect(explainNetworkError(error)).toBeUndefined();
    expect(describeError(error)).toBe(
      "authorization server metadata (x): issuer differs — gatehouse stopped here because going on would be unsafe",
    );
  });
});

describe("CLI commands print the next step instead of 'fetch failed'", () => {
  it("gatehouse fetch <closed port> → exit 1 and the hint, never the bare 'fetch failed'", async () => {
    const port = await closedPort();
    const { code, stderr } = await cli(runFetch, [`http://127.0.0.1:${port}/mcp`]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `gatehouse fetch: nothing is listening at http://127.0.0.1:${port}: ${DEMO_HINT} (ECONNREFUSED)\n`,
    );
  });

  it("gatehouse login <.invalid host> → cannot resolve, check the URL", async () => {
    const { code, stderr } = await cli(runLogin, ["https://gatehouse-test.invalid/mcp"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^gatehouse login: cannot resolve gatehouse-test\.invalid: check the URL/);
  });

  it("gatehouse fetch <unknown CA> → the certificate hint", async () => {
    const server = await startTestHttpsServer((_req, res) => res.end("hello"));
    try {
      const { code, stderr } = await cli(runFetch, [`${server.origin}/mcp`]);
      expect(code).toBe(1);
      expect(stderr).toContain(`the TLS certificate of 127.0.0.1:${server.port} is not trusted`);
      expect(stderr).toContain("NODE_EXTRA_CA_CERTS=<ca.pem>");
    } finally {
      await server.close();
    }
  });
});
