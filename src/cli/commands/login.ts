/**
 * `gatehouse login`: authorize once against a protected resource and store the tokens, in the
 * browser (the authorization code flow) or, with `--device`, by approving a code on another device
 * (the device authorization grant, RFC 8628).
 */
import { parseArgs } from "node:util";
import { isScopeToken } from "../../shared/scopes.js";
import {
  authorizationServerGivenHint,
  callbackPortOption,
  cliAuthClient,
  cliDeviceAuthorization,
  describeError,
  isLoginCancelled,
  LoginCancelled,
  missingResourceProblem,
  noBrowserReason,
  parseCommandLine,
  urlArgument,
  usageError,
} from "../client-commands.js";

const HELP = `Usage: gatehouse login <resource-url> [options]

Discovers the resource's authorization server, registers if needed, opens your browser
(the command in $BROWSER when set) and stores the tokens encrypted in the config directory.
It waits for you in the browser until you finish (Ctrl-C cancels; it gives up after 5 minutes).
Where no browser can be opened (no DISPLAY or WAYLAND_DISPLAY on Linux, standard input or
output not a terminal, and no $BROWSER) it prints the URL instead and suggests --device.

With --device (no browser on this machine: a server, a container, an SSH session) it prints a
web address and a code instead, with a QR code of the address when standard output is a
terminal: open the address on any device, check the code, sign in and approve. The command waits
until you approve or deny, or the code expires (Ctrl-C cancels). The authorization server must
offer the device flow (RFC 8628: device_authorization_endpoint in its metadata).

Options:
  --device                    log in by approving a code on another device (RFC 8628)
  --print-url                 do not open a browser; print the URL to open
  --callback-port N           receive the browser's redirect on port N (1-65535) instead of a
                              random one: http://127.0.0.1:N/callback, for an authorization
                              server that registered the redirect URI with that exact port
  --client-metadata-url URL   use this Client ID Metadata Document URL as the client id
  --client-id ID              pre-registered client id (with --issuer)
  --client-secret SECRET      pre-registered client secret (prefer GATEHOUSE_CLIENT_SECRET)
  --issuer URL                issuer the pre-registered client belongs to
  --scope "A B"               ask for these scopes (space-separated). Over a stored login that
                              lacks one of them this is a scope upgrade: the new login asks for
                              what is stored and these together; without a stored login, for
                              these alone. A stored login that holds them all is kept.
                              With --device: a step-up where no browser can open
  --force                     authorize again even if a valid token is stored

Exit status: 0 logged in; 1 the login failed (denied, expired, unreachable, refused); 2 usage;
130 a login cancelled with Ctrl-C.
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("login", HELP, () => parse(args));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  const resource = urlArgument("login", positionals, "a resource URL");
  if (resource === undefined) return 2;
  if (values.device && values["print-url"]) {
    usageError("login", "--print-url is for the browser login; --device prints its own address and code");
    return 2;
  }
  const callbackPort = callbackPortOption("login", values["callback-port"], values.device === true);
  if (callbackPort === null) return 2;
  let scope: string | undefined;
  if (values.scope !== undefined) {
    // RFC 6749 §3.3: space-delimited scope tokens; checked before anything goes on the wire.
    const scopes = values.scope.split(" ").filter((s) => s !== "");
    const bad = scopes.find((s) => !isScopeToken(s));
    if (!scopes.length || bad !== undefined) {
      usageError(
        "login",
        bad === undefined
          ? "--scope needs at least one scope"
          : `--scope: ${JSON.stringify(bad)} is not a scope (RFC 6749 §3.3: printable ASCII, no space, quote or backslash)`,
      );
      return 2;
    }
    scope = scopes.join(" ");
  }
  // The address and code on stdout, where the result of a login goes too.
  const device = values.device ? cliDeviceAuthorization(process.stdout) : undefined;
  const noBrowser = values.device ? undefined : noBrowserReason({ printOnly: values["print-url"] === true });
  const client = cliAuthClient({
    ...(device && { device: device.options }),
    // Nothing to open a browser on: only print the URL (xdg-open could start a text browser on
    // a terminal that is not there).
    ...(noBrowser && {
      printOnly: true,
      browserNotice: `No browser can be opened here (${noBrowser}): open the address below where you can, or press Ctrl-C and run 'gatehouse login --device ${resource}'.`,
    }),
    ...(values["print-url"] && { printOnly: true }),
    ...(callbackPort !== undefined && { callbackPort }),
    ...(values["client-metadata-url"] && { clientMetadataUrl: values["client-metadata-url"] }),
    ...(values["client-id"] && { clientId: values["client-id"] }),
    ...((values["client-secret"] ?? process.env.GATEHOUSE_CLIENT_SECRET) && {
      clientSecret: values["client-secret"] ?? process.env.GATEHOUSE_CLIENT_SECRET,
    }),
    ...(values.issuer && { issuer: values.issuer }),
  });
  const missing = await missingResourceProblem(resource);
  if (missing) {
    const hint = await authorizationServerGivenHint(404, resource);
    process.stderr.write(`gatehouse login: ${missing}\n${hint ? `  ${hint}\n` : ""}`);
    return 1;
  }
  device?.listen();
  try {
    const tokens = await client.login(resource, {
      force: values.force ?? false,
      ...(scope !== undefined && { scope }),
    });
    const expires = tokens.expires_at ? `, expires ${new Date(tokens.expires_at).toISOString()}` : "";
    process.stdout.write(
      `Logged in to ${tokens.resource} via ${tokens.issuer}${tokens.scope ? ` (scope: ${tokens.scope})` : ""}${expires}${
        tokens.refresh_token ? ", refreshable" : ""
      }\n`,
    );
    return 0;
  } catch (error) {
    if (isLoginCancelled(error)) {
      process.stderr.write("gatehouse login: cancelled; nothing was stored\n");
      return LoginCancelled.EXIT_STATUS;
    }
    const hint = await authorizationServerGivenHint(error, resource);
    process.stderr.write(
      `gatehouse login: ${describeError(error, { url: resource })}\n${hint ? `  ${hint}\n` : ""}`,
    );
    return 1;
  } finally {
    device?.dispose();
  }
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      device: { type: "boolean" },
      "print-url": { type: "boolean" },
      "callback-port": { type: "string" },
      "client-metadata-url": { type: "string" },
      "client-id": { type: "string" },
      "client-secret": { type: "string" },
      issuer: { type: "string" },
      scope: { type: "string" },
      force: { type: "boolean" },
    },
  });
}
