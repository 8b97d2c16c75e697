import { parseArgs } from "node:util";
import { cliAuthClient, describeError, parseCommandLine, singleArgument } from "../../client/cli-support.js";

const HELP = `Usage: gatehouse fetch <url> [options]

Calls a protected resource with the stored credentials (authorizing first if needed).

Options (curl-like):
  -X, --request METHOD   HTTP method (default GET, or POST with --data)
  -H, --header "N: V"    add a request header (repeatable)
  -d, --data BODY        request body ("@file" reads a file, "@-" standard input)
  -i, --include          print the status line and response headers
  --print-url            never open a browser; print the authorization URL instead
`;

export async function run(args: string[]): Promise<number> {
  const parsed = parseCommandLine("fetch", HELP, () => parse(args));
  if (typeof parsed === "number") return parsed;
  const { values, positionals } = parsed;
  const url = singleArgument(positionals, HELP);
  if (url === undefined) return 2;
  const headers = new Headers();
  for (const line of values.header ?? []) {
    const colon = line.indexOf(":");
    if (colon <= 0) {
      process.stderr.write(`gatehouse fetch: header "${line}" is not "Name: value"\n`);
      return 2;
    }
    const name = line.slice(0, colon).trim();
    if (name.toLowerCase() === "authorization") {
      process.stderr.write("gatehouse fetch: the Authorization header is managed by gatehouse\n");
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
  const client = cliAuthClient({ ...(values["print-url"] && { printOnly: true }) });
  try {
    const response = await client.fetch(url, { method, headers, ...(body !== undefined && { body }) });
    if (values.include) {
      process.stdout.write(`HTTP ${response.status} ${response.statusText}\n`);
      for (const [k, v] of response.headers) process.stdout.write(`${k}: ${v}\n`);
      process.stdout.write("\n");
    }
    process.stdout.write(Buffer.from(await response.arrayBuffer()));
    return response.ok ? 0 : 22; // curl --fail's exit status for HTTP errors
  } catch (error) {
    process.stderr.write(`gatehouse fetch: ${describeError(error, { url: url })}\n`);
    return 1;
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
    },
  });
}
