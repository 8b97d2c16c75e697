/**
 * What the `login`, `fetch`, `logout` and `status` commands share: the config directory, the
 * encrypted store, the browser user agent, error text that names the failing step, and the usage
 * error / `--help` handling of their arguments. These four keep their own argument convention
 * (`node:util` `parseArgs` in each command, hand-written help) rather than args.ts's
 * `parseCommandArgs` / `formatUsage`; both word their usage errors through command-line-text.ts.
 */
import { homedir } from "node:os";
import { join } from "node:path";
import { renderUnicodeCompact } from "uqr";
import { AuthorizationFlowError, isAuthorizationFlowError } from "../client/errors.js";
import {
  AuthClient,
  type CreateAuthFetchOptions,
  type DeviceAuthorizationOptions,
  type DeviceAuthorizationPrompt,
} from "../client/flow/auth-client.js";
import { explainNetworkError } from "../client/protocol/network-errors.js";
import { EncryptedFileTokenStore } from "../client/stores/encrypted-file.js";
import { browserSession } from "../client/user-agent/browser.js";
import { isCallbackPort } from "../client/user-agent/loopback-listener.js";
import type { AuthorizationSessionFactory } from "../client/user-agent/session.js";
import { UsageError } from "./args.js";
import { explainParseArgsError, urlArgumentProblem } from "./command-line-text.js";
import { ISSUERS_FILE, loadIssuerCompatibility } from "./issuer-compat-file.js";

/** `$GATEHOUSE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gatehouse`, else `~/.config/gatehouse`. */
export function configDirectory(): string {
  if (process.env.GATEHOUSE_CONFIG_DIR) return process.env.GATEHOUSE_CONFIG_DIR;
  const base = process.env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "gatehouse");
}

/**
 * Where the token store keeps its key: `$GATEHOUSE_STORE_KEY_LOCATION` — `auto` (default: the OS
 * keychain when one answers, else a 0600 key file beside the data), `keychain` (fail without one)
 * or `file`. `GATEHOUSE_STORE_KEY`, when set, is the key and overrides all three.
 */
export function storeKeyLocation(): "auto" | "keychain" | "file" {
  const value = process.env.GATEHOUSE_STORE_KEY_LOCATION || "auto";
  if (value === "auto" || value === "keychain" || value === "file") return value;
  throw new UsageError(
    `GATEHOUSE_STORE_KEY_LOCATION must be auto, keychain or file (it is ${JSON.stringify(value)})`,
  );
}

/**
 * Why a browser login cannot work here, or undefined when it can. `--no-browser` says so; a
 * `$BROWSER` the user set names the program that opens URLs, which gatehouse trusts to work;
 * otherwise a person must be at a terminal (standard input and output both terminals) and, outside
 * macOS and Windows, a graphical display must exist (`DISPLAY` or `WAYLAND_DISPLAY`), unless the
 * URL is only printed (`--print-url`) for that person to open.
 */
export function noBrowserReason(
  options: { noBrowser?: boolean; printOnly?: boolean },
  env: NodeJS.ProcessEnv = process.env,
  terminal: { stdin: boolean; stdout: boolean } = {
    stdin: process.stdin.isTTY === true,
    stdout: process.stdout.isTTY === true,
  },
): string | undefined {
  if (options.noBrowser) return "--no-browser was given";
  if (env.BROWSER?.trim()) return undefined;
  if (!terminal.stdin || !terminal.stdout) return "standard input or output is not a terminal";
  const desktop = process.platform === "darwin" || process.platform === "win32";
  if (!desktop && !options.printOnly && !env.DISPLAY && !env.WAYLAND_DISPLAY) {
    return "no graphical display: DISPLAY and WAYLAND_DISPLAY are unset";
  }
  return undefined;
}

/**
 * An authorization session that refuses at once (before any registration or request), for a
 * command that must not wait for a browser nobody can use (`fetch` without a login, headless).
 */
function refusingSession(url: string, reason: string): AuthorizationSessionFactory {
  return async (request) => {
    // A step-up: a plain login would only report the stored token; the same command with
    // --device, or a login asking for the missing scope, asks for it (issue 26).
    const missing = request?.missingScopes;
    // The scopes come from the resource's challenge: a command to paste is offered only when
    // every one is inert in a shell (RFC 6749 §3.3 allows $, backquotes and quotes in a scope).
    const scopeLogin =
      missing?.length && missing.every((s) => /^[\w.:/-]+$/.test(s))
        ? `, or 'gatehouse login --device --scope "${missing.join(" ")}" ${url}' to add it to the stored login`
        : "";
    throw new AuthorizationFlowError(
      "no_interactive_authorization",
      missing !== undefined
        ? `${url} needs scope ${missing.join(" ") || "(more than the stored login holds)"}, which the stored login lacks, and no browser can be opened here (${reason}); run this command again with --device to approve it on another device${scopeLogin}, or run it where a browser can open`
        : `${url} needs a login and no browser can be opened here (${reason}); run 'gatehouse login ${url}' where a browser can open, or 'gatehouse login --device ${url}' to approve on another device, or add --device to this command`,
      { kind: "action", step: "authorization" },
    );
  };
}

/** `session`, printing `notice` (when given) as each authorization URL is about to be shown. */
function withNotice(
  session: AuthorizationSessionFactory,
  notice: string | undefined,
  print: (line: string) => void,
): AuthorizationSessionFactory {
  if (notice === undefined) return session;
  return async (request) => {
    const opened = await session(request);
    return {
      ...opened,
      open(url, expectedIssuer) {
        print(notice);
        return opened.open(url, expectedIssuer);
      },
    };
  };
}

export function cliAuthClient(options: {
  printOnly?: boolean;
  /**
   * Refuse an interactive login at once, naming the login commands for `url`, instead of waiting
   * for a browser (see {@link noBrowserReason}).
   */
  refuseInteractive?: { url: string; reason: string };
  /** Log in with the device authorization grant (RFC 8628) instead of the browser. */
  device?: DeviceAuthorizationOptions;
  /** Printed just before the browser login shows its URL (why no browser will open, say). */
  browserNotice?: string;
  /** `--callback-port`: the browser login's loopback port, for a server that registered it exactly. */
  callbackPort?: number;
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
  const store = new EncryptedFileTokenStore({
    directory: configDirectory(),
    keyLocation: storeKeyLocation(),
  });
  const issuerCompatibility = loadIssuerCompatibility(configDirectory());
  return new AuthClient({
    store,
    clientName: "Gatehouse CLI",
    ...(issuerCompatibility && { issuerCompatibility }),
    ...(options.device
      ? { deviceAuthorization: options.device }
      : {
          authorizationSession: options.refuseInteractive
            ? refusingSession(options.refuseInteractive.url, options.refuseInteractive.reason)
            : withNotice(
                browserSession({
                  print,
                  timeoutHint:
                    "run the command again, use --print-url to open the URL yourself, or log in with 'gatehouse login --device <url>'",
                  ...(options.printOnly && { printOnly: true }),
                  ...(options.callbackPort !== undefined && { callbackPort: options.callbackPort }),
                  // Ctrl-C while waiting for the browser is said, as for the device login.
                  cancelOnInterrupt: () => new LoginCancelled(),
                }),
                options.browserNotice,
                print,
              ),
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
      } else if (event.type === "compatibility") {
        // Every use of an operator's issuers.json setting is said, each time (issuer-compat.ts).
        print(
          `Compatibility setting ${event.setting} for ${event.issuer} (${ISSUERS_FILE}): ${event.detail}`,
        );
      }
    },
    ...options.extra,
  });
}

/**
 * A login ended by Ctrl-C: the abort reason the device flow rejects with, and the cause of the
 * browser flow's `user_agent_failed` (see {@link isLoginCancelled}).
 */
export class LoginCancelled extends Error {
  /** The shell's status for a command ended by SIGINT. */
  static readonly EXIT_STATUS = 130;
  constructor() {
    super("login cancelled");
    this.name = "LoginCancelled";
  }
}

/** Whether `error` is a login cancelled with Ctrl-C, in the device flow or the browser's. */
export function isLoginCancelled(error: unknown): boolean {
  return (
    error instanceof LoginCancelled ||
    (isAuthorizationFlowError(error) && error.cause instanceof LoginCancelled)
  );
}

/** How long until `expiresAt`, in words ("10 minutes", "45 seconds"). */
function timeLeft(expiresAt: number): string {
  const seconds = Math.max(0, Math.round((expiresAt - Date.now()) / 1000));
  if (seconds < 120) return `${seconds} seconds`;
  return `${Math.round(seconds / 60)} minutes`;
}

/**
 * The device authorization grant (RFC 8628) for a command: the prompt (§3.3) on `out`: the
 * address and the code, the address with the code filled in (§3.3.1), and that address as a QR
 * code when `out` is a terminal (a phone's camera opens it); then the wait line on stderr, like
 * the browser login's. Everything printed was checked by the client first (printable, https or
 * loopback). Between `listen()` and `dispose()`, Ctrl-C aborts the wait with {@link LoginCancelled}.
 */
export function cliDeviceAuthorization(out: NodeJS.WriteStream): {
  options: DeviceAuthorizationOptions;
  listen(): void;
  dispose(): void;
} {
  const cancel = new AbortController();
  const onInterrupt = () => cancel.abort(new LoginCancelled());
  const onPrompt = (prompt: DeviceAuthorizationPrompt) => {
    const lines = [
      `To log in to ${prompt.resource}, open this address on any device:`,
      `  ${prompt.verificationUri}`,
      "and enter the code:",
      `  ${prompt.userCode}`,
    ];
    if (prompt.verificationUriComplete) {
      lines.push("Or open this address, which carries the code:", `  ${prompt.verificationUriComplete}`);
    }
    out.write(`${lines.join("\n")}\n`);
    if (prompt.verificationUriComplete && out.isTTY) {
      // Light modules are full blocks: right on the usual light-on-dark terminal. A 2-module
      // quiet zone is enough for phone scanners when the terminal around it is dark.
      out.write(`${renderUnicodeCompact(prompt.verificationUriComplete, { border: 2 })}\n`);
    }
    process.stderr.write(
      `Waiting for you to approve (Ctrl-C to cancel; the code expires in ${timeLeft(prompt.expiresAt)})…\n`,
    );
  };
  return {
    options: { onPrompt, signal: cancel.signal },
    listen: () => process.once("SIGINT", onInterrupt),
    dispose: () => process.off("SIGINT", onInterrupt),
  };
}

/**
 * What each kind of flow failure means for the person at the keyboard (the error codes themselves
 * are for programs: `AuthorizationFlowError.code`). Transport failures get their own hint above;
 * an OAuth error carries the server's error code in brackets.
 */
const KIND_HINTS: Partial<Record<AuthorizationFlowError["kind"], string>> = {
  nonconforming: " — the server does not follow the MCP authorization spec here; tell its operator",
  refused: " — gatehouse stopped here because going on would be unsafe",
};

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
    } else if (error.code === "client_information_required" && error.issuer !== undefined) {
      // The library's words name its options; the command's are these (login and fetch).
      detail = ` — with a client registered there: gatehouse login --client-id <id> --issuer ${error.issuer} ${options.url ?? "<url>"} (its secret, if any, in GATEHOUSE_CLIENT_SECRET)`;
    }
    return `${error.message}${oauth}${detail}${KIND_HINTS[error.kind] ?? ""}`;
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
    usageError(command, explainParseArgsError(error, optionNamesIn(help)));
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(help);
    return 0;
  }
  return parsed;
}

/** The long option names a command's help text documents (`--force` → `force`). */
function optionNamesIn(help: string): string[] {
  return [...help.matchAll(/--([a-z][\w-]*)/g)].map((m) => m[1] ?? "");
}

/** A usage error: what is wrong, then where the usage is. The caller exits with status 2. */
export function usageError(command: string, message: string): void {
  process.stderr.write(`gatehouse ${command}: ${message}\n(see 'gatehouse ${command} --help')\n`);
}

/**
 * The one URL argument of a command that takes exactly one (`what` names it in errors: "a
 * resource URL"). When it is missing, doubled or not an http(s) URL, a usage error goes to stderr
 * and the result is undefined: the command exits with status 2.
 */
export function urlArgument(command: string, positionals: string[], what: string): string | undefined {
  const [value, extra] = positionals;
  if (!value) {
    usageError(command, `${what} is required`);
    return undefined;
  }
  if (extra !== undefined) {
    usageError(command, `unexpected argument ${JSON.stringify(extra)} (${what} is given once)`);
    return undefined;
  }
  const problem = urlArgumentProblem(value);
  if (problem) {
    usageError(command, problem);
    return undefined;
  }
  return value;
}

/**
 * `--callback-port N` of the browser login (login, fetch): a decimal port from 1 to 65535, never
 * with `--device` (which listens on nothing). Returns the port, undefined when not given, or null
 * after a usage error on stderr: the command exits with status 2.
 */
export function callbackPortOption(
  command: string,
  text: string | undefined,
  device: boolean,
): number | undefined | null {
  if (text === undefined) return undefined;
  if (device) {
    usageError(command, "--callback-port is for the browser login; --device listens on no port");
    return null;
  }
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!isCallbackPort(port)) {
    usageError(command, `--callback-port must be a port number from 1 to 65535, got ${JSON.stringify(text)}`);
    return null;
  }
  return port;
}

/** How long the CLI's own probes (below) wait: they only add a hint, so they give up early. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Before `login` opens a browser: a resource path that does not exist (404 or 410 to an
 * unauthenticated request) is a typo, and logging in "to" it would succeed against the origin's
 * metadata while every later call fails. Returns the problem, or undefined. The body is never read.
 */
export async function missingResourceProblem(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await response.body?.cancel();
    if (response.status !== 404 && response.status !== 410) return undefined;
    return `${url} answered ${response.status} ${response.statusText || "Not Found"}: check the path (nothing is there to log in to)`;
  } catch {
    // Unreachable: the login itself reports that with the right hint.
    return undefined;
  }
}

/**
 * After "no protected resource metadata" (RFC 9728 §3) or a 404: when the URL's origin serves
 * authorization server metadata (RFC 8414 §3), the user most likely gave the authorization
 * server's URL where the resource's is expected. Returns that hint, or undefined.
 * `failure` is the error or the HTTP status the command got.
 */
export async function authorizationServerGivenHint(
  failure: unknown,
  url: string,
): Promise<string | undefined> {
  const noMetadata = isAuthorizationFlowError(failure) && failure.code === "prm_not_found";
  if (!noMetadata && failure !== 404) return undefined;
  return authorizationServerAtOrigin(url);
}

/**
 * When the origin of `url` serves authorization server metadata (RFC 8414 §3): the hint that
 * the authorization server's URL was given where the resource's is expected. Else undefined.
 * Only for a URL already known to be no protected resource (no metadata, a 404).
 */
export async function authorizationServerAtOrigin(url: string): Promise<string | undefined> {
  const origin = new URL(url).origin;
  try {
    const response = await fetch(`${origin}/.well-known/oauth-authorization-server`, {
      redirect: "manual",
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    await response.body?.cancel();
    if (response.status !== 200 || !/json/i.test(response.headers.get("content-type") ?? ""))
      return undefined;
    return `${origin} is an authorization server, not a protected resource: give the URL of the resource it protects (the MCP server's URL; for the demo, the notes URL it prints)`;
  } catch {
    return undefined;
  }
}
