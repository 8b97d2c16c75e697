/**
 * Module hooks registered by scripts/typescript.mjs: `.ts` files are loaded as ES modules after
 * TypeScript's `transpileModule` removes the types (no type check; `npm run typecheck` does that).
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const RELATIVE_JS = /^\.\.?\/.*\.js$/;

/** TypeScript sources import each other as `./x.js` (NodeNext style): that means `./x.ts` here. */
export async function resolve(specifier, context, nextResolve) {
  if (RELATIVE_JS.test(specifier) && context.parentURL?.endsWith(".ts")) {
    const asJs = new URL(specifier, context.parentURL);
    const asTs = new URL(specifier.replace(/\.js$/, ".ts"), context.parentURL);
    if (!existsSync(fileURLToPath(asJs)) && existsSync(fileURLToPath(asTs))) {
      return { url: asTs.href, shortCircuit: true };
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context);
  const path = fileURLToPath(url);
  const { outputText } = ts.transpileModule(await readFile(path, "utf8"), {
    fileName: path,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      // Keeps every import that is not marked `type`, as Node's own type stripping does.
      verbatimModuleSyntax: true,
      inlineSourceMap: true,
      inlineSources: true,
    },
  });
  return { format: "module", source: outputText, shortCircuit: true };
}
