/**
 * External test: `gatehouse check` against the MCP conformance tool's mock servers. The tool cannot
 * serve its mocks on their own; it starts them for a client scenario and runs a client command with
 * the server URL appended. So the "client" here is `gatehouse check --json`: the scenario's own
 * client checks fail (the auditor does not log in), and what is asserted is the auditor's report,
 * read from the stdout the tool saves.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CheckReport } from "../../src/check/index.js";

const root = resolve(import.meta.dirname, "../..");
const cli = join(root, "dist/cli/main.js");

if (!existsSync(join(root, "dist/cli/commands/check.js"))) {
  try {
    execFileSync("npm", ["run", "--silent", "build"], { cwd: root, stdio: "inherit" });
  } catch {
    // tsc still emits on type errors elsewhere; the existence check below decides.
  }
}
if (!existsSync(join(root, "dist/cli/commands/check.js"))) {
  throw new Error("dist/cli/commands/check.js is missing and `npm run build` did not produce it");
}
const node22 = execFileSync("bash", [join(root, "scripts/node22.sh")], {
  cwd: root,
  encoding: "utf8",
}).trim();
if (!node22 || !existsSync(node22)) throw new Error("scripts/node22.sh did not provide a Node 22 binary");
// The tool is not a dependency (it needs Node 22): scripts/conformance-tool.sh installs it, pinned.
const tool = execFileSync("bash", [join(root, "scripts/conformance-tool.sh")], {
  cwd: root,
  encoding: "utf8",
}).trim();

const work = mkdtempSync(join(tmpdir(), "gatehouse-check-conformance-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function findFile(dir: string, name: string): string | undefined {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const found = findFile(path, name);
      if (found) return found;
    } else if (entry.name === name) return path;
  }
  return undefined;
}

/** Runs one scenario with `gatehouse check --json` as the client; returns the auditor's report. */
function auditScenario(scenario: string): Promise<CheckReport> {
  const outDir = join(work, scenario.replace("/", "_"));
  const args = [
    tool,
    "client",
    "--command",
    `${process.execPath} ${cli} check --json`,
    "--scenario",
    scenario,
  ];
  args.push("-o", outDir);
  return new Promise((done, reject) => {
    const child = spawn(node22, args, { cwd: root, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", () => {
      const stdout = existsSync(outDir) ? findFile(outDir, "stdout.txt") : undefined;
      if (!stdout) return reject(new Error(`no saved stdout for ${scenario}:\n${stderr.slice(-2000)}`));
      const text = readFileSync(stdout, "utf8");
      try {
        done(JSON.parse(text) as CheckReport);
      } catch (error) {
        // Typically dist/ being rebuilt underneath the test: say what the client printed.
        const clientStderr = readFileSync(stdout.replace(/stdout\.txt$/, "stderr.txt"), "utf8");
        reject(
          new Error(
            `the auditor did not print JSON for ${scenario}: ${String(error)}\nstdout: ${text.slice(0, 300)}\nstderr: ${clientStderr.slice(0, 1000)}`,
          ),
        );
      }
    });
  });
}

const outcomes = (report: CheckReport, rule: string) =>
  report.findings.filter((f) => f.rule === rule).map((f) => f.outcome);
const failed = (report: CheckReport) => [
  ...new Set(report.findings.filter((f) => f.outcome === "fail").map((f) => f.rule)),
];

describe("gatehouse check against the conformance tool's mock servers", () => {
  it.each(["auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3"])(
    "%s: every MUST holds and the metadata is found",
    async (scenario) => {
      const report = await auditScenario(scenario);
      expect(failed(report)).toEqual([]);
      expect(report.ok).toBe(true);
      expect(outcomes(report, "challenge.status-401")).toEqual(["pass"]);
      expect(outcomes(report, "prm.discoverable")).toEqual(["pass"]);
      expect(outcomes(report, "as.metadata-found")).toEqual(["pass"]);
      expect(outcomes(report, "as.pkce").every((o) => o === "pass")).toBe(true);
    },
    60_000,
  );

  it("auth/resource-mismatch: prm.resource fails", async () => {
    const report = await auditScenario("auth/resource-mismatch");
    expect(failed(report)).toEqual(["prm.resource"]);
    expect(report.ok).toBe(false);
  }, 60_000);

  it("auth/metadata-issuer-mismatch: as.issuer fails", async () => {
    const report = await auditScenario("auth/metadata-issuer-mismatch");
    expect(failed(report)).toEqual(["as.issuer"]);
  }, 60_000);

  it("auth/iss-not-advertised: as.iss-parameter warns", async () => {
    const report = await auditScenario("auth/iss-not-advertised");
    expect(outcomes(report, "as.iss-parameter")).toContain("warn");
    expect(report.ok).toBe(true);
  }, 60_000);

  it("auth/2025-03-26-oauth-endpoint-fallback (no PRM): prm.discoverable fails", async () => {
    const report = await auditScenario("auth/2025-03-26-oauth-endpoint-fallback");
    expect(outcomes(report, "prm.discoverable")).toEqual(["fail"]);
  }, 60_000);
});
