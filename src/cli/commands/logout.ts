/**
 * `gatehouse logout`: revoke the stored tokens at the server and forget them.
 */
import { parseArgs } from "node:util";
import type { LogoutOutcome } from "../../client/flow/auth-client.js";
import { cliAuthClient, describeError, parseCommandLine, usageError } from "../client-commands.js";

const HELP = `Usage: gatehouse logout [resource] [--all] [--local]

Logs out of one resource (its PRM resource value, as 'gatehouse status' shows it) or of every
resource: revokes the stored refresh token and access token at the authorization server
(RFC 7009, when it has a revocation endpoint), then forgets them. --all also forgets client
registrations and cached metadata. --local forgets without telling the server.

Exit status: 0 done; 1 error (nothing forgotten); 2 usage; 3 forgotten locally, but the server
could not be told for at least one resource (its tokens stay valid there until they expire).
`;

/** One line per token set under the summary; revocation failures go to stderr with the next step. */
function report(outcome: LogoutOutcome): void {
  const line = (text: string) => process.stdout.write(`  ${outcome.resource}: ${text}\n`);
  switch (outcome.revocation) {
    case "revoked":
      line(`revoked at ${outcome.issuer}`);
      return;
    case "nothing_to_revoke":
      line("nothing live to revoke");
      return;
    case "no_endpoint":
      line(`${outcome.issuer} has no revocation endpoint; the tokens stay valid there until they expire`);
      return;
    case "unsupported":
      line(
        `${outcome.issuer} does not revoke them (unsupported_token_type); they stay valid until they expire`,
      );
      return;
    case "skipped":
      line(`not revoked (--local: ${outcome.issuer} was not told)`);
      return;
    case "failed":
      line(`NOT revoked at ${outcome.issuer} (see below)`);
      process.stderr.write(
        `gatehouse logout: could not revoke the tokens for ${outcome.resource} at ${outcome.issuer}: ${describeError(outcome.error)}\n` +
          "  They were forgotten here, but stay valid at the server until they expire; revoke them from the server's account page if it has one.\n",
      );
      return;
  }
}

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("logout", HELP, () =>
    parseArgs({
      args,
      allowPositionals: true,
      options: {
        help: { type: "boolean", short: "h" },
        all: { type: "boolean" },
        local: { type: "boolean" },
      },
    }),
  );
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  if (positionals.length > 1 || (values.all && positionals.length)) {
    usageError("logout", values.all ? "--all takes no resource" : "give at most one resource");
    return 2;
  }
  const client = cliAuthClient({});
  try {
    const resource = values.all ? undefined : positionals[0];
    const { removed, outcomes } = await client.logout(resource, { revoke: values.local !== true });
    process.stdout.write(
      removed
        ? `Forgot ${removed} token set(s).\n`
        : `No stored tokens${resource ? ` for ${resource}` : ""}.\n`,
    );
    for (const outcome of outcomes) report(outcome);
    if (values.all) {
      await client.store.clear();
      process.stdout.write("Forgot all registrations and metadata too.\n");
    }
    return outcomes.some((o) => o.revocation === "failed") ? 3 : 0;
  } catch (error) {
    process.stderr.write(`gatehouse logout: ${describeError(error)}\n`);
    return 1;
  }
}
