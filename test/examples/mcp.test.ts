/**
 * examples/mcp end to end on loopback, run the way its README says: the README's own commands
 * start the example MCP server and the example MCP client as processes on this Node (20 is the
 * oldest supported), against the repo's authorization server (in process, memory store, one user).
 * The client prints the authorization URL (no browser to open), and an automated user agent logs
 * in and approves consent by submitting the HTML forms, then delivers the redirect to the client's
 * loopback listener. Both spec revisions: 2026-07-28 is also the MCP protocol revision the SDK v2
 * client pins (the v1 SDK server refused it).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
} from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { compileOperationPolicy } from "../../src/resource-server/index.js";
import { requirementOf } from "../../src/resource-server/operations/decide.js";
import { silentLogger } from "../../src/shared/log.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { ensureBuilt } from "../cli/helpers.js";
import { freePort } from "../support/free-port.js";
import { FormUserAgent } from "./form-user-agent.js";
import { importExample, REPO_ROOT } from "./package-source.js";
import { commandRunning, type ReadmeCommand, readmeCommands } from "./readme-commands.js";

type ServerModule = typeof import("../../examples/mcp/server.js");

const PASSWORD = "correct horse battery staple";
const README = "examples/mcp/README.md";
/** The URLs the README's commands use, replaced by the test's loopback ports. */
const README_ISSUER = "http://localhost:9000";
const README_RESOURCE = "http://127.0.0.1:3000/mcp";
const REVISIONS = ["2025-11-25", "2026-07-28"] as const;

interface Running {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exited: Promise<number | null>;
}

/**
 * Starts a README command as written, with this test's URLs in place of the README's: `node` is
 * this Node, the working directory the repository root (where the README says to run it).
 */
function start(command: ReadmeCommand, urls: Record<string, string>, env: Record<string, string>): Running {
  const swap = (word: string) => urls[word] ?? word;
  const [program, ...args] = command.argv.map(swap);
  expect(program).toBe("node");
  const readmeEnv = Object.fromEntries(Object.entries(command.env).map(([k, v]) => [k, swap(v)]));
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...readmeEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const running: Running = {
    child,
    stdout: "",
    stderr: "",
    exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))),
  };
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    running.stdout += chunk;
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    running.stderr += chunk;
  });
  return running;
}

/** Resolves once `running` printed a line matching `pattern`; rejects if it exits first. */
function waitForOutput(running: Running, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pattern.test(running.stdout)) {
        running.child.stdout!.off("data", check);
        resolve();
      }
    };
    running.child.stdout!.on("data", check);
    check();
    void running.exited.then((code) =>
      reject(new Error(`exited (${code}) before printing ${pattern}:\n${running.stdout}\n${running.stderr}`)),
    );
  });
}

describe("examples/mcp/README.md", () => {
  it("runs the example with one command per file that works on Node 20 (no --experimental-strip-types)", () => {
    const commands = readmeCommands(README, "## Run it by hand");
    for (const file of ["examples/mcp/server.ts", "examples/mcp/client.ts"]) {
      const { argv } = commandRunning(commands, file);
      expect(argv.slice(0, 4)).toEqual(["node", "--import", "./scripts/typescript.mjs", file]);
    }
  });
});

describe.each(REVISIONS)("examples/mcp run as its README says (revision %s)", (revision) => {
  let as: AuthorizationServer;
  let asHttp: ListeningServer;
  let mcpServer: Running;
  let resource: string;
  let urls: Record<string, string>;
  const commands = readmeCommands(README, "## Run it by hand");

  beforeAll(async () => {
    ensureBuilt(); // the examples import `gatehouse/*`, which resolves to dist/
    let asHandler: ((request: Request) => Promise<Response>) | undefined;
    asHttp = await listen((request) => asHandler!(request));
    resource = `http://127.0.0.1:${await freePort()}/mcp`;
    urls = { [README_ISSUER]: asHttp.url, [README_RESOURCE]: resource };

    const store = createMemoryStore();
    as = await createAuthorizationServer({
      issuer: asHttp.url,
      allowInsecureLoopback: true,
      store,
      resources: [{ uri: resource, name: "Notes (MCP example)", scopes: ["notes:read", "notes:write"] }],
      scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Add notes" },
      maintenanceIntervalMs: 0,
      logger: silentLogger,
      revision,
    });
    asHandler = as.fetch;
    await store.createUser({
      id: "u-alice",
      username: "alice",
      passwordHash: await hashPassword(PASSWORD),
      isAdmin: false,
      createdAt: Date.now(),
    });

    mcpServer = start(commandRunning(commands, "examples/mcp/server.ts"), urls, { REVISION: revision });
    await waitForOutput(mcpServer, /^MCP server on /m);
  }, 60_000);

  afterAll(async () => {
    if (mcpServer && mcpServer.child.exitCode === null) {
      mcpServer.child.kill("SIGTERM");
      await mcpServer.exited;
    }
    await as?.close();
    await asHttp?.close();
  });

  it("the server says where it listens, for which issuer and revision", () => {
    expect(mcpServer.stdout).toContain(
      `MCP server on ${resource}, protected by ${asHttp.url} (revision ${revision})`,
    );
  });

  it("the endpoint refuses an anonymous MCP request with a 401 pointing at its metadata", async () => {
    const response = await fetch(resource, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "notes.add" } }),
    });
    expect(response.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenge?.params.error).toBeUndefined();
    const metadataUrl = `${new URL(resource).origin}/.well-known/oauth-protected-resource/mcp`;
    expect(challenge?.params.resource_metadata).toBe(metadataUrl);
    // The scopes of the tool named in the body are announced before any token exists.
    expect(challenge?.params.scope?.split(" ").sort()).toEqual(["notes:read", "notes:write"]);

    const metadata = (await (await fetch(metadataUrl)).json()) as Record<string, unknown>;
    expect(metadata.resource).toBe(resource);
    expect(metadata.authorization_servers).toEqual([asHttp.url]);
  });

  it("the client logs in with notes:read, lists, then steps up to notes:write for notes.add", async () => {
    const agent = new FormUserAgent("alice", PASSWORD);
    const client = start(commandRunning(commands, "examples/mcp/client.ts"), urls, {
      REVISION: revision,
      // No browser to open: the client prints the URL, which the automated user agent follows.
      BROWSER: "/nonexistent/browser",
    });
    const delivered: Promise<void>[] = [];
    const seen = new Set<string>();
    const onStderr = () => {
      for (const [, url] of client.stderr.matchAll(/Open this URL in a browser to authorize:\n\s+(\S+)/g)) {
        if (!url || seen.has(url)) continue;
        seen.add(url);
        delivered.push(
          (async () => {
            const callback = await agent.open(new URL(url));
            // The redirect reaches the client's one-shot loopback listener, as a browser's would.
            const answer = await fetch(callback);
            expect(answer.status).toBe(200);
          })(),
        );
      }
    };
    client.child.stderr!.on("data", onStderr);
    const code = await client.exited;
    await Promise.all(delivered);
    const transcript = `${client.stdout}\n${client.stderr}`;
    expect(code, transcript).toBe(0);

    expect(client.stdout.split("\n").filter(Boolean)).toEqual([
      `protocol: ${revision}`,
      "tools: notes.list, notes.add",
      "notes.list → []",
      "notes.add → added note 1",
      'notes.list → ["buy milk"]',
    ]);
    // The first authorization: login page, then consent for notes:read only.
    expect(agent.visits).toHaveLength(2);
    expect(agent.visits[0]).toMatchObject({ login: true, consent: true });
    expect(agent.visits[0]!.consentPage).toContain("Read your notes");
    expect(agent.visits[0]!.consentPage).not.toContain("Add notes");
    // notes.add got 403 insufficient_scope naming notes:write: a step-up, in the signed-in
    // browser (no login page), consent for the new scope, and the call retried.
    expect(agent.visits[1]).toMatchObject({ login: false, consent: true });
    expect(agent.visits[1]!.consentPage).toContain("Add notes");
    const auth = client.stderr.split("\n").filter((line) => line.startsWith("[auth] "));
    const scopesOf = (pattern: RegExp) =>
      auth.flatMap((line) => {
        const m = pattern.exec(line);
        return m ? [m[1]!.split(" ")] : [];
      });
    const authorized = scopesOf(/^\[auth\] authorized with scope "([^"]*)"$/);
    expect(authorized).toHaveLength(2);
    expect(authorized[0]).toContain("notes:read");
    expect(authorized[0]).not.toContain("notes:write");
    expect(authorized[1]).toContain("notes:write");
    const stepUps = scopesOf(/^\[auth\] step-up started for scope "([^"]*)"$/);
    expect(stepUps).toHaveLength(1);
    expect(stepUps[0]).toContain("notes:write");
  }, 60_000);

  it("a token that does not verify is refused with 401 invalid_token before any tool runs", async () => {
    const response = await fetch(resource, {
      method: "POST",
      headers: {
        authorization: "Bearer eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL290aGVyIn0.c2ln",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(response.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenge?.params.error).toBe("invalid_token");
  });
});

describe("examples/mcp: the scopes a request needs (its operation policy)", () => {
  let policy: ReturnType<typeof compileOperationPolicy>;
  beforeAll(async () => {
    const { NOTES_POLICY } = await importExample<ServerModule>("examples/mcp/server.ts");
    policy = compileOperationPolicy(NOTES_POLICY);
  });
  const needs = (method: string, name?: string) => {
    const target = name === undefined ? undefined : ({ kind: "tool", name } as const);
    const requirement = requirementOf(policy, { kind: "request", method, id: 1, target });
    return requirement.deny ? "denied" : [...requirement.scopes].sort();
  };

  it("every request needs the endpoint scope; each tools/call adds its tool's scopes", () => {
    expect(needs("initialize")).toEqual(["notes:read"]);
    expect(needs("tools/list")).toEqual(["notes:read"]);
    expect(needs("tools/call", "notes.list")).toEqual(["notes:read"]);
    expect(needs("tools/call", "notes.add")).toEqual(["notes:read", "notes:write"]);
  });

  it("unknown tools, prototype names and unnamed methods are refused", () => {
    expect(needs("tools/call", "nope")).toBe("denied");
    expect(needs("tools/call", "__proto__")).toBe("denied");
    expect(needs("resources/list")).toBe("denied");
  });
});
