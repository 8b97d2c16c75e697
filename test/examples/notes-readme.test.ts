/**
 * Issue 26: examples/notes/README.md told Node 20 users to run `--experimental-strip-types` (Node
 * 22.6+ only) and did not say how to set the port or which resource URI to register. Its commands
 * are read from the README and run as written (this Node, the repository root, the README's ports
 * swapped for free ones, `gatehouse` the built CLI): without an authorization server (SELF_ISSUE)
 * and against `gatehouse serve`, logging in through the login and consent forms.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, MAIN, tempDir } from "../cli/helpers.js";
import { freePort } from "../support/free-port.js";
import { FormUserAgent } from "./form-user-agent.js";
import { REPO_ROOT } from "./package-source.js";
import { type ReadmeCommand, readmeCommands } from "./readme-commands.js";

const README = "examples/notes/README.md";
const running = new Set<ChildProcess>();
let dir: ReturnType<typeof tempDir>;

beforeAll(() => {
  ensureBuilt();
  dir = tempDir("gatehouse-notes-readme-");
});
afterAll(() => {
  for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
  dir.remove();
});

interface Run {
  child: ChildProcess;
  out(): string;
  err(): string;
  exited: Promise<number | null>;
}

/** Runs a README command with `swap` applied to every word and value; `gatehouse` is the built CLI. */
function start(command: ReadmeCommand, swap: (text: string) => string, env: NodeJS.ProcessEnv = {}): Run {
  const [program, ...args] = command.argv.map(swap);
  const argv = program === "gatehouse" ? [MAIN, ...args] : program === "node" ? args : undefined;
  if (!argv) throw new Error(`unexpected program ${program}`);
  const readmeEnv = Object.fromEntries(Object.entries(command.env).map(([k, v]) => [k, swap(v)]));
  const child = spawn(process.execPath, argv, {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      GATEHOUSE_DATABASE_URL: "",
      GATEHOUSE_KEY_ENCRYPTION_KEY: "",
      GATEHOUSE_STORE_KEY_LOCATION: "file",
      GATEHOUSE_CONFIG_DIR: `${dir.path}/config`,
      ...readmeEnv,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return { child, out: () => stdout, err: () => stderr, exited };
}

async function waitFor(run: Run, pattern: RegExp, where: "out" | "err" = "out"): Promise<RegExpExecArray> {
  let ended = false;
  void run.exited.then(() => {
    ended = true;
  });
  for (;;) {
    const match = pattern.exec(run[where]());
    if (match) return match;
    if (ended) throw new Error(`exited before printing ${pattern}:\n${run.out()}\n${run.err()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("examples/notes/README.md", () => {
  it("runs on Node 20 (no --experimental-strip-types) and documents PORT, ISSUER, JWKS_URI and the resource URI", () => {
    for (const heading of ["## Try it without an authorization server", "## Against gatehouse serve"]) {
      for (const command of readmeCommands(README, heading).filter((c) => c.argv[0] === "node")) {
        expect(command.argv.slice(0, 4)).toEqual([
          "node",
          "--import",
          "./scripts/typescript.mjs",
          "examples/notes/server.ts",
        ]);
      }
    }
    const text = readFileSync(`${REPO_ROOT}/${README}`, "utf8");
    expect(text).not.toContain("--experimental-strip-types examples");
    for (const setting of ["`PORT`", "`ISSUER`", "`JWKS_URI`", "`SELF_ISSUE`", "http://127.0.0.1:<PORT>"]) {
      expect(text).toContain(setting);
    }
  });

  it("without an authorization server: 401 with a challenge, 200 with the printed token", async () => {
    const port = String(await freePort());
    const swap = (s: string) => s.replaceAll("3000", port);
    const [command] = readmeCommands(README, "## Try it without an authorization server").filter(
      (c) => c.argv[0] === "node",
    );
    const notes = start(command!, swap);
    const token = (await waitFor(notes, /Authorization: Bearer (\S+?)"/))[1]!;
    const url = `http://127.0.0.1:${port}/notes`;
    const refused = await fetch(url);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toContain("resource_metadata=");
    const allowed = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toEqual([]);
    notes.child.kill("SIGTERM");
  }, 60_000);

  it("against gatehouse serve: serve, users add, the example, login and fetch as written", async () => {
    const [asPort, notesPort] = [String(await freePort()), String(await freePort())];
    const swap = (s: string) =>
      s
        .replaceAll("9000", asPort)
        .replaceAll("3000", notesPort)
        .replaceAll("./.gatehouse-notes", `${dir.path}/data`);
    const commands = readmeCommands(README, "## Against gatehouse serve");
    expect(commands.map((c) => c.argv.slice(0, 2).join(" "))).toEqual([
      "gatehouse serve",
      "gatehouse users",
      "node --import",
      "gatehouse login",
      "gatehouse fetch",
    ]);
    const [serveCommand, addUser, example, login, fetchNotes] = commands as [
      ReadmeCommand,
      ReadmeCommand,
      ReadmeCommand,
      ReadmeCommand,
      ReadmeCommand,
    ];
    const serve = start(serveCommand, swap);
    await waitFor(serve, /authorization server ready at/);
    const added = start(addUser, swap);
    expect(await added.exited, added.err()).toBe(0);
    const password = /password: (\S+)/.exec(added.out())![1]!;
    const notes = start(example, swap);
    await waitFor(notes, /notes API on/);

    const agent = new FormUserAgent("alice", password);
    const loggingIn = start(login, swap, { BROWSER: "/nonexistent/browser" });
    const authorizeUrl = (
      await waitFor(loggingIn, /Open this URL in a browser to authorize:\n\s+(\S+)/, "err")
    )[1]!;
    const callback = await agent.open(new URL(authorizeUrl));
    expect((await fetch(callback)).status).toBe(200);
    expect(await loggingIn.exited, loggingIn.err()).toBe(0);

    const fetched = start(fetchNotes, swap);
    expect(await fetched.exited, fetched.err()).toBe(0);
    expect(JSON.parse(fetched.out())).toEqual([]);
    serve.child.kill("SIGTERM");
    notes.child.kill("SIGTERM");
  }, 120_000);
});
