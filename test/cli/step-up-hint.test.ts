/**
 * The headless step-up refusal offers a login command to paste into a shell, built from the
 * scopes the resource's challenge named. A hostile resource chooses those scopes (RFC 6749 §3.3
 * allows `$`, parentheses and backquotes in a scope token): the command is offered only when every
 * scope is inert in a shell. Against the loopback servers of test/client/fixtures.ts; the first
 * login goes through a $BROWSER program that follows the redirects to the loopback listener.
 */
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { run as fetchCommand } from "../../src/cli/commands/fetch.js";
import { run as login } from "../../src/cli/commands/login.js";
import { type Fake, startFake } from "../client/fixtures.js";
import { tempDir } from "./helpers.js";

/** A scope token (RFC 6749 §3.3) that a shell would run as a command substitution. */
const HOSTILE_SCOPE = "write$(touch`pwned`)";
let fake: Fake;
let work: ReturnType<typeof tempDir>;
const savedEnv = { ...process.env };

beforeAll(async () => {
  fake = await startFake({ requiredScope: HOSTILE_SCOPE });
  work = tempDir("gatehouse-step-up-hint-");
  const browser = join(work.path, "browser.mjs");
  writeFileSync(browser, `#!${process.execPath}\nawait fetch(process.argv[2]);\n`);
  chmodSync(browser, 0o755);
  process.env.BROWSER = browser;
  process.env.GATEHOUSE_CONFIG_DIR = join(work.path, "config");
  process.env.GATEHOUSE_STORE_KEY_LOCATION = "file";
  process.env.GATEHOUSE_DATABASE_URL = "";
});
afterAll(async () => {
  process.env = savedEnv;
  await fake?.close();
  work?.remove();
});

async function capture(command: () => Promise<number>): Promise<{ code: number; stderr: string }> {
  let stderr = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
  try {
    return { code: await command(), stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe("the headless step-up refusal", () => {
  it("offers no command to paste when a challenged scope is not inert in a shell", async () => {
    const loggedIn = await capture(() => login([fake.resourceUrl]));
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    const refused = await capture(() => fetchCommand(["--no-browser", fake.resourceUrl]));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`needs scope ${HOSTILE_SCOPE}`);
    expect(refused.stderr).toContain("run this command again with --device");
    expect(refused.stderr).not.toContain("gatehouse login --device --scope");
  }, 30_000);
});
