/**
 * README snippets cannot rot: every ```ts block of README.md is written to its own module and
 * type-checked with the TypeScript compiler against the sources (`gatehouse/...` mapped to `src/`
 * with `paths`), together with the examples under examples/. The "protect a service" snippets
 * are also run on loopback by test/examples/protect.test.ts.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";
import { packageSourceMap, REPO_ROOT } from "../examples/package-source.js";

const README = join(REPO_ROOT, "README.md");
const SNIPPET_DIR = join(REPO_ROOT, ".cache", "readme-snippets");

/** The fenced code blocks of a Markdown document with the given info string. */
function fencedBlocks(markdown: string, language: string): string[] {
  const blocks: string[] = [];
  const fence = new RegExp(`^\`\`\`${language}[ \\t]*\\n([\\s\\S]*?)^\`\`\`[ \\t]*$`, "gm");
  for (const match of markdown.matchAll(fence)) blocks.push(match[1]!);
  return blocks;
}

function listTs(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));
}

/** Type-checks `files` with the repo's compiler options, `gatehouse/*` pointing at the sources. */
function typeCheck(files: string[]): ts.Diagnostic[] {
  const configPath = join(REPO_ROOT, "tsconfig.json");
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, REPO_ROOT);
  const paths: Record<string, string[]> = {};
  for (const [name, source] of packageSourceMap()) paths[name] = [source];
  const options: ts.CompilerOptions = { ...parsed.options, noEmit: true, paths, baseUrl: REPO_ROOT };
  const program = ts.createProgram(files, options);
  const ours = new Set(files.map((f) => resolve(f)));
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file === undefined || ours.has(resolve(d.file.fileName)));
}

function format(diagnostics: readonly ts.Diagnostic[]): string {
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => REPO_ROOT,
    getNewLine: () => "\n",
  });
}

/** A `gatehouse` command line: installed (`gatehouse`), in this checkout or a project (`npx gatehouse`), without installing (`npx -p gatehouse-auth gatehouse`), or the built file. */
const COMMAND_LINE = /(?:^|npx |npx -p gatehouse-auth )gatehouse |dist\/cli\/main\.js /;

describe("README.md", () => {
  const readme = readFileSync(README, "utf8");
  const snippets = fencedBlocks(readme, "ts");
  let files: string[] = [];

  beforeAll(() => {
    rmSync(SNIPPET_DIR, { recursive: true, force: true });
    mkdirSync(SNIPPET_DIR, { recursive: true });
    files = snippets.map((code, i) => {
      const file = join(SNIPPET_DIR, `${String(i + 1).padStart(2, "0")}.ts`);
      // Each snippet is its own module (top-level await and local names stay local).
      writeFileSync(file, /\b(import|export)\b/.test(code) ? code : `${code}\nexport {};\n`);
      return file;
    });
  });

  it("keeps the two set-up commands of the Quick start", () => {
    const shell = fencedBlocks(readme, "sh").join("\n");
    expect(shell).toMatch(/^npm ci && npm start\b/m);
    expect(shell).toMatch(/^npm ci && npm test\b/m);
  });

  it("has TypeScript snippets for each step (node:http, Express, Hono, the server, the client)", () => {
    const all = snippets.join("\n");
    for (const name of [
      "gatehouse-auth/node",
      "gatehouse-auth/express",
      "gatehouse-auth/hono",
      "gatehouse-auth/authorization-server",
      "gatehouse-auth/client",
    ]) {
      expect(all).toContain(`from "${name}"`);
    }
  });

  it("every gatehouse command line in README.md and examples/mcp/README.md names a real command and real flags", () => {
    const main = readFileSync(join(REPO_ROOT, "src/cli/main.ts"), "utf8");
    const pages = [readme, readFileSync(join(REPO_ROOT, "examples/mcp/README.md"), "utf8")];
    const lines = pages
      .flatMap((page) => fencedBlocks(page, "sh"))
      .join("\n")
      .replace(/\\\n\s*/g, " ") // join continued lines
      .split("\n")
      .filter((line) => COMMAND_LINE.test(line));
    expect(lines.length).toBeGreaterThanOrEqual(6);
    const problems: string[] = [];
    for (const line of lines) {
      const args = line.replace(/#.*$/, "").split(COMMAND_LINE)[1]!.trim().split(/\s+/);
      const command = args[0]!;
      if (!new RegExp(`^\\s*${command}: \\{`, "m").test(main)) {
        problems.push(`${command}: not a command in src/cli/main.ts`);
        continue;
      }
      const own = readFileSync(join(REPO_ROOT, "src/cli/commands", `${command}.ts`), "utf8");
      // The store flags (--data, --database-url, --config) are shared: STORE_OPTIONS in server-runtime.ts.
      const source = own.includes("...STORE_OPTIONS")
        ? own + readFileSync(join(REPO_ROOT, "src/cli/server-runtime.ts"), "utf8")
        : own;
      for (const flag of args.filter((a) => a.startsWith("--")).map((a) => a.slice(2).split("=")[0]!)) {
        if (!source.includes(`"${flag}"`) && !new RegExp(`^\\s*${flag}: \\{`, "m").test(source)) {
          problems.push(`${command} --${flag}: no such option in src/cli/commands/${command}.ts`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it("every ```ts snippet, and every example, type-checks against the sources", () => {
    const examples = listTs(join(REPO_ROOT, "examples"));
    expect(examples.length).toBeGreaterThan(0);
    // A negative control in the same program: proves the check can fail (an API misuse is caught).
    const control = join(SNIPPET_DIR, "negative-control.ts");
    writeFileSync(
      control,
      `import { createResourceServer } from "gatehouse-auth/resource-server";\ncreateResourceServer({ resource: 42 });\n`,
    );
    const diagnostics = typeCheck([...files, ...examples, control]);
    const inControl = (d: ts.Diagnostic) => d.file !== undefined && resolve(d.file.fileName) === control;
    expect(diagnostics.filter(inControl).length).toBeGreaterThan(0);
    expect(format(diagnostics.filter((d) => !inControl(d)))).toBe("");
  }, 180_000);

  it("every relative link in README.md, docs/index.md, docs/security.md and examples/mcp/README.md resolves", () => {
    const missing: string[] = [];
    for (const page of ["README.md", "docs/index.md", "docs/security.md", "examples/mcp/README.md"]) {
      const path = join(REPO_ROOT, page);
      for (const [, target] of readFileSync(path, "utf8").matchAll(/\]\(([^)\s]+)\)/g)) {
        if (!target || /^[a-z]+:/i.test(target) || target.startsWith("#")) continue;
        const resolved = resolve(dirname(path), target.split("#")[0]!);
        if (!existsSync(resolved)) missing.push(`${page} → ${relative(REPO_ROOT, resolved)}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe("docs/index.md", () => {
  const page = readFileSync(join(REPO_ROOT, "docs", "index.md"), "utf8");

  it("every entry point it lists is in package.json exports, and the names it gives are exported there", async () => {
    const map = packageSourceMap();
    const table = page.slice(page.indexOf("## Package entry points"));
    const rows = table.split("\n").filter((l) => l.startsWith("| `gatehouse"));
    expect(rows.length).toBeGreaterThanOrEqual(6);
    const problems: string[] = [];
    for (const row of rows) {
      const [entries = "", holds = ""] = row.split(" | ");
      const names = [...entries.matchAll(/`(gatehouse[^`]*)`/g)].map((m) => m[1]!);
      const exported = new Set<string>();
      for (const name of names) {
        const source = map.get(name);
        if (!source) {
          problems.push(`${name}: not in package.json exports`);
          continue;
        }
        for (const key of Object.keys((await import(source)) as object)) exported.add(key);
      }
      // Identifiers in the description (`createAuthFetch`, `OAuthError`, ...) must be exports of the row.
      for (const [, identifier] of holds.matchAll(/`([A-Za-z][A-Za-z0-9]*)`/g)) {
        if (!exported.has(identifier!)) problems.push(`${names.join(", ")}: no export named ${identifier}`);
      }
    }
    expect(problems).toEqual([]);
  }, 60_000);
});
