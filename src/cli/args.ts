/**
 * Command-line argument parsing for the `gatehouse` subcommands, on `node:util` `parseArgs` (no
 * dependency). Errors are {@link UsageError}s: the command prints the message and its usage text and
 * exits with status 2.
 */
import { parseArgs } from "node:util";
import { GatehouseError } from "../shared/errors.js";
import { explainParseArgsError } from "./command-line-text.js";

export type OptionSpec =
  | { type: "boolean"; short?: string; description: string }
  | { type: "string"; short?: string; multiple?: boolean; description: string; valueName?: string };

export type OptionSpecs = Record<string, OptionSpec>;

/** Wrong usage of a command (unknown flag, missing value, bad number). Exit status 2. */
export class UsageError extends GatehouseError<"ERR_USAGE"> {
  constructor(message: string) {
    super("ERR_USAGE", message);
    this.name = "UsageError";
  }
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  /** Options in command-line order (for flags that pair up, like `--resource` and `--scopes`). */
  ordered: { name: string; value: string | undefined }[];
}

/** Parses `args` against `specs`; unknown options and missing values become a {@link UsageError}. */
export function parseCommandArgs(args: string[], specs: OptionSpecs): ParsedArgs {
  const options: Record<string, { type: "boolean" | "string"; short?: string; multiple?: boolean }> = {};
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = { type: spec.type };
    if (spec.short) options[name].short = spec.short;
    if (spec.type === "string" && spec.multiple) options[name].multiple = true;
  }
  try {
    const parsed = parseArgs({ args, options, allowPositionals: true, strict: true, tokens: true });
    const ordered: ParsedArgs["ordered"] = [];
    for (const token of parsed.tokens ?? []) {
      if (token.kind === "option") ordered.push({ name: token.name, value: token.value });
    }
    return {
      values: parsed.values as ParsedArgs["values"],
      positionals: parsed.positionals,
      ordered,
    };
  } catch (error) {
    // Node's own text has unbalanced quotes and talks about positionals: say it plainly.
    throw new UsageError(explainParseArgsError(error, Object.keys(specs)));
  }
}

/** Refuses positional arguments, for a command that takes options only. */
export function noPositionals(parsed: ParsedArgs): void {
  if (parsed.positionals.length)
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[0])}`);
}

/** The single positional argument of a command; `what` names it in the error ("a username"). */
export function onePositional(parsed: ParsedArgs, what: string): string {
  const [value, extra] = parsed.positionals;
  if (!value) throw new UsageError(`${what} is required`);
  if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  return value;
}

export function stringValue(parsed: ParsedArgs, name: string): string | undefined {
  const v = parsed.values[name];
  return typeof v === "string" ? v : undefined;
}

export function stringList(parsed: ParsedArgs, name: string): string[] {
  const v = parsed.values[name];
  if (Array.isArray(v)) return v;
  return typeof v === "string" ? [v] : [];
}

export function flag(parsed: ParsedArgs, name: string): boolean {
  return parsed.values[name] === true;
}

/** A non-negative integer option (`--port 0` is allowed), or undefined when absent. */
export function integerValue(
  parsed: ParsedArgs,
  name: string,
  max = Number.MAX_SAFE_INTEGER,
): number | undefined {
  const raw = stringValue(parsed, name);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) > max) {
    throw new UsageError(`--${name} must be an integer between 0 and ${max}`);
  }
  return Number(raw);
}

/** Usage text: a synopsis line and one line per option. */
export function formatUsage(synopsis: string, specs: OptionSpecs, extra = ""): string {
  const rows = Object.entries(specs).map(([name, spec]) => {
    const value = spec.type === "string" ? ` <${spec.valueName ?? "value"}>` : "";
    const short = spec.short ? `-${spec.short}, ` : "";
    return [`  ${short}--${name}${value}`, spec.description] as const;
  });
  const width = Math.min(40, Math.max(...rows.map(([left]) => left.length)) + 2);
  const lines = rows.map(([left, text]) =>
    left.length + 1 > width ? `${left}\n${" ".repeat(width)}${text}` : `${left.padEnd(width)}${text}`,
  );
  return `Usage: ${synopsis}\n\nOptions:\n${lines.join("\n")}\n${extra ? `\n${extra}\n` : ""}`;
}
