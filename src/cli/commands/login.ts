/**
 * `gatehouse login`: authorize once against a protected resource and store the tokens.
 */
import { parseArgs } from "node:util";
import {
  authorizationServerGivenHint,
  cliAuthClient,
  describeError,
  missingResourceProblem,
  parseCommandLine,
  urlArgument,
} from "../client-commands.js";

const HELP = `Usage: gatehouse login <resource-url> [options]

Discovers the resource's authorization server, registers if needed, opens your browser
(the command in $BROWSER when set) and stores the tokens encrypted in the config directory.

Options:
  --print-url                 do not open a browser; print the URL to open
  --client-metadata-url URL   use this Client ID Metadata Document URL as the client id
  --client-id ID              pre-registered client id (with --issuer)
  --client-secret SECRET      pre-registered client secret (prefer GATEHOUSE_CLIENT_SECRET)
  --issuer URL                issuer the pre-registered client belongs to
  --force                     authorize again even if a valid token is stored
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("login", HELP, () => parse(args));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  const resource = urlArgument("login", positionals, "a resource URL");
  if (resource === undefined) return 2;
  const client = cliAuthClient({
    ...(values["print-url"] && { printOnly: true }),
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
  try {
    const tokens = await client.login(resource, { force: values.force ?? false });
    const expires = tokens.expires_at ? `, expires ${new Date(tokens.expires_at).toISOString()}` : "";
    process.stdout.write(
      `Logged in to ${tokens.resource} via ${tokens.issuer}${tokens.scope ? ` (scope: ${tokens.scope})` : ""}${expires}${
        tokens.refresh_token ? ", refreshable" : ""
      }\n`,
    );
    return 0;
  } catch (error) {
    const hint = await authorizationServerGivenHint(error, resource);
    process.stderr.write(
      `gatehouse login: ${describeError(error, { url: resource })}\n${hint ? `  ${hint}\n` : ""}`,
    );
    return 1;
  }
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      help: { type: "boolean", short: "h" },
      "print-url": { type: "boolean" },
      "client-metadata-url": { type: "string" },
      "client-id": { type: "string" },
      "client-secret": { type: "string" },
      issuer: { type: "string" },
      force: { type: "boolean" },
    },
  });
}
