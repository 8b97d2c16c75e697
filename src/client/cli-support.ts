/**
 * What the `login`, `fetch`, `logout` and `status` commands share: the config directory, the
 * encrypted store, the browser user agent, error text that names the failing step, and the usage
 * error / `--help` handling of their arguments.
 */
import { homedir } from "node:os";
import { join } from "node:path";
import { AuthClient, type CreateAuthFetchOptions } from "./auth-fetch.js";
import { isAuthorizationFlowError } from "./errors.js";
import { explainNetworkError } from "./network-errors.js";
import { EncryptedFileTokenStore } from "./stores/encrypted-file.js";
import { browserSession } from "./user-agent/browser.js";

/** `$GATEHOUSE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gatehouse`, else `~/.config/gatehouse`. */
export function configDirectory(): string {
  if (process.env.GATEHOUSE_CONFIG_DIR) return process.env.GATEHOUSE_CONFIG_DIR;
  const base = process.env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "gatehouse");
}

export function cliAuthClient(options: {
  printOnly?: boolean;
  clientMetadataUrl?: string;
  clientId?: string;
  clientSecret?: string;
  issuer?: string;
  print?: (line: string) => void;
  /** Short progress lines for discovery. Default: when stderr is a terminal. */
  progress?: boolean;
  extra?: Partial<CreateAuthFetchOptions>;
}): AuthClient {
  const print = options.print ?? ((line: string) => process.stderr.write(`${line}\n`));
  const progress = options.progress ?? process.stderr.isTTY === true;
  const store = new EncryptedFileTokenStore({ directory: configDirectory() });
  return new AuthClient({
    store,
    clientName: "Gatehouse CLI",
    authorizationSession: browserSession({
      print,
      timeoutHint: "run the command again, or use --print-url to open the URL yourself",
      ...(options.printOnly && { printOnly: true }),
    }),
    ...(options.clientMetadataUrl && { clientMetadataUrl: options.clientMetadataUrl }),
    ...(options.clientId &&
      options.issuer && {
        preregisteredClients: {
          [options.issuer]: {
            client_id: options.clientId,
            ...(options.clientSecret && { client_secret: options.clientSecret }),
          },
        },
      }),
    onEvent: (event) => {
      if (event.type === "authorization_started") {
        print(
          `${event.stepUp ? "Requesting more scope" : "Authorizing"} at ${event.issuer} for ${event.resource}${
            event.scope ? ` (scope: ${event.scope})` : ""
          }`,
        );
      } else if (event.type === "discovered") {
        if (progress) print(`Found ${event.resource}: authorization server ${event.issuer}`);
      } else if (event.type === "registered") {
        print(`Client identity at ${event.issuer}: ${event.source}`);
      } else if (event.type === "refreshed") {
        print(`Refreshed the access token for ${event.resource}`);
      }
    },
    ...options.extra,
  });
}

/**
 * One readable line for any error, naming the step and, for a transport failure, what to do next
 * (nothing listening, a name that does not resolve, an untrusted certificate, a timeout). `url` is
 * the URL the command was asked to reach; a failure inside the flow names its own URL instead.
 * Never a token.
 */
export function describeError(error: unknown, options: { url?: string | URL } = {}): string {
  if (isAuthorizationFlowError(error)) {
    const oauth = error.oauthError ? ` [${error.oauthError.error}]` : "";
    let detail = "";
    if (error.kind === "transport") {
      const network = explainNetworkError(error, error.url ?? options.url);
      if (network) detail = ` — ${network.hint}`;
    } else if (error.code === "user_agent_failed" && error.cause instanceof Error) {
      detail = ` (${error.cause.message})`;
    }
    return `${error.message}${oauth}${detail} (code ${error.code}, ${error.kind})`;
  }
  const network = explainNetworkError(error, options.url);
  if (network) {
    const code = network.code && !network.hint.includes(network.code) ? ` (${network.code})` : "";
    return `${network.hint}${code}`;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Parses a command's arguments with `parse` (a `node:util` `parseArgs` call): when it throws, the
 * message and `help` go to stderr and the result is exit status 2; with `--help`, `help` goes to
 * stdout and the result is 0. Otherwise the parsed arguments are returned.
 */
export function parseCommandLine<T extends { values: { help?: boolean | undefined } }>(
  command: string,
  help: string,
  parse: () => T,
): T | number {
  let parsed: T;
  try {
    parsed = parse();
  } catch (error) {
    process.stderr.write(`gatehouse ${command}: ${describeError(error)}\n\n${help}`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(help);
    return 0;
  }
  return parsed;
}

/**
 * The one non-empty positional argument of a command that takes exactly one (a URL). Otherwise
 * `help` goes to stderr and the result is undefined: the command exits with status 2.
 */
export function singleArgument(positionals: string[], help: string): string | undefined {
  const [value] = positionals;
  if (!value || positionals.length > 1) {
    process.stderr.write(help);
    return undefined;
  }
  return value;
}
