/**
 * `--stdio`: stdio MCP servers behind the gateway, one child per session. Real servers from the
 * registry (@modelcontextprotocol/server-filesystem on a temporary directory, server-everything in
 * stdio mode) driven by the official SDK v2 client; and hostile children written for the test: one
 * that floods stdout, one that never answers, one that dies, one that prints its environment.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { commandWords } from "../../src/gateway/stdio-parts.js";
import { createStdioUpstream, type StdioUpstreamOptions } from "../../src/gateway/stdio-upstream.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationPolicy,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

const resolvePackage = (specifier: string) => createRequire(import.meta.url).resolve(specifier);

const POLICY: OperationPolicy = {
  base: ["mcp:use"],
  default: "deny",
  methods: { "tools/list": {} },
  tools: {
    echo: {},
    "get-env": {},
    read_text_file: {},
    list_directory: {},
    list_allowed_directories: {},
    write_file: { scopes: ["files:write"] },
    anything: {},
  },
};

interface StdioGateway {
  url: string;
  server: ListeningServer;
  upstream: ReturnType<typeof createStdioUpstream>;
  sign(sub: string, scope: string): Promise<string>;
  close(): Promise<void>;
}

let issuer: TestIssuer;
let dir: string;
beforeAll(async () => {
  issuer = await startIssuer();
  dir = mkdtempSync(join(tmpdir(), "gatehouse-stdio-"));
  writeFileSync(join(dir, "hello.txt"), "hello from the temp dir\n");
});
afterAll(async () => {
  await issuer?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function startStdioGateway(
  options: Partial<StdioUpstreamOptions> & { argv: string[] },
): Promise<StdioGateway> {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const server = await listen((request) => handler(request));
  const resource = `${server.url}/mcp`;
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, { policy: POLICY, filterListings: true });
  const upstream = createStdioUpstream({ env: { PATH: process.env.PATH ?? "" }, ...options });
  const gateway = createHttpGateway({ stdio: upstream, resourceServer, gate });
  handler = (request) => gateway.fetch(request);
  return {
    url: resource,
    server,
    upstream,
    sign: (sub, scope) => issuer.sign({ aud: resource, sub, client_id: "app", scope }),
    async close() {
      await upstream.close();
      await server.close();
    },
  };
}

async function connect(gateway: StdioGateway, token: string) {
  const transport = new StreamableHTTPClientTransport(new URL(gateway.url), {
    fetch: (url, init) => {
      const headers = new Headers(init?.headers);
      headers.set("authorization", `Bearer ${token}`);
      return fetch(url, { ...init, headers });
    },
  });
  const client = new Client({ name: "stdio-gateway-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

function post(gateway: StdioGateway, token: string, body: unknown, session?: string) {
  return fetch(gateway.url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
      ...(session ? { "mcp-session-id": session } : {}),
    },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
};

/** A stdio MCP server in a few lines: answers initialize, then does what `behaviour` says. */
function fakeServer(behaviour: string): string[] {
  const script = `
    const rl = require("node:readline").createInterface({ input: process.stdin });
    const send = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
    rl.on("line", (line) => {
      const m = JSON.parse(line);
      if (m.method === "initialize") return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: "2025-11-25", capabilities: { tools: {} }, serverInfo: { name: "fake", version: "1" }, env: Object.keys(process.env) } });
      if (m.id === undefined) return;
      ${behaviour}
    });`;
  return [process.execPath, "-e", script];
}

describe("@modelcontextprotocol/server-filesystem on a temporary directory (stdio)", () => {
  let gateway: StdioGateway;
  beforeAll(async () => {
    gateway = await startStdioGateway({
      argv: [process.execPath, resolvePackage("@modelcontextprotocol/server-filesystem/dist/index.js"), dir],
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it("SDK v2 client: filtered tools, a permitted read, a write refused for its scope, then allowed with it", async () => {
    const { client } = await connect(gateway, await gateway.sign("alice", "mcp:use"));
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual(["list_allowed_directories", "list_directory", "read_text_file"]);
      const read = await client.callTool({
        name: "read_text_file",
        arguments: { path: join(dir, "hello.txt") },
      });
      expect(JSON.stringify(read.content)).toContain("hello from the temp dir");
      await expect(
        client.callTool({ name: "write_file", arguments: { path: join(dir, "new.txt"), content: "x" } }),
      ).rejects.toThrow(/insufficient scope|403/i);
    } finally {
      await client.close();
    }
    const { client: writer } = await connect(gateway, await gateway.sign("alice", "mcp:use files:write"));
    try {
      await writer.callTool({
        name: "write_file",
        arguments: { path: join(dir, "new.txt"), content: "written" },
      });
      expect(readFileSync(join(dir, "new.txt"), "utf8")).toBe("written");
    } finally {
      await writer.close();
    }
  }, 30_000);

  it("a session belongs to its caller: another user's session id is 404", async () => {
    const alice = await gateway.sign("alice", "mcp:use");
    const started = await post(gateway, alice, INITIALIZE);
    expect(started.status).toBe(200);
    const session = started.headers.get("mcp-session-id")!;
    const mallory = await gateway.sign("mallory", "mcp:use");
    const stolen = await post(gateway, mallory, { jsonrpc: "2.0", id: 2, method: "tools/list" }, session);
    expect(stolen.status).toBe(404);
    const del = await fetch(gateway.url, {
      method: "DELETE",
      headers: { authorization: `Bearer ${alice}`, "mcp-session-id": session },
    });
    expect(del.status).toBe(200);
  }, 20_000);
});

describe("server-everything in stdio mode", () => {
  it("echo answers through the gateway", async () => {
    const gateway = await startStdioGateway({
      argv: [
        process.execPath,
        resolvePackage("@modelcontextprotocol/server-everything/dist/index.js"),
        "stdio",
      ],
    });
    try {
      const { client } = await connect(gateway, await gateway.sign("bob", "mcp:use"));
      const echoed = await client.callTool({ name: "echo", arguments: { message: "stdio echo" } });
      expect(JSON.stringify(echoed.content)).toContain("stdio echo");
      await client.close();
    } finally {
      await gateway.close();
    }
  }, 30_000);
});

describe("one child per user (scope: user), server-everything in stdio mode", () => {
  const everything = () => [
    process.execPath,
    resolvePackage("@modelcontextprotocol/server-everything/dist/index.js"),
    "stdio",
  ];
  const envOf = async (client: Client) => {
    const answer = await client.callTool({ name: "get-env", arguments: {} });
    return JSON.parse((answer.content as { text: string }[])[0]!.text) as Record<string, string>;
  };

  it("a user's sessions share one child, another user has their own; each session gets its own answers", async () => {
    const gateway = await startStdioGateway({ argv: everything(), scope: "user", subjectEnv: "MCP_USER" });
    try {
      const alice1 = await connect(gateway, await gateway.sign("alice", "mcp:use"));
      const alice2 = await connect(gateway, await gateway.sign("alice", "mcp:use"));
      const bob = await connect(gateway, await gateway.sign("bob", "mcp:use"));
      expect(gateway.upstream.children).toBe(2);
      // Both of alice's clients number their requests alike: the gateway keeps their answers apart.
      const [one, two] = await Promise.all([
        alice1.client.callTool({ name: "echo", arguments: { message: "first session" } }),
        alice2.client.callTool({ name: "echo", arguments: { message: "second session" } }),
      ]);
      expect(JSON.stringify(one.content)).toContain("first session");
      expect(JSON.stringify(two.content)).toContain("second session");
      expect((await envOf(alice2.client)).MCP_USER).toBe("alice");
      expect((await envOf(bob.client)).MCP_USER).toBe("bob");
      // Ending one of alice's sessions leaves her child to the other; her last one stops it.
      await alice1.transport.terminateSession();
      expect(gateway.upstream.children).toBe(2);
      expect(
        JSON.stringify(
          (await alice2.client.callTool({ name: "echo", arguments: { message: "still" } })).content,
        ),
      ).toContain("still");
      await alice2.transport.terminateSession();
      expect(gateway.upstream.children).toBe(1);
      await Promise.all([alice1.client.close(), alice2.client.close(), bob.client.close()]);
    } finally {
      await gateway.close();
    }
  }, 30_000);

  it("initializes arriving together: the child sees one, each session gets its answer, the bound holds", async () => {
    const script = `
      const rl = require("node:readline").createInterface({ input: process.stdin });
      let initializes = 0;
      rl.on("line", (line) => {
        const m = JSON.parse(line);
        if (m.method === "initialize") initializes++;
        if (m.id === undefined) return;
        // Answered late, so the other sessions arrive while the first initialize is in flight.
        setTimeout(() => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { initializes } }) + "\\n"), 200);
      });`;
    const gateway = await startStdioGateway({
      argv: [process.execPath, "-e", script],
      scope: "user",
      maxSessionsPerChild: 2,
    });
    try {
      const alice = await gateway.sign("alice", "mcp:use");
      const answers = await Promise.all(
        [11, 12, 13].map((id) => post(gateway, alice, { ...INITIALIZE, id })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 503]);
      const bodies = (await Promise.all(answers.filter((a) => a.status === 200).map((a) => a.json()))) as {
        id: number;
        result: { initializes: number };
      }[];
      expect(bodies.map((b) => b.result.initializes)).toEqual([1, 1]);
      expect(new Set(bodies.map((b) => b.id)).size).toBe(2);
      expect(gateway.upstream.children).toBe(1);
    } finally {
      await gateway.close();
    }
  });

  it("bounded per user and overall; a token without sub gets no shared child", async () => {
    const gateway = await startStdioGateway({
      argv: fakeServer("send({ jsonrpc: '2.0', id: m.id, result: {} });"),
      scope: "user",
      maxChildren: 1,
      maxSessionsPerChild: 2,
    });
    try {
      const alice = await gateway.sign("alice", "mcp:use");
      expect((await post(gateway, alice, INITIALIZE)).status).toBe(200);
      const second = await post(gateway, alice, { ...INITIALIZE, id: 7 });
      expect(second.status).toBe(200);
      // The second session's initialize is the child's first answer, under its own id.
      expect(((await second.json()) as { id: number }).id).toBe(7);
      expect((await post(gateway, alice, INITIALIZE)).status).toBe(503);
      expect((await post(gateway, await gateway.sign("bob", "mcp:use"), INITIALIZE)).status).toBe(503);
      const nobody = await issuer.sign({ aud: gateway.url, client_id: "app", scope: "mcp:use" });
      const refused = await post(gateway, nobody, INITIALIZE);
      expect(refused.status).toBe(403);
      expect(JSON.stringify(await refused.json())).toContain("names no user");
      expect(gateway.upstream.children).toBe(1);
    } finally {
      await gateway.close();
    }
  });
});

describe("hostile children", () => {
  it("a child that floods stdout without a newline is stopped; the request gets a JSON-RPC error", async () => {
    const gateway = await startStdioGateway({
      argv: fakeServer(`process.stdout.write("x".repeat(3 * 1024 * 1024));`),
      maxLineBytes: 1024 * 1024,
    });
    try {
      const token = await gateway.sign("alice", "mcp:use");
      const started = await post(gateway, token, INITIALIZE);
      const session = started.headers.get("mcp-session-id")!;
      const flooded = await post(
        gateway,
        token,
        { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "anything" } },
        session,
      );
      expect(flooded.status).toBe(502);
      expect(await flooded.json()).toMatchObject({
        id: 2,
        error: { code: -32603, message: "The MCP server process exited" },
      });
      expect(gateway.upstream.children).toBe(0);
    } finally {
      await gateway.close();
    }
  });

  it("a child that never answers: 504 after the timeout, the session still usable", async () => {
    const gateway = await startStdioGateway({
      argv: fakeServer("/* never answers */"),
      // Long enough for the child to start and answer initialize on a loaded machine (at load 15,
      // 300 ms was not: the initialize itself timed out and the call had no session, 400).
      requestTimeoutMs: 3000,
    });
    try {
      const token = await gateway.sign("alice", "mcp:use");
      const initialized = await post(gateway, token, INITIALIZE);
      expect(initialized.status).toBe(200);
      const session = initialized.headers.get("mcp-session-id")!;
      const silent = await post(
        gateway,
        token,
        { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "anything" } },
        session,
      );
      expect(silent.status).toBe(504);
      expect(await silent.json()).toMatchObject({ id: 3, error: { code: -32603 } });
      expect(gateway.upstream.children).toBe(1);
    } finally {
      await gateway.close();
    }
  });

  it("a child that dies: the call gets a clear error, the session is gone (404), a new initialize starts a new child", async () => {
    const gateway = await startStdioGateway({ argv: fakeServer("process.exit(3);") });
    try {
      const token = await gateway.sign("alice", "mcp:use");
      const session = (await post(gateway, token, INITIALIZE)).headers.get("mcp-session-id")!;
      const died = await post(
        gateway,
        token,
        { jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "anything" } },
        session,
      );
      expect(died.status).toBe(502);
      expect(await died.json()).toMatchObject({ id: 4, error: { message: "The MCP server process exited" } });
      expect(
        (await post(gateway, token, { jsonrpc: "2.0", id: 5, method: "tools/list" }, session)).status,
      ).toBe(404);
      const again = await post(gateway, token, INITIALIZE);
      expect(again.status).toBe(200);
      expect(again.headers.get("mcp-session-id")).not.toBe(session);
    } finally {
      await gateway.close();
    }
  });

  it("a child that stops reading its stdin: what waits for it is bounded (503), not grown by the client", async () => {
    // Answers initialize, then never reads stdin again.
    const script = `
      const rl = require("node:readline").createInterface({ input: process.stdin });
      rl.once("line", (line) => {
        const m = JSON.parse(line);
        process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: {} }) + "\\n");
        rl.close();
        process.stdin.pause();
      });
      setInterval(() => {}, 1000);`;
    const gateway = await startStdioGateway({
      argv: [process.execPath, "-e", script],
      maxLineBytes: 256 * 1024,
    });
    try {
      const token = await gateway.sign("alice", "mcp:use");
      const session = (await post(gateway, token, INITIALIZE)).headers.get("mcp-session-id")!;
      const note = {
        jsonrpc: "2.0",
        method: "notifications/progress",
        params: { progressToken: 1, progress: 1, message: "y".repeat(100_000) },
      };
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await post(gateway, token, note, session)).status);
      expect(statuses).toContain(202);
      expect(statuses.at(-1)).toBe(503);
    } finally {
      await gateway.close();
    }
  });

  it("children are bounded: beyond maxChildren a new session gets 503", async () => {
    const gateway = await startStdioGateway({
      argv: fakeServer("send({ jsonrpc: '2.0', id: m.id, result: {} });"),
      maxChildren: 1,
    });
    try {
      expect((await post(gateway, await gateway.sign("alice", "mcp:use"), INITIALIZE)).status).toBe(200);
      const refused = await post(gateway, await gateway.sign("bob", "mcp:use"), INITIALIZE);
      expect(refused.status).toBe(503);
      expect(gateway.upstream.children).toBe(1);
    } finally {
      await gateway.close();
    }
  });

  it("the child's environment is only what the operator named (plus the caller's sub when asked)", async () => {
    process.env.GATEHOUSE_TEST_GATEWAY_SECRET = "must-not-reach-the-child";
    const gateway = await startStdioGateway({
      argv: fakeServer(""),
      env: { PATH: process.env.PATH ?? "", UPSTREAM_API_KEY: "k" },
      subjectEnv: "MCP_USER",
    });
    try {
      const answer = (await (
        await post(gateway, await gateway.sign("alice", "mcp:use"), INITIALIZE)
      ).json()) as {
        result: { env: string[] };
      };
      expect(answer.result.env.filter((n) => !n.startsWith("__CF") && n !== "LC_CTYPE").sort()).toEqual([
        "MCP_USER",
        "PATH",
        "UPSTREAM_API_KEY",
      ]);
    } finally {
      delete process.env.GATEHOUSE_TEST_GATEWAY_SECRET;
      await gateway.close();
    }
  });

  it("the command line is split into words without a shell", () => {
    expect(commandWords(`npx -y "@scope/pkg" '/data dir' a\\ b`)).toEqual([
      "npx",
      "-y",
      "@scope/pkg",
      "/data dir",
      "a b",
    ]);
    expect(commandWords("echo $HOME; rm -rf /")).toEqual(["echo", "$HOME;", "rm", "-rf", "/"]);
    expect(() => commandWords('unbalanced "quote')).toThrow(/unbalanced/);
  });
});
