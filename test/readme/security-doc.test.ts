/**
 * docs/security.md claims, for every rule, the code that enforces it and the tests that pin it.
 * Those claims cannot silently rot: every quoted test name must exist in a test file, and every
 * `src/...` or `test/...` path it names must exist.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../examples/package-source.js";

const PAGE = readFileSync(join(REPO_ROOT, "docs", "security.md"), "utf8");

/** Test sources: the suite, and the storage contract suite published from src/storage/testing. */
function testSources(): string {
  return [join(REPO_ROOT, "test"), join(REPO_ROOT, "src", "storage", "testing")]
    .flatMap((dir) =>
      readdirSync(dir, { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".ts"))
        .map((f) => readFileSync(join(dir, f), "utf8")),
    )
    .join("\n");
}

/** The last cell of each table row: the "tests" column. */
function testCells(markdown: string): string[] {
  return markdown
    .split("\n")
    .filter((line) => line.startsWith("|") && !/^\|\s*(rule|---)/.test(line))
    .map((line) => line.split(" | ").at(-1) ?? "");
}

describe("docs/security.md", () => {
  it("every test it quotes exists (a name with … is matched up to the ellipsis)", () => {
    const sources = testSources();
    // Prose paragraphs are joined so a name wrapped over two lines still reads as one.
    const prose = PAGE.split("\n")
      .filter((l) => !l.startsWith("|"))
      .join("\n")
      .split(/\n\s*\n/)
      .map((paragraph) => paragraph.replace(/\s*\n\s*/g, " "));
    const quoted = [...prose, ...testCells(PAGE)]
      .flatMap((text) => [...text.matchAll(/"([^"]{12,})"/g)].map((m) => m[1]!))
      .map((name) => name.split("…")[0]!.trim())
      .filter((name) => name.length >= 12);
    expect(quoted.length).toBeGreaterThan(60);
    const missing = quoted.filter((name) => !sources.includes(name));
    expect(missing).toEqual([]);
  });

  it("every src/ and test/ path it names exists", () => {
    const paths = [...PAGE.matchAll(/`((?:src|test)\/[A-Za-z0-9_./-]+)`/g)].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(10);
    const missing = paths.filter((p) => !existsSync(join(REPO_ROOT, p.replace(/\*$/, ""))));
    expect(missing).toEqual([]);
  });

  it("covers every group of the threat model", () => {
    for (const group of [
      "Authorization endpoint",
      "Token endpoint",
      "Refresh tokens",
      "Fetching Client ID Metadata Documents",
      "Dynamic registration",
      "Consent and login pages",
      "Resource server",
      "Client",
      "Storage, faults and load",
    ]) {
      expect(PAGE).toMatch(new RegExp(`^## ${group.replace(/[()]/g, "\\$&")}`, "m"));
    }
  });
});
