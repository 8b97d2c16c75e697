/**
 * `gatehouse status`: what the token store holds, without any token value.
 */
import { parseArgs } from "node:util";
import { compatibilityFor } from "../../client/protocol/issuer-compat.js";
import { UsageError } from "../args.js";
import { cliAuthClient, configDirectory, describeError, parseCommandLine } from "../client-commands.js";
import { describeSettings, issuerCompatibilityPath, loadIssuerCompatibility } from "../issuer-compat-file.js";

const HELP = `Usage: gatehouse status [--json]

Shows what is stored: resources, their authorization servers, clients and token state, and the
per-issuer compatibility settings of issuers.json in the config directory (which of them were
applied to each server's metadata). Never prints a token or a secret.
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("status", HELP, () =>
    parseArgs({ args, options: { help: { type: "boolean", short: "h" }, json: { type: "boolean" } } }),
  );
  if (typeof parsed === "number") return parsed;
  const { values } = parsed;
  try {
    const store = cliAuthClient({}).store;
    const settings = loadIssuerCompatibility(configDirectory()) ?? {};
    const servers = await store.list("server");
    // Per configured issuer: its settings, and which were applied to the metadata stored for it.
    const compatibility = Object.entries(settings).map(([issuer, entry]) => {
      const applied = new Set<string>();
      for (const [key, record] of servers) {
        if (key === issuer || compatibilityFor(settings, key)?.configured === issuer) {
          for (const name of record.compatibility ?? []) applied.add(name);
        }
      }
      return { issuer, settings: describeSettings(entry), applied_to_stored_metadata: [...applied] };
    });
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
      process.stdout.write(
        `${JSON.stringify({ directory: configDirectory(), tokens, clients, issuer_compatibility: compatibility }, null, 2)}\n`,
      );
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
    if (compatibility.length) {
      process.stdout.write(
        `\nCompatibility settings (${issuerCompatibilityPath(configDirectory())}), each for its issuer alone:\n`,
      );
      for (const c of compatibility) {
        process.stdout.write(`  ${c.issuer}\n`);
        for (const line of c.settings) process.stdout.write(`    ${line}\n`);
        if (c.applied_to_stored_metadata.length) {
          process.stdout.write(
            `    applied to the stored metadata: ${c.applied_to_stored_metadata.join(", ")}\n`,
          );
        }
      }
    }
    return 0;
  } catch (error) {
    process.stderr.write(`gatehouse status: ${describeError(error)}\n`);
    // A bad issuers.json is the user's to fix, as for every other command: a usage error.
    return error instanceof UsageError ? 2 : 1;
  }
}
