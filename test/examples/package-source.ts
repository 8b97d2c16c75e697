/**
 * User-facing code (README snippets, examples/) imports the package by its name (`gatehouse-auth`,
 * `gatehouse-auth/resource-server`, ...). Those names resolve to `dist/` through package.json
 * `exports`; the tests check the code against the sources instead, so they never run against a
 * stale build. This maps each exported name to its source file, from package.json itself.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** `gatehouse/<subpath>` → absolute path of its `src/**.ts` file, for every entry of `exports`. */
export function packageSourceMap(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
    name: string;
    exports: Record<string, { types: string }>;
  };
  const map = new Map<string, string>();
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const name = subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`;
    const source = target.types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts");
    map.set(name, join(REPO_ROOT, source));
  }
  return map;
}

const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(["'])([^"']+)\2/g;

/**
 * Rewrites `gatehouse/...` specifiers to absolute source paths and relative specifiers to
 * absolute paths from `fromDir` (so the rewritten file can live elsewhere). An unknown
 * `gatehouse/...` name is left alone, so it fails to resolve loudly.
 */
export function rewriteSpecifiers(code: string, fromDir: string, map = packageSourceMap()): string {
  return code.replace(SPECIFIER, (whole, lead: string, quote: string, spec: string) => {
    const source = map.get(spec);
    if (source) return `${lead}${quote}${source}${quote}`;
    if (spec.startsWith("./") || spec.startsWith("../")) {
      const absolute = resolve(fromDir, spec.replace(/\.js$/, ".ts"));
      return `${lead}${quote}${absolute}${quote}`;
    }
    return whole;
  });
}

/**
 * Imports an example file with its `gatehouse/...` imports pointed at the sources. The rewritten
 * copy is written under `.cache/examples/` (git-ignored).
 */
export async function importExample<T>(examplePath: string): Promise<T> {
  const absolute = isAbsolute(examplePath) ? examplePath : join(REPO_ROOT, examplePath);
  const code = rewriteSpecifiers(readFileSync(absolute, "utf8"), dirname(absolute));
  const outDir = join(REPO_ROOT, ".cache", "examples", relative(REPO_ROOT, dirname(absolute)));
  mkdirSync(outDir, { recursive: true });
  const out = join(outDir, basename(absolute));
  writeFileSync(out, code);
  return (await import(pathToFileURL(out).href)) as T;
}
