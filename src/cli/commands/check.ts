/**
 * `gatehouse check <resource-url>`: audits a deployed protected resource and its authorization
 * server against the spec (see docs/check.md). Exit status: 0 when every MUST rule holds, 1 when one
 * fails, 2 on a usage error.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { formatHuman, formatJson, type LoginOptions, parseResourceUrl, runCheck } from "../../check/index.js";
import type { Revision } from "../../check/types.js";
import { browserSession } from "../../client/user-agent/browser.js";
import { type CompiledPolicy, parseOperationPolicy } from "../../resource-server/operations/policy.js";
import { DEFAULT_REVISION } from "../../shared/revision.js";
import { isScopeToken } from "../../shared/scopes.js";
import { authorizationServerAtOrigin, configDirectory } from "../client-commands.js";
import { explainParseArgsError } from "../command-line-text.js";
import { describeSettings, issuerCompatibilityPath, loadIssuerCompatibility } from "../issuer-compat-file.js";

const USAGE = `Usage: gatehouse check <resource-url> [options]

Walks the discovery and authorization path of a protected resource and its authorization
server, and reports rule by rule what holds (see docs/check.md).

Options:
  --json               print one JSON object instead of text
  --revision <date>    spec revision whose rules apply: 2026-07-28 (default) or 2025-11-25
  --timeout <ms>       deadline per request (default 10000)
  --request <form>     how to call the resource: get, mcp (a JSON-RPC initialize POST) or
                       auto (default: GET, then the MCP POST if GET gets 404/405/406)
  --verbose            show the rule id and spec reference of every finding
  --login              also run the whole flow as a client (opens the browser, or prints
                       the URL with --print-url): token use, scope upgrade, refresh, lifetime
  --print-url          with --login: print the authorization URL instead of opening a browser
  --client-metadata-url <url>
                       with --login: identify with this Client ID Metadata Document URL
  --token-file <path>  also call each tool with the access token in this file (one holding
                       few scopes) and judge every refusal: 403 insufficient_scope naming
                       every needed scope, never a 200 with an error inside. Without
                       --policy every listed tool is called with empty arguments: use a
                       test deployment or a token that can do no harm
  --policy <file>      with --token-file: the operation policy (as gatehouse gateway reads
                       it); only the tools it refuses this token are called, each refusal
                       compared with the scopes it names
  --token-scope <s>    with --token-file: the token's scopes, space-separated (default: the
                       scope claim of a JWT)
  -h, --help           show this help

Per-issuer client compatibility settings in issuers.json (the config directory) are listed after
the report, never applied: the rules are checked as the spec states them.

Without --login or --token-file, only metadata requests, two deliberately bogus tokens (sent to
the resource URL itself) and one anonymous authorization request for an unknown client (two when
the first names a refusal of resource) leave this machine; --token-file's token goes to the
resource URL only. Exit status: 0 every MUST holds, 1 a MUST fails, 2 usage error.
`;

function usageError(message: string): number {
  process.stderr.write(`gatehouse check: ${message}\n\n${USAGE}`);
  return 2;
}

/** Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org). */
export function useColour(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "");
}

export async function run(args: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (error) {
    // Worded as for every other command: "unknown option --jsn (did you mean --json?)".
    return usageError(
      explainParseArgsError(
        error,
        [...USAGE.matchAll(/--([a-z][\w-]*)/g)].map((m) => m[1]!),
      ),
    );
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (positionals.length !== 1) {
    return usageError(
      positionals.length === 0 ? "a resource URL is required" : "only one resource URL is accepted",
    );
  }
  const resourceUrl = positionals[0]!;
  try {
    parseResourceUrl(resourceUrl);
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const revision = values.revision ?? DEFAULT_REVISION;
  if (revision !== "2026-07-28" && revision !== "2025-11-25") {
    return usageError(`unknown revision '${revision}' (2026-07-28 or 2025-11-25)`);
  }
  const request = values.request ?? "auto";
  if (request !== "get" && request !== "mcp" && request !== "auto") {
    return usageError(`unknown request form '${request}' (get, mcp or auto)`);
  }
  let timeoutMs = 10_000;
  if (values.timeout !== undefined) {
    timeoutMs = Number(values.timeout);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
      return usageError("--timeout must be a positive integer");
  }

  if ((values["print-url"] || values["client-metadata-url"]) && !values.login) {
    return usageError("--print-url and --client-metadata-url need --login");
  }
  const login: LoginOptions | undefined = values.login
    ? {
        // The URL and prompts go to stderr, so --json output stays one object on stdout.
        authorizationSession: browserSession({ printOnly: values["print-url"] === true }),
        ...(values["client-metadata-url"] && { clientMetadataUrl: values["client-metadata-url"] }),
      }
    : undefined;
  if ((values.policy !== undefined || values["token-scope"] !== undefined) && !values["token-file"]) {
    return usageError("--policy and --token-scope need --token-file");
  }
  let operations: { token: string; tokenScopes?: string[]; policy?: CompiledPolicy } | undefined;
  if (values["token-file"] !== undefined) {
    // A file, not an argument: a token on the command line is visible to every local user (ps).
    let token: string;
    try {
      token = readFileSync(values["token-file"], "utf8").trim();
    } catch (error) {
      return usageError(`cannot read --token-file: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
    }
    // RFC 6750 §2.1 b64token; anything else is not a bearer token (and never echoed).
    if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(token))
      return usageError("--token-file does not hold one bearer token");
    operations = { token };
    if (values["token-scope"] !== undefined) {
      const scopes = values["token-scope"].split(" ").filter((s) => s !== "");
      if (!scopes.every((s) => isScopeToken(s)))
        return usageError("--token-scope is not a list of scope tokens");
      operations.tokenScopes = scopes;
    }
    if (values.policy !== undefined) {
      try {
        operations.policy = parseOperationPolicy(readFileSync(values.policy, "utf8"), values.policy);
      } catch (error) {
        return usageError(error instanceof Error ? error.message : String(error));
      }
    }
  }
  const report = await runCheck(resourceUrl, {
    revision: revision as Revision,
    timeoutMs,
    request,
    ...(login && { login }),
    ...(operations && { operations }),
  });
  // No protected resource metadata where the origin serves authorization server metadata: the
  // authorization server's URL was given (as login and fetch say), said before the report's FAILs.
  if (report.findings.some((f) => f.rule === "prm.discoverable" && f.outcome === "fail")) {
    const hint = await authorizationServerAtOrigin(resourceUrl);
    if (hint) process.stderr.write(`gatehouse check: ${hint}\n`);
  }
  // The operator's per-issuer compatibility settings (issuers.json) are shown, never applied: the
  // audit reports the spec's rules as the server meets them.
  let compatibility: ReturnType<typeof loadIssuerCompatibility>;
  try {
    compatibility = loadIssuerCompatibility(configDirectory());
  } catch (error) {
    return usageError(error instanceof Error ? error.message : String(error));
  }
  const shown = Object.entries(compatibility ?? {}).map(([issuer, entry]) => ({
    issuer,
    settings: describeSettings(entry),
  }));
  if (values.json) {
    const output = formatJson(report);
    process.stdout.write(
      shown.length
        ? `${JSON.stringify({ ...JSON.parse(output), client_issuer_compatibility: shown }, null, 2)}\n`
        : output,
    );
  } else {
    process.stdout.write(
      formatHuman(report, {
        color: useColour(process.stdout, process.env),
        verbose: values.verbose === true,
      }),
    );
    if (shown.length) {
      process.stdout.write(
        `\nClient compatibility settings in ${issuerCompatibilityPath(configDirectory())} (shown, not applied by this check; gatehouse login and fetch apply each to its issuer alone):\n`,
      );
      for (const { issuer, settings } of shown) {
        process.stdout.write(`  ${issuer}\n${settings.map((line) => `    ${line}\n`).join("")}`);
      }
    }
  }
  return report.ok ? 0 : 1;
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: "boolean" },
      revision: { type: "string" },
      timeout: { type: "string" },
      request: { type: "string" },
      verbose: { type: "boolean" },
      login: { type: "boolean" },
      "print-url": { type: "boolean" },
      "client-metadata-url": { type: "string" },
      "token-file": { type: "string" },
      "token-scope": { type: "string" },
      policy: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}
