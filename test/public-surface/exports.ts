/**
 * The public surface as a user of the package meets it (issue 23 item 9): every subpath in
 * package.json "exports", imported from the build (dist/, what `npm pack` ships), and the same
 * entries' .d.ts seen through the TypeScript checker, so a test can ask both what a value is at run
 * time and what type it declares. Nothing here lists names by hand: a new export is walked too.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import { ensureBuilt, ROOT } from "../cli/helpers.js";

interface ExportTarget {
  types: string;
  default: string;
}

/** One package.json export: `subpath` as a user writes it after `gatehouse-auth`, and its built files. */
export interface Entry {
  subpath: string;
  js: string;
  dts: string;
}

const packageJson = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  exports: Record<string, ExportTarget>;
};

/** Every package.json export, in its order. */
export function entries(): Entry[] {
  return Object.entries(packageJson.exports).map(([subpath, target]) => ({
    subpath: subpath === "." ? packageJson.name : `${packageJson.name}/${subpath.slice(2)}`,
    js: join(ROOT, target.default),
    dts: join(ROOT, target.types),
  }));
}

/** The run-time exports of every entry (the build is made first when it is missing). */
export async function importEntries(): Promise<Array<{ entry: Entry; values: Record<string, unknown> }>> {
  ensureBuilt();
  const loaded = [];
  for (const entry of entries()) {
    loaded.push({ entry, values: (await import(pathToFileURL(entry.js).href)) as Record<string, unknown> });
  }
  return loaded;
}

/** Every class among `values` whose instances are `Error`s (a subclass of Error at any depth). */
export function errorClasses(
  values: Record<string, unknown>,
): Array<[string, new (...args: never[]) => Error]> {
  return Object.entries(values).filter(
    (pair): pair is [string, new (...args: never[]) => Error] =>
      typeof pair[1] === "function" && (pair[1] === Error || pair[1].prototype instanceof Error),
  );
}

/** The TypeScript program over every entry's built .d.ts, with a way to find an entry's exports. */
export interface Declarations {
  checker: ts.TypeChecker;
  /** The exported symbols of an entry's .d.ts, aliases resolved, by name. */
  exportsOf(entry: Entry): Map<string, ts.Symbol>;
  /** The string literals a union type alias exported by `file` (a built .d.ts) stands for. */
  literalsOf(file: string, alias: string): Set<string>;
}

export function declarations(): Declarations {
  ensureBuilt();
  const files = entries().map((e) => e.dts);
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"],
  });
  const checker = program.getTypeChecker();
  const moduleSymbol = (file: string): ts.Symbol => {
    const source = program.getSourceFile(file);
    const symbol = source && checker.getSymbolAtLocation(source);
    if (!symbol) throw new Error(`${file} is not in the program (is dist built?)`);
    return symbol;
  };
  const resolved = (symbol: ts.Symbol): ts.Symbol =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  return {
    checker,
    exportsOf(entry) {
      return new Map(checker.getExportsOfModule(moduleSymbol(entry.dts)).map((s) => [s.name, resolved(s)]));
    },
    literalsOf(file, alias) {
      const symbol = checker.getExportsOfModule(moduleSymbol(file)).find((s) => s.name === alias);
      if (!symbol) throw new Error(`${file} does not export ${alias}`);
      return stringLiterals(checker.getDeclaredTypeOfSymbol(resolved(symbol)));
    },
  };
}

/** The string literals of a union (or one literal); a member that is not one (e.g. `string`) throws. */
export function stringLiterals(type: ts.Type): Set<string> {
  const members = type.isUnion() ? type.types : [type];
  const literals = new Set<string>();
  for (const member of members) {
    if (!member.isStringLiteral()) throw new Error(`not a closed set of string literals: ${member.flags}`);
    literals.add(member.value);
  }
  return literals;
}
