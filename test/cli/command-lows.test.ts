/**
 * Issue 26's low-friction items on the client commands, each read back from what the command
 * prints: fetch's own message on a line of its own after a body without a final newline; `check`
 * option typos worded like the other commands'; `check` pointed at the authorization server's URL
 * says so before its report; the missing-client error names the options that supply one; Ctrl-C
 * during a browser login says so, as the device login does. Against the loopback servers of
 * test/client/fixtures.ts; the Ctrl-C cases run the built command (a real SIGINT).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { run as check } from "../../src/cli/commands/check.js";
import { run as fetchCommand } from "../../src/cli/commands/fetch.js";
import { run as login } from "../../src/cli/commands/login.js";
import { type Fake, startFake } from "../client/fixtures.js";
import { ensureBuilt, startHeadless, tempDir } from "./helpers.js";

let fake: Fake;
let closed: Fake;
let work: ReturnType<typeof tempDir>;
const savedEnv = { ...process.env };

beforeAll(async () => {
  fake = await startFake();
  closed = await startFake({ noRegistration: true });
  work = tempDir("gatehouse-command-lows-");
  process.env.GATEHOUSE_CONFIG_DIR = join(work.path, "config");
  process.env.GATEHOUSE_STORE_KEY_LOCATION = "file";
  process.env.GATEHOUSE_DATABASE_URL = "";
  process.env.BROWSER = "false";
});
afterAll(async () => {
  process.env = savedEnv;
  await fake?.close();
  await closed?.close();
  work?.remove();
});

/** Runs a command in this process: its status, each stream, and both in the order written. */
async function capture(command: () => Promise<number>) {
  let stdout = "";
  let stderr = "";
  const both: Array<["out" | "err", string]> = [];
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    stdout += text;
    both.push(["out", text]);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    stderr += text;
    both.push(["err", text]);
    return true;
  });
  try {
    return { code: await command(), stdout, stderr, both };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe("gatehouse fetch", () => {
  it("a body without a final newline: the body is passed as is, its own message starts a new line", async () => {
    const result = await capture(() => fetchCommand(["--no-browser", `${fake.base}/nothing`]));
    expect(result.code).toBe(22);
    expect(result.stdout).toBe('{"error":"not_found"}');
    expect(result.stderr.startsWith(`\ngatehouse fetch: ${fake.base}/nothing answered 404`)).toBe(true);
  });
});

describe("gatehouse check", () => {
  it("an option typo is worded like the other commands', with the near miss", async () => {
    const result = await capture(() => check(["--jsn", fake.resourceUrl]));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("gatehouse check: unknown option --jsn (did you mean --json?)");
    expect(result.stderr).not.toContain("positional");
    expect(result.stderr).not.toContain("Unknown option '");
  });

  it("pointed at the authorization server's URL, it says so before the report", async () => {
    const result = await capture(() => check([`${fake.base}/`]));
    expect(result.code).toBe(1);
    const hint = `${fake.base} is an authorization server, not a protected resource`;
    const first = result.both.find(([, text]) => text.trim() !== "");
    expect(first?.[1]).toContain(hint);
    expect(result.stdout).toContain("FAIL");
  }, 60_000);

  it("a real resource gets no such hint", async () => {
    const result = await capture(() => check([fake.resourceUrl]));
    expect(result.stderr + result.stdout).not.toContain(
      "is an authorization server, not a protected resource",
    );
  }, 60_000);
});

describe("no way to obtain a client", () => {
  it("the error names --client-id and --issuer", async () => {
    const result = await capture(() => login([closed.resourceUrl]));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("no way to obtain a client id");
    expect(result.stderr).toContain(`--client-id <id> --issuer ${closed.base}`);
  }, 30_000);
});

describe("Ctrl-C during a browser login", () => {
  beforeAll(() => ensureBuilt());

  for (const [command, said] of [
    ["login", "gatehouse login: cancelled; nothing was stored"],
    ["fetch", "gatehouse fetch: login cancelled; no request was sent with new tokens"],
  ] as const) {
    it(`${command}: says it was cancelled and exits 130, as the device login does`, async () => {
      const config = join(work.path, `interrupt-${command}`);
      // $BROWSER is a program that opens nothing: the command waits for a callback.
      const run = startHeadless([command, fake.resourceUrl], config, { BROWSER: "true" });
      for (let i = 0; i < 300 && !run.stderr().includes("Waiting for you to finish in the browser"); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(run.stderr()).toContain("Waiting for you to finish in the browser");
      run.child.kill("SIGINT");
      const done = await run.done;
      expect(done.stderr).toContain(said);
      expect(done.code).toBe(130);
    }, 60_000);
  }
});
