/**
 * Module hooks (node:module `register`) that let a child process started by a test import a
 * TypeScript file from test/ on Node 20: the source is transpiled with the project's `typescript`,
 * one module at a time and without type checking (`npm run typecheck` does that). Only for test
 * entry scripts such as test/faults/serve-with-fault.mjs; the shipped package never loads it.
 */
import { readFile } from "node:fs/promises";
import ts from "typescript";

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context);
  const source = await readFile(new URL(url), "utf8");
  const { outputText } = ts.transpileModule(source, {
    fileName: new URL(url).pathname,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      verbatimModuleSyntax: true,
      sourceMap: false,
    },
  });
  return { format: "module", source: outputText, shortCircuit: true };
}
