/**
 * `gatehouse fetch`: a curl-like request through the authorizing fetch.
 */
import { parseArgs } from "node:util";
import {
  authorizationServerGivenHint,
  callbackPortOption,
  cliAuthClient,
  cliDeviceAuthorization,
  describeError,
  isLoginCancelled,
  LoginCancelled,
  noBrowserReason,
  parseCommandLine,
  urlArgument,
  usageError,
} from "../client-commands.js";

const HELP = `Usage: gatehouse fetch <url> [options]

Calls a protected resource with the stored credentials (authorizing first if needed).

Authorizing opens a browser and waits for you there (Ctrl-C cancels). Where no browser can be
opened (--no-browser; no DISPLAY or WAYLAND_DISPLAY on Linux; standard input or output not a
terminal; $BROWSER, when set, counts as a browser) it fails at once instead, naming the commands
that log in first: 'gatehouse login <url>' elsewhere, or 'gatehouse login --device <url>'.
With --device it authorizes by a code approved on another device (RFC 8628) instead, the
address and code on stderr: for a first login, and for more scope when the resource asks.

Options (curl-like):
  -X, --request METHOD   HTTP method (default GET, or POST with --data)
  -H, --header "N: V"    add a request header (repeatable)
  -d, --data BODY        request body ("@file" reads a file, "@-" standard input)
  -i, --include          print the status line and response headers
  --print-url            never open a browser; print the authorization URL instead
  --callback-port N      authorizing in the browser, receive its redirect on port N (1-65535):
                         http://127.0.0.1:N/callback, for a server that registered that port
  --no-browser           never authorize interactively: fail when a login is needed
  --device               authorize by approving a code on another device (RFC 8628)

Per-issuer compatibility settings in issuers.json in the config directory (for authorization
servers that break a rule, such as Entra ID or Cognito) apply to their issuer alone, each use said
on stderr; see 'gatehouse status'.

Exit status: 0 a 2xx response; 22 any other HTTP status (as curl --fail; the body still goes
to stdout, the status line to stderr); 1 the request or the authorization failed; 2 usage;
130 a login cancelled with Ctrl-C.
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("fetch", HELP, () => parse(args));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  const url = urlArgument("fetch", positionals, "a URL");
  if (url === undefined) return 2;
  const headers = new Headers();
  for (const line of values.header ?? []) {
    const colon = line.indexOf(":");
    if (colon <= 0) {
      usageError("fetch", `header ${JSON.stringify(line)} is not "Name: value"`);
      return 2;
    }
    const name = line.slice(0, colon).trim();
    if (name.toLowerCase() === "authorization") {
      usageError("fetch", "the Authorization header is managed by gatehouse");
      return 2;
    }
    headers.append(name, line.slice(colon + 1).trim());
  }
  let body: string | Uint8Array<ArrayBuffer> | undefined;
  if (values.data !== undefined) {
    const { readFile } = await import("node:fs/promises");
    body = values.data.startsWith("@")
      ? values.data === "@-"
        ? new Uint8Array(await readStdin())
        : new Uint8Array(await readFile(values.data.slice(1)))
      : values.data;
    if (!headers.has("content-type")) headers.set("content-type", "application/x-www-form-urlencoded");
  }
  const method = values.request ?? (body !== undefined ? "POST" : "GET");
  const printOnly = values["print-url"] === true;
  if (values.device && (printOnly || values["no-browser"])) {
    usageError("fetch", "--device is a way to log in: not with --print-url or --no-browser");
    return 2;
  }
  const callbackPort = callbackPortOption("fetch", values["callback-port"], values.device === true);
  if (callbackPort === null) return 2;
  // The response body goes to stdout: the device flow's address and code go to stderr.
  const device = values.device ? cliDeviceAuthorization(process.stderr) : undefined;
  const reason = device
    ? undefined
    : noBrowserReason({ noBrowser: values["no-browser"] === true, printOnly });
  const client = cliAuthClient({
    ...(device && { device: device.options }),
    ...(printOnly && { printOnly }),
    ...(callbackPort !== undefined && { callbackPort }),
    ...(reason !== undefined && { refuseInteractive: { url, reason } }),
  });
  device?.listen();
  try {
    const response = await client.fetch(url, { method, headers, ...(body !== undefined && { body }) });
    if (values.include) {
      process.stdout.write(`HTTP ${response.status} ${response.statusText}\n`);
      for (const [k, v] of response.headers) process.stdout.write(`${k}: ${v}\n`);
      process.stdout.write("\n");
    }
    const received = Buffer.from(await response.arrayBuffer());
    process.stdout.write(received);
    if (response.ok) return 0;
    // The body went to stdout as curl does, byte for byte; the status, which a terminal would not
    // show, to stderr, on a line of its own when the body left its last line open (on a terminal
    // both streams share the screen).
    const newline = received.length > 0 && received[received.length - 1] !== 0x0a ? "\n" : "";
    const hint = await authorizationServerGivenHint(response.status, url);
    process.stderr.write(
      `${newline}gatehouse fetch: ${url} answered ${response.status} ${response.statusText}\n${hint ? `  ${hint}\n` : ""}`,
    );
    return 22; // curl --fail's exit status for HTTP errors
  } catch (error) {
    if (isLoginCancelled(error)) {
      process.stderr.write("gatehouse fetch: login cancelled; no request was sent with new tokens\n");
      return LoginCancelled.EXIT_STATUS;
    }
    const hint = await authorizationServerGivenHint(error, url);
    process.stderr.write(
      `gatehouse fetch: ${describeError(error, { url: url })}\n${hint ? `  ${hint}\n` : ""}`,
    );
    return 1;
  } finally {
    device?.dispose();
  }
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      request: { type: "string", short: "X" },
      header: { type: "string", short: "H", multiple: true },
      data: { type: "string", short: "d" },
      include: { type: "boolean", short: "i" },
      "print-url": { type: "boolean" },
      "callback-port": { type: "string" },
      "no-browser": { type: "boolean" },
      device: { type: "boolean" },
    },
  });
}
