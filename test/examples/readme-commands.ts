/**
 * The commands a README tells a user to type, read from its shell block so a test runs exactly
 * those (a README that drifts from what works fails the test instead of the user).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./package-source.js";

export interface ReadmeCommand {
  /** `NAME=value` assignments written before the program. */
  env: Record<string, string>;
  /** The program and its arguments, quotes removed. */
  argv: string[];
}

/** Splits a shell line into words: `"..."` and `'...'` quote, nothing else is interpreted. */
function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
}

/**
 * Every command of the first ```sh block after `heading` in `readmePath`: comments dropped,
 * backslash continuations joined, leading `NAME=value` words taken as the environment.
 */
export function readmeCommands(readmePath: string, heading: string): ReadmeCommand[] {
  const text = readFileSync(join(REPO_ROOT, readmePath), "utf8");
  const section = text.indexOf(`\n${heading}\n`);
  if (section < 0) throw new Error(`${readmePath} has no heading "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(section));
  if (!block?.[1]) throw new Error(`${readmePath}: no sh block under "${heading}"`);
  const lines = block[1]
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
  return lines.map((line) => {
    const all = words(line);
    const env: Record<string, string> = {};
    while (all[0] && /^[A-Z_][A-Z0-9_]*=/.test(all[0])) {
      const assignment = all.shift()!;
      const eq = assignment.indexOf("=");
      env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
    }
    return { env, argv: all };
  });
}

/** The one command that runs `file` (e.g. `examples/mcp/server.ts`). */
export function commandRunning(commands: readonly ReadmeCommand[], file: string): ReadmeCommand {
  const found = commands.filter((c) => c.argv.includes(file));
  if (found.length !== 1) throw new Error(`expected one command running ${file}, found ${found.length}`);
  return found[0]!;
}
