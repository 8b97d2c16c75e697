/**
 * Issue 26 (low): a mistyped command got no suggestion, `-v` was refused, and `users ad` pointed
 * at 'gatehouse users ad --help', which does not exist. Through the built CLI, output read back.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, ROOT, runCli } from "./helpers.js";

beforeAll(() => ensureBuilt());

describe("command-line typos", () => {
  it("a near-miss command: status 2 and a suggestion; a far one: no guess", async () => {
    const near = await runCli(["sever"]);
    expect(near.code).toBe(2);
    expect(near.stderr).toContain("gatehouse: unknown command 'sever' (did you mean 'serve'?)");
    const far = await runCli(["xyzzy-plugh"]);
    expect(far.code).toBe(2);
    expect(far.stderr).toContain("gatehouse: unknown command 'xyzzy-plugh'\n");
  });

  it("-v prints the version, as --version does", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    for (const flag of ["-v", "--version"]) {
      const r = await runCli([flag]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${version}\n`);
    }
  });

  it("an unknown subcommand suggests the near one and points at help that exists", async () => {
    const r = await runCli(["users", "ad", "alice"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('gatehouse users: unknown subcommand "ad" (did you mean "add"?)');
    expect(r.stderr).toContain("(see 'gatehouse users --help')");
    const help = await runCli(["users", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("gatehouse users add");
  });
});
