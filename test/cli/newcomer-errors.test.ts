/**
 * Issue 15, "what a newcomer hit" on the command line: each mistake gets one plain line that says
 * what is wrong and what was probably meant, as the real `gatehouse` process prints it. The URL
 * cases run against a real `gatehouse demo` on free ports.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DemoReady,
  ensureBuilt,
  MAIN,
  ROOT,
  type RunningCli,
  runCli,
  startDemo,
  tempDir,
} from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let config: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-newcomer-");
  config = tempDir("gatehouse-newcomer-config-");
  env = { GATEHOUSE_CONFIG_DIR: config.path, BROWSER: "false" };
  demo = await startDemo(dir.path);
});
afterAll(async () => {
  await demo?.stop();
  dir?.remove();
  config?.remove();
});

/** Runs `gatehouse <args>` with its stdout closed by the reader before anything is written. */
function runWithClosedStdout(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    child.once("error", reject);
    child.once("close", (code) => resolveRun({ code, stderr }));
  });
}

describe("a reader that closes the pipe early (gatehouse status | head -3)", () => {
  it.each([["status"], ["--help"], ["fetch", "--help"], ["users", "--help"]])(
    "gatehouse %s exits quietly without an EPIPE trace",
    async (...args) => {
      const { code, stderr } = await runWithClosedStdout(args);
      expect(stderr).not.toContain("EPIPE");
      expect(stderr).not.toContain("Unhandled");
      expect(code).toBe(0);
    },
  );
});

describe("option mistakes", () => {
  it("an option typo names the option and the near miss, with balanced quotes", async () => {
    const { code, stderr } = await runCli(["login", "--frce", "http://localhost:1/x"], { env });
    expect(code).toBe(2);
    expect(stderr).toBe(
      "gatehouse login: unknown option --frce (did you mean --force?)\n(see 'gatehouse login --help')\n",
    );
  });

  it("the same words for the server-side commands", async () => {
    const typo = await runCli(["demo", "--acess-token-ttl", "30"], { env });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain(
      "gatehouse demo: unknown option --acess-token-ttl (did you mean --access-token-ttl?)",
    );
    const missing = await runCli(["demo", "--port"], { env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("gatehouse demo: --port needs a value");
    const valued = await runCli(["status", "--json=yes"], { env });
    expect(valued.code).toBe(2);
    expect(valued.stderr).toContain("gatehouse status: --json takes no value");
    for (const text of [typo.stderr, missing.stderr, valued.stderr]) expect(text).not.toContain("positional");
  });

  it("gatehouse help <command> prints that command's help, an unknown one is an error", async () => {
    const help = await runCli(["help", "login"], { env });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: gatehouse login <resource-url>");
    const unknown = await runCli(["help", "lgin"], { env });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("gatehouse: no command named 'lgin'");
  });

  it("fetch without a URL says so before the usage pointer", async () => {
    const { code, stderr } = await runCli(["fetch"], { env });
    expect(code).toBe(2);
    expect(stderr).toBe("gatehouse fetch: a URL is required\n(see 'gatehouse fetch --help')\n");
  });
});

describe("URL mistakes", () => {
  it("a URL without its scheme is refused with the likely URL, before any request", async () => {
    const port = demo.ready.resourcePort;
    const { code, stderr } = await runCli(["fetch", `localhost:${port}/notes`], { env });
    expect(code).toBe(2);
    expect(stderr).toContain(
      `"localhost:${port}/notes" is not an http:// or https:// URL; did you mean http://localhost:${port}/notes?`,
    );
    expect(stderr).not.toContain("fetch failed");
  });

  it("a misspelt scheme is named, and a remote host is guessed as https", async () => {
    const typo = await runCli(["login", "htp://localhost:1/notes"], { env });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("(it says htp://); did you mean http://localhost:1/notes?");
    const bare = await runCli(["fetch", "mcp.example.com/mcp"], { env });
    expect(bare.stderr).toContain("did you mean https://mcp.example.com/mcp?");
  });

  it("the authorization server's URL given as the resource gets a hint, and no code jargon", async () => {
    const hint = `${demo.ready.issuer} is an authorization server, not a protected resource`;
    const login = await runCli(["login", "--print-url", `${demo.ready.issuer}/mcp`], { env });
    expect(login.code).toBe(1);
    expect(login.stderr).toContain(`${demo.ready.issuer}/mcp answered 404`);
    expect(login.stderr).toContain(hint);
    expect(login.stderr).not.toMatch(/\(code \w+, \w+\)/);
    // A path the issuer answers (GET /token is not a 404) goes on to discovery, which finds no metadata.
    const token = await runCli(["login", "--print-url", `${demo.ready.issuer}/token`], { env });
    expect(token.code).toBe(1);
    expect(token.stderr).toContain("no protected resource metadata found");
    expect(token.stderr).toContain(hint);
    expect(token.stderr).not.toMatch(/\(code \w+, \w+\)/);
    // fetch gets the issuer's own 404 (nothing there asks for a token): the status and the same hint.
    const fetched = await runCli(["fetch", demo.ready.issuer], { env });
    expect(fetched.code).toBe(22);
    expect(fetched.stderr).toContain(`gatehouse fetch: ${demo.ready.issuer} answered 404 Not Found`);
    expect(fetched.stderr).toContain(hint);
  });

  it("a resource that is not there: fetch exits 22 with the status on stderr and no hint", async () => {
    const url = `http://localhost:${demo.ready.resourcePort}/nots`;
    const fetched = await runCli(["fetch", url], { env });
    expect(fetched.code).toBe(22);
    // The body has no final newline: the message starts a line of its own (command-lows.test.ts).
    expect(fetched.stdout.endsWith("\n")).toBe(false);
    expect(fetched.stderr).toBe(`\ngatehouse fetch: ${url} answered 404 Not Found\n`);
  });

  it("login to a path that 404s fails before a browser opens and stores nothing", async () => {
    const url = `http://localhost:${demo.ready.resourcePort}/nots`;
    const { code, stdout, stderr } = await runCli(["login", "--print-url", url], { env });
    expect(code).toBe(1);
    expect(stdout).not.toContain("Logged in");
    expect(stderr).toContain(`gatehouse login: ${url} answered 404`);
    expect(stderr).not.toContain("Open this URL");
    const status = await runCli(["status", "--json"], { env });
    expect(JSON.parse(status.stdout).tokens).toEqual([]);
  });
});
