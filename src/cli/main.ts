#!/usr/bin/env node
/**
 * The `gatehouse` command. Each subcommand lives in `commands/<name>.ts` and exports
 * `run(args: string[]): Promise<number>` (the exit status); they are loaded on demand so that
 * `gatehouse login` never loads the SQLite driver and `gatehouse serve` never loads the client.
 */
const COMMANDS: Record<string, { summary: string }> = {
  serve: { summary: "run the authorization server" },
  demo: { summary: "run the authorization server with the demo notes resource (SQLite)" },
  users: { summary: "manage local user accounts (users add|list|passwd|disable|enable|admin|remove)" },
  clients: { summary: "manage pre-registered clients (clients add|list|remove)" },
  keys: { summary: "manage signing keys and their encryption (keys rotate|list|rewrap|generate-kek)" },
  login: { summary: "log in to a protected resource from the command line" },
  fetch: { summary: "call a protected resource with stored credentials (curl-like)" },
  logout: { summary: "forget stored credentials" },
  status: { summary: "show stored credentials (never the tokens)" },
  check: { summary: "audit a deployed protected resource and its authorization server against the spec" },
  gateway: {
    summary: "protect an existing MCP server: metadata, challenges and a per-operation policy in front",
  },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `Usage: gatehouse <command> [options]\n\nCommands:\n${lines.join("\n")}\n\nRun 'gatehouse <command> --help' for a command's options.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [first, ...afterFirst] = argv;
  // `gatehouse help login` is `gatehouse login --help`.
  const helpFor = first === "help" && afterFirst.length === 1 ? afterFirst[0] : undefined;
  const [name, ...rest] = helpFor && Object.hasOwn(COMMANDS, helpFor) ? [helpFor, "--help"] : argv;
  if (name === "help" && rest.length) {
    process.stderr.write(`gatehouse: no command named '${rest.join(" ")}'\n\n${usage()}`);
    return 2;
  }
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage());
    return name ? 0 : 2;
  }
  if (name === "--version" || name === "-v") {
    const { createRequire } = await import("node:module");
    const pkg = createRequire(import.meta.url)("../../package.json") as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, name)) {
    // Loaded only here: a correct command line never pays for it.
    const { nearestName } = await import("./command-line-text.js");
    const guess = nearestName(name, Object.keys(COMMANDS));
    process.stderr.write(
      `gatehouse: unknown command '${name}'${guess ? ` (did you mean '${guess}'?)` : ""}\n\n${usage()}`,
    );
    return 2;
  }
  const module = (await import(`./commands/${name}.js`)) as { run(args: string[]): Promise<number> };
  return module.run(rest);
}

/**
 * A reader that goes away early (`gatehouse status | head -3`) is not an error: stop writing and
 * exit quietly with the status so far, as `head`'s other writers do. Any other write failure is.
 */
function endQuietlyOnClosedPipe(stream: NodeJS.WriteStream): void {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
    if (stream !== process.stderr) process.stderr.write(`gatehouse: cannot write output: ${error.message}\n`);
    process.exit(1);
  });
}
endQuietlyOnClosedPipe(process.stdout);
endQuietlyOnClosedPipe(process.stderr);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`gatehouse: ${error instanceof Error ? error.message : String(error)}\n`);
    // A setting the command cannot use (an environment variable, say) is a usage error too
    // (args.ts UsageError, matched by its code so that this file loads no module up front).
    process.exitCode = (error as { code?: unknown } | null)?.code === "ERR_USAGE" ? 2 : 1;
  },
);
