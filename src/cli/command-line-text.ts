/**
 * The words the CLI says when a command line is wrong: option mistakes rewritten from Node's
 * `parseArgs` messages (whose own text has unbalanced quotes and talks about positionals), with a
 * "did you mean" for a near miss, and URL arguments checked before anything goes on the wire, so
 * `localhost:4101/notes` or `htp://...` get a sentence instead of `fetch failed`.
 * Both commands conventions (args.ts and client-commands.ts) use these, so one place decides.
 */

/** Node's `parseArgs` error codes (node:util, stable since Node 18.3). */
type ParseArgsError = Error & { code?: string };

/**
 * One line for a `parseArgs` error: `unknown option --frce (did you mean --force?)`,
 * `--port needs a value`, `--include takes no value`, `unexpected argument "x"`.
 * `optionNames` are the command's long option names, for the suggestion.
 */
export function explainParseArgsError(error: unknown, optionNames: readonly string[]): string {
  if (!(error instanceof Error)) return String(error);
  const { code, message } = error as ParseArgsError;
  // The option as typed sits in the first pair of single quotes of Node's message.
  const quoted = /'([^']*)'/.exec(message)?.[1] ?? "";
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const typed = quoted.split("=")[0] ?? quoted;
    const suggestion = nearestOption(typed, optionNames);
    return `unknown option ${typed}${suggestion ? ` (did you mean --${suggestion}?)` : ""}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    // "-p, --port <value>" or "-i, --include": name the long form only.
    const long = /--[\w-]+/.exec(quoted)?.[0] ?? quoted;
    return /argument missing/.test(message) ? `${long} needs a value` : `${long} takes no value`;
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") return `unexpected argument ${JSON.stringify(quoted)}`;
  return message;
}

/** The known option closest to `typed` when it is a plausible typo (edit distance ≤ 2). */
function nearestOption(typed: string, optionNames: readonly string[]): string | undefined {
  return nearestName(typed.replace(/^-+/, ""), optionNames);
}

/**
 * The known name (a command, a subcommand, an option without its dashes) closest to `typed` when
 * it is a plausible typo: edit distance ≤ 2 and shorter than the word itself.
 */
export function nearestName(typed: string, names: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(typed, name);
    if (distance <= 2 && distance < typed.length && (!best || distance < best.distance))
      best = { name, distance };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      row.push(Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, substitution));
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

/**
 * Checks a URL argument: an http or https URL with a host.
 * Returns the reason it is not, with the likely intended URL when one is obvious; undefined when
 * it is fine. The MCP authorization spec only speaks http(s) (https outside loopback).
 */
export function urlArgumentProblem(raw: string): string | undefined {
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (url && (url.protocol === "http:" || url.protocol === "https:") && url.hostname) return undefined;
  // `localhost:4101/notes` parses as scheme "localhost:"; `example.com/mcp` does not parse at all.
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw)?.[1];
  const withoutScheme = scheme ? raw.slice(scheme.length + 3) : raw;
  const host = withoutScheme.split(/[/:?#]/, 1)[0] ?? "";
  const loopback = host === "localhost" || host === "127.0.0.1" || withoutScheme.startsWith("[::1]");
  const guess = host || loopback ? `${loopback ? "http" : "https"}://${withoutScheme}` : undefined;
  return `${JSON.stringify(raw)} is not an http:// or https:// URL${
    scheme ? ` (it says ${scheme}://)` : ""
  }${guess ? `; did you mean ${guess}?` : ""}`;
}
