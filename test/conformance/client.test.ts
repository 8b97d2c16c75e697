/**
 * External test: every client `auth/*` scenario of the MCP conformance tool, at both spec
 * revisions (2025-11-25 with `--force`, so later scenarios run at that wire too, and 2026-07-28),
 * extension scenarios included, against `dist/conformance/client.js`. Any FAILURE or WARNING
 * fails the test; there is no expected-failures list. `CONFORMANCE_SUMMARY=<file>` writes each
 * scenario's check counts.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const adapter = join(root, "dist/conformance/client.js");

if (!existsSync(adapter)) {
  execFileSync("npm", ["run", "--silent", "build"], { cwd: root, stdio: "inherit" });
}
const node22 = execFileSync("bash", [join(root, "scripts/node22.sh")], {
  cwd: root,
  encoding: "utf8",
}).trim();
if (!node22 || !existsSync(node22)) throw new Error("scripts/node22.sh did not provide a Node 22 binary");
// Not a devDependency (it needs Node 22): installed, pinned, into .cache/conformance.
const tool = execFileSync("bash", [join(root, "scripts/conformance-tool.sh")], {
  cwd: root,
  encoding: "utf8",
}).trim();

const listing = execFileSync(node22, [tool, "list"], { cwd: root, encoding: "utf8" });
const clientSection = listing.slice(
  listing.indexOf("Client scenarios"),
  listing.indexOf("Authorization server scenarios"),
);
const scenarios = [...clientSection.matchAll(/- (auth\/[a-z0-9-]+)/g)].map((m) => m[1]!);
// Extension scenarios are not on the spec timeline, so they need --force at every revision.
const extensions = new Set(
  [...clientSection.matchAll(/- (auth\/[a-z0-9-]+) \[extension\]/g)].map((m) => m[1]!),
);

interface Check {
  id: string;
  status: string;
  description?: string;
}

const work = mkdtempSync(join(tmpdir(), "gatehouse-conformance-"));
// Per-scenario outcome, written to $CONFORMANCE_SUMMARY (if set) for reports.
const summary: Record<string, { skipped?: true; exit?: number; counts?: Record<string, number> }> = {};
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  const target = process.env.CONFORMANCE_SUMMARY;
  if (target) writeFileSync(target, `${JSON.stringify(summary, null, 2)}\n`);
});

// Each scenario is two short-lived processes (the tool with its mock servers, and our client),
// mostly waiting on each other: one more than the cores, at most 3 (CI has 2 cores).
const CONCURRENCY = Math.min(3, availableParallelism() + 1);
let running = 0;
const waiting: Array<() => void> = [];
async function limited<T>(task: () => Promise<T>): Promise<T> {
  if (running >= CONCURRENCY) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await task();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

function runScenario(
  scenario: string,
  version: string,
): Promise<{ code: number; output: string; checks: Check[] | undefined }> {
  const outDir = join(work, `${scenario.replace("/", "_")}-${version}`);
  const args = [
    tool,
    "client",
    "--command",
    `node ${adapter}`,
    "--scenario",
    scenario,
    "--spec-version",
    version,
  ];
  if (version === "2025-11-25" || extensions.has(scenario)) args.push("--force");
  args.push("-o", outDir);
  return new Promise((done) => {
    const child = spawn(node22, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    child.on("close", (code) => {
      let checks: Check[] | undefined;
      // The tool writes <out>/<scenario>-<timestamp>/checks.json; the scenario name holds a "/".
      const visit = (dir: string): void => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const path = join(dir, entry.name);
          if (entry.isDirectory()) visit(path);
          else if (entry.name === "checks.json") checks = JSON.parse(readFileSync(path, "utf8")) as Check[];
        }
      };
      if (existsSync(outDir)) visit(outDir);
      done({ code: code ?? 1, output, checks });
    });
  });
}

describe.concurrent("MCP conformance tool: client auth scenarios", () => {
  it("lists the auth scenarios", () => {
    expect(scenarios.length).toBeGreaterThan(20);
  });
  for (const version of ["2025-11-25", "2026-07-28"]) {
    for (const scenario of scenarios) {
      it(`${scenario} @ ${version}`, { timeout: 180_000 }, async () => {
        const result = await limited(() => runScenario(scenario, version));
        const counts: Record<string, number> = {};
        for (const c of result.checks ?? []) counts[c.status] = (counts[c.status] ?? 0) + 1;
        summary[`${scenario} @ ${version}`] = /SKIPPED: scenario/.test(result.output)
          ? { skipped: true }
          : { exit: result.code, counts };
        if (/SKIPPED: scenario/.test(result.output)) {
          // Not applicable at this revision without --force (only 2026-07-28 runs without it).
          expect(version).toBe("2026-07-28");
          return;
        }
        expect(result.checks, `no checks.json written:\n${result.output.slice(-3000)}`).toBeDefined();
        const bad = (result.checks ?? []).filter((c) => c.status === "FAILURE" || c.status === "WARNING");
        expect(bad, `${scenario} @ ${version}:\n${result.output.slice(-4000)}`).toEqual([]);
        expect(result.output).not.toMatch(/timed out/i);
        expect(result.code, result.output.slice(-3000)).toBe(0);
      });
    }
  }
});
