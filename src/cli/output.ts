/**
 * Output helpers shared by the server-side commands: human text on stdout, one JSON object per
 * line with `--json`, warnings and errors on stderr, generated passwords, secrets read from stdin.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "../shared/log.js";
import { UsageError } from "./args.js";
import { nearestName } from "./command-line-text.js";

export function out(text: string): void {
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

export function err(text: string): void {
  process.stderr.write(text.endsWith("\n") ? text : `${text}\n`);
}

/** Exactly one JSON line on stdout (what scripts and tests parse). */
export function outJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/**
 * A strong generated password: 20 characters from a 57-letter alphabet without look-alikes (about 116 bits), drawn
 * without modulo bias, easy to copy (no symbols a shell or a terminal would mangle).
 */
export function generatePassword(length = 20): string {
  const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  let outText = "";
  while (outText.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 256 - 256 % 57 = 228: bytes at or above it would bias the first letters.
      if (byte >= 256 - (256 % alphabet.length)) continue;
      outText += alphabet[byte % alphabet.length];
      if (outText.length === length) break;
    }
  }
  return outText;
}

/** Reads stdin to the end and returns its first line (without the line ending). */
export async function readSecretFromStdin(what: string): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  const first = text.split(/\r?\n/, 1)[0] ?? "";
  if (first === "") throw new UsageError(`--${what}-stdin: nothing was read from standard input`);
  return first;
}

/** Formats an epoch-ms time for tables. */
export function isoTime(ms: number | undefined): string {
  return ms === undefined ? "-" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** A plain text table: columns padded to their widest cell. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

/**
 * Runs a command body: a {@link UsageError} prints the message and where to find the usage (status 2); any other
 * error prints its message (status 1). Messages never contain a secret: nothing here formats one.
 */
export async function runCommand(name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof UsageError) {
      err(`gatehouse ${name}: ${error.message}\n(see 'gatehouse ${name} --help')`);
      return 2;
    }
    err(`gatehouse ${name}: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

/**
 * Runs `gatehouse <command> <subcommand> ...` inside {@link runCommand}: `help`, `--help` and `-h`
 * print the usage; a missing or unknown subcommand is a usage error.
 */
export async function runSubcommand(
  command: string,
  usage: string,
  subcommands: Record<string, (args: string[]) => Promise<number>>,
  args: string[],
): Promise<number> {
  const [sub, ...rest] = args;
  const handler = sub !== undefined && Object.hasOwn(subcommands, sub) ? subcommands[sub] : undefined;
  // Errors name `gatehouse users add`, or just `gatehouse users` for a subcommand that does not
  // exist (whose --help would not exist either).
  return runCommand(`${command}${handler ? ` ${sub}` : ""}`, async () => {
    if (sub === "--help" || sub === "-h" || sub === "help") return printUsage(usage);
    if (!handler) {
      const guess = sub === undefined ? undefined : nearestName(sub, Object.keys(subcommands));
      throw new UsageError(
        sub
          ? `unknown subcommand ${JSON.stringify(sub)}${guess ? ` (did you mean ${JSON.stringify(guess)}?)` : ""}`
          : "a subcommand is required",
      );
    }
    return handler(rest);
  });
}

/** Printed to stderr whenever plain http is served: nobody should miss it. */
export const INSECURE_BANNER = [
  "!!! INSECURE DEVELOPMENT MODE: plain http on loopback (--insecure-loopback).",
  "!!! Cookies lose Secure, tokens cross the wire unencrypted. Never expose this to a network.",
].join("\n");

/**
 * A `!!!` banner of a server command whose log is JSON lines on stderr: plain text on a terminal,
 * where a person reads it; off one (a pipe, journald, a file) one JSON line (`banner`, its text
 * whole), so every line of the log parses (`jq -c 'select(.audit)'`).
 */
export function banner(text: string, log: Logger): void {
  if (process.stderr.isTTY) err(text);
  else log.warn("banner", { text });
}

/** Prints a command's usage on stdout; returns exit status 0 (for `--help`). */
export function printUsage(usage: string): number {
  out(usage);
  return 0;
}
