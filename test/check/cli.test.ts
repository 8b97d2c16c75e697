/**
 * `gatehouse check` as a command: exit status 0 / 1 / 2, `--json` prints one object, colour only on
 * a TTY without NO_COLOR.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { run, useColour } from "../../src/cli/commands/check.js";
import { type Fixture, type FixtureOptions, startFixture } from "./fixture.js";

const open: Fixture[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(open.splice(0).map((f) => f.close()));
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  const code = await run(args);
  vi.restoreAllMocks();
  return { code, stdout, stderr };
}

async function fixture(options: FixtureOptions = {}) {
  const f = await startFixture(options);
  open.push(f);
  return f;
}

describe("gatehouse check (command)", () => {
  it("exits 0 and prints a grouped report when every MUST holds", async () => {
    const f = await fixture();
    const { code, stdout } = await cli([f.resourceUrl]);
    expect(code).toBe(0);
    expect(stdout).toContain("Protected resource metadata (RFC 9728)");
    expect(stdout).toContain("✔ A request without a token gets 401");
    expect(stdout).toContain("Result: every MUST rule checked holds");
    expect(stdout).not.toContain("\u001b["); // stdout is not a TTY here
  });

  it("exits 1 when a MUST fails, naming the rule", async () => {
    const f = await fixture({ asMetadata: (doc) => ({ ...doc, issuer: "https://evil.example" }) });
    const { code, stdout } = await cli([f.resourceUrl]);
    expect(code).toBe(1);
    expect(stdout).toContain("[as.issuer] MUST · RFC 8414 §3.3");
  });

  it("--json prints exactly one JSON object with the verdicts", async () => {
    const f = await fixture({ prm: (doc) => ({ ...doc, resource: "https://other.example/" }) });
    const { code, stdout } = await cli([f.resourceUrl, "--json", "--revision", "2025-11-25"]);
    expect(code).toBe(1);
    const report = JSON.parse(stdout);
    expect(report.ok).toBe(false);
    expect(report.revision).toBe("2025-11-25");
    expect(report.findings.filter((x: { rule: string }) => x.rule === "prm.resource")[0].outcome).toBe(
      "fail",
    );
  });

  it.each([
    [[]],
    [["https://a.example", "https://b.example"]],
    [["not-a-url"]],
    [["https://rs.example/mcp#frag"]],
    [["https://rs.example/mcp", "--revision", "2024-01-01"]],
    [["https://rs.example/mcp", "--timeout", "soon"]],
    [["https://rs.example/mcp", "--bogus-flag"]],
  ])("exits 2 on a usage error: %j", async (args) => {
    const { code, stdout, stderr } = await cli(args);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain("Usage: gatehouse check");
  });

  it("--help exits 0", async () => {
    const { code, stdout } = await cli(["--help"]);
    expect(code).toBe(0);
    expect(stdout).toContain("--json");
  });
});

describe("useColour", () => {
  it("colours only a TTY, and never with NO_COLOR set", () => {
    expect(useColour({ isTTY: true }, {})).toBe(true);
    expect(useColour({ isTTY: false }, {})).toBe(false);
    expect(useColour({}, {})).toBe(false);
    expect(useColour({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
  });
});
