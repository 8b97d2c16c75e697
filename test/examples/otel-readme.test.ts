/**
 * Issue 26: examples/otel had no README and docs/index.md listed neither it nor examples/notes.
 * The README's command is read from its shell block and run as written (Node 20, the repository
 * root); what it prints is what the README's table says. docs/index.md links every example's README.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ensureBuilt } from "../cli/helpers.js";
import { REPO_ROOT } from "./package-source.js";
import { readmeCommands } from "./readme-commands.js";

describe("examples/otel/README.md", () => {
  it("its command runs on Node 20 and prints the two token requests, their spans and both histograms", () => {
    ensureBuilt();
    const run = readmeCommands("examples/otel/README.md", "## Run it").find((c) => c.argv[0] === "node");
    expect(run?.argv).toEqual(["node", "--import", "./scripts/typescript.mjs", "examples/otel/server.ts"]);
    const output = execFileSync(process.execPath, run!.argv.slice(1), {
      cwd: REPO_ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    expect(output).toContain("POST /token → 200");
    expect(output).toContain("POST /token → 401");
    expect(output).toContain("name: 'POST /token'");
    expect(output).toContain("'oauth.error': 'invalid_client'");
    expect(output).toMatch(/name: 'gatehouse\.store [A-Za-z]+'/);
    expect(output).toContain("gatehouse.authorization_server.request.duration");
    expect(output).toContain("gatehouse.store.operation.duration");
  }, 60_000);

  it("docs/index.md links the README of every example", () => {
    const index = readFileSync(`${REPO_ROOT}/docs/index.md`, "utf8");
    for (const example of ["mcp", "notes", "otel"]) {
      expect(index).toContain(`(../examples/${example}/README.md)`);
    }
  });
});
