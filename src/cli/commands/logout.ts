import { parseArgs } from "node:util";
import { cliAuthClient, describeError } from "../../client/cli-support.js";

const HELP = `Usage: gatehouse logout [resource] [--all]

Forgets stored tokens: for one resource (its PRM resource value, as 'gatehouse status' shows it),
or for every resource. --all also forgets client registrations and cached metadata.
`;

export async function run(args: string[]): Promise<number> {
  let values: { help?: boolean; all?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: { help: { type: "boolean", short: "h" }, all: { type: "boolean" } },
    }));
  } catch (error) {
    process.stderr.write(`gatehouse logout: ${describeError(error)}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const client = cliAuthClient({});
  try {
    if (values.all) {
      await client.store.clear();
      process.stdout.write("Forgot all tokens, registrations and metadata.\n");
      return 0;
    }
    const removed = await client.logout(positionals[0]);
    process.stdout.write(
      removed
        ? `Forgot ${removed} token set(s).\n`
        : `No stored tokens${positionals[0] ? ` for ${positionals[0]}` : ""}.\n`,
    );
    return 0;
  } catch (error) {
    process.stderr.write(`gatehouse logout: ${describeError(error)}\n`);
    return 1;
  }
}
