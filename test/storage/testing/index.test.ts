/**
 * `gatehouse-auth/storage/testing` (src/storage/testing/index.ts) is the only storage entry point that
 * loads vitest: an application importing `gatehouse-auth/storage` or a backend in production must not
 * need it. Each entry point is imported by its package name (through the exports map, from dist/)
 * in a fresh Node process whose resolver refuses `vitest`.
 */

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../examples/package-source.js";

const run = promisify(execFile);

/** A resolve hook (node:module `register`) that fails any import of vitest, naming the importer. */
const REFUSE_VITEST = `export async function resolve(specifier, context, next) {
  if (specifier === "vitest" || specifier.startsWith("vitest/")) {
    throw new Error("vitest imported by " + context.parentURL);
  }
  return next(specifier, context);
}
`;

let dir: string;
let hookUrl: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gatehouse-storage-entry-"));
  const hook = join(dir, "refuse-vitest.mjs");
  writeFileSync(hook, REFUSE_VITEST);
  hookUrl = pathToFileURL(hook).href;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Imports `specifier` in a fresh Node process from the repository root (a package may import itself
 * by name), with vitest refused unless `allowVitest`; prints the module's export names.
 */
async function importInNode(
  specifier: string,
  allowVitest = false,
): Promise<{ ok: boolean; output: string }> {
  const register = `import { register } from "node:module"; register(${JSON.stringify(hookUrl)});`;
  const args = [
    ...(allowVitest ? [] : ["--import", `data:text/javascript,${encodeURIComponent(register)}`]),
    "--input-type=module",
    "-e",
    `const m = await import(${JSON.stringify(specifier)}); console.log(Object.keys(m).sort().join(","));`,
  ];
  try {
    const { stdout } = await run(process.execPath, args, { cwd: REPO_ROOT });
    return { ok: true, output: stdout };
  } catch (error) {
    return { ok: false, output: String((error as { stderr?: string }).stderr ?? error) };
  }
}

describe("storage entry points and vitest", () => {
  it.each([
    ["gatehouse-auth/storage", "openStore"],
    ["gatehouse-auth/storage/memory", "createMemoryStore"],
    ["gatehouse-auth/storage/sqlite", "createSqliteStore"],
    ["gatehouse-auth/storage/postgres", "createPostgresStore"],
  ])("%s loads without vitest", async (specifier, expected) => {
    const result = await importInNode(specifier);
    expect(result.output).toContain(expected);
    expect(result.ok).toBe(true);
  });

  it("gatehouse-auth/storage/testing is the subpath that loads vitest (and exports runStorageContract)", async () => {
    const refused = await importInNode("gatehouse-auth/storage/testing");
    expect(refused.ok).toBe(false);
    expect(refused.output).toContain("vitest imported by");
    expect(refused.output).toContain("/dist/storage/testing/index.js");
    const allowed = await importInNode("gatehouse-auth/storage/testing", true);
    expect(allowed).toEqual({ ok: true, output: "runStorageContract\n" });
  });
});
