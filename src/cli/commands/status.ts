/**
 * `gatehouse status`: what the token store holds, without any token value.
 */
import { parseArgs } from "node:util";
import { cliAuthClient, configDirectory, describeError, parseCommandLine } from "../client-commands.js";

const HELP = `Usage: gatehouse status [--json]

Shows what is stored: resources, their authorization servers, clients and token state.
Never prints a token or a secret.
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("status", HELP, () =>
    parseArgs({ args, options: { help: { type: "boolean", short: "h" }, json: { type: "boolean" } } }),
  );
  if (typeof parsed === "number") return parsed;
  const { values } = parsed;
  const store = cliAuthClient({}).store;
  try {
    const now = Date.now();
    const tokens = (await store.list("tokens")).map(([, t]) => ({
      resource: t.resource,
      issuer: t.issuer,
      client_id: t.client_id,
      scope: t.scope ?? null,
      expires_at: t.expires_at ? new Date(t.expires_at).toISOString() : null,
      expired: t.expires_at !== undefined && t.expires_at <= now,
      refreshable: t.refresh_token !== undefined,
      // RFC 9449: a bound token is useless without its key (kept encrypted in the same store).
      dpop_bound: t.token_type.toLowerCase() === "dpop",
    }));
    const clients = (await store.list("client")).map(([, c]) => ({
      issuer: c.issuer,
      client_id: c.client_id,
      source: c.source,
      confidential: c.client_secret !== undefined,
    }));
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ directory: configDirectory(), tokens, clients }, null, 2)}\n`);
      return 0;
    }
    process.stdout.write(`Store: ${configDirectory()}\n`);
    if (!tokens.length) process.stdout.write("Not logged in to any resource.\n");
    for (const t of tokens) {
      process.stdout.write(
        `\n${t.resource}\n  authorization server: ${t.issuer}\n  client: ${t.client_id}\n  scope: ${t.scope ?? "(none)"}\n  access token: ${
          t.expired ? "expired" : t.expires_at ? `valid until ${t.expires_at}` : "no expiry given"
        }${t.refreshable ? " (refreshable)" : ""}${t.dpop_bound ? " (DPoP-bound)" : ""}\n`,
      );
    }
    if (clients.length) {
      process.stdout.write("\nRegistrations:\n");
      for (const c of clients) process.stdout.write(`  ${c.issuer}: ${c.client_id} (${c.source})\n`);
    }
    return 0;
  } catch (error) {
    process.stderr.write(`gatehouse status: ${describeError(error)}\n`);
    return 1;
  }
}
