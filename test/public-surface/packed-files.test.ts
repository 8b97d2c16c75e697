/**
 * What `npm pack` publishes (issue 23 item 9): the build of the library and the command, not the
 * MCP conformance tool's client under test (src/conformance/, run from this checkout's dist/ by
 * test/conformance and `npm run conformance:client`). Asks npm itself (`npm pack --dry-run`), so
 * package.json "files" is judged as npm reads it; test/cli/packed-install.test.ts checks the same
 * on a real install of the tarball.
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ensureBuilt, ROOT } from "../cli/helpers.js";

describe("npm pack", () => {
  it("ships dist without the conformance harness, and with every entry's build", () => {
    ensureBuilt();
    const [packed] = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
        cwd: ROOT,
        encoding: "utf8",
      }),
    ) as Array<{ files: Array<{ path: string }> }>;
    const files = packed!.files.map((f) => f.path);
    expect(files.filter((path) => path.includes("conformance"))).toEqual([]);
    // Not an empty or broken pack: the entries and the command are there.
    for (const path of [
      "dist/index.js",
      "dist/client/index.js",
      "dist/cli/main.js",
      "dist/storage/index.d.ts",
    ]) {
      expect(files).toContain(path);
    }
  }, 60_000);
});
