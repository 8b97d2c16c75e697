/**
 * The browser step of a client that runs as its own process and opens the system browser (RFC 8252
 * §4.1): a fake `xdg-open` (first on PATH) and `$BROWSER`, both one script, hand the URL to this
 * test process, where a real Chromium (browser-user.ts `ChromiumUser`) signs in and approves
 * consent, then follows the redirect to the client's own loopback listener. Nothing of the client
 * is replaced: it runs its real opener (mcp-remote uses the `open` package, whose bundled xdg-open
 * reads `$BROWSER`), and its real callback server receives the code.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer } from "node:net";
import { join } from "node:path";
import { expect } from "vitest";
import type { BrowserVisit, ChromiumUser } from "./browser-user.js";
import { type InteropStack, tokenRequests } from "./harness.js";

export class BrowserOpener {
  /** Every URL the client asked to open, in order. */
  readonly opened: URL[] = [];
  /** Every browser visit's outcome (a rejected one carries what the page said). */
  readonly visits: Promise<BrowserVisit>[] = [];
  readonly #server: Server;
  /** The directory to put first on the client's PATH (holds `xdg-open`). */
  readonly binDirectory: string;
  /** The script to give as `$BROWSER`. */
  readonly script: string;

  private constructor(server: Server, binDirectory: string, script: string) {
    this.#server = server;
    this.binDirectory = binDirectory;
    this.script = script;
  }

  static async start(user: ChromiumUser, directory: string): Promise<BrowserOpener> {
    let opener: BrowserOpener | undefined;
    const server = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      req.on("end", () => {
        res.writeHead(204).end();
        let url: URL;
        try {
          url = new URL(body.trim());
        } catch {
          return;
        }
        opener!.opened.push(url);
        // Where the browser stops: the redirect URI the authorization request names.
        const redirectUri = url.searchParams.get("redirect_uri") ?? "";
        const visit = user.authorize(url, redirectUri);
        visit.catch(() => {});
        opener!.visits.push(visit);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/open`;
    const bin = join(directory, "bin");
    mkdirSync(bin, { recursive: true });
    const script = join(bin, "xdg-open");
    // POSTs its one argument to the test process and exits 0, as xdg-open does once a browser runs.
    writeFileSync(
      script,
      `#!/bin/sh\nexec "${process.execPath}" -e 'fetch(process.argv[1], { method: "POST", body: process.argv[2] }).then(() => process.exit(0), () => process.exit(3))' "${endpoint}" "$1"\n`,
    );
    chmodSync(script, 0o755);
    opener = new BrowserOpener(server, bin, script);
    return opener;
  }

  /** The environment that makes a child process's browser this one. */
  environment(): Record<string, string> {
    return { BROWSER: this.script, PATH: `${this.binDirectory}:${process.env.PATH ?? ""}` };
  }

  /** Waits until the `n`th visit (1-based) finished, and returns it. */
  async visit(n: number): Promise<BrowserVisit> {
    while (this.visits.length < n) await new Promise((resolve) => setTimeout(resolve, 50));
    return this.visits[n - 1]!;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

/** A loopback port free right now, for a client process that must be told its callback port. */
export async function freeLoopbackPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Scenarios 3 and 5 for a client in its own process: expires the access tokens, runs `calls`
 * (which check their answers); they must get through by exactly one successful refresh, the
 * browser opened no more. `context` is added to a failure (what the client said).
 */
export async function expectRefreshWithoutOpening(
  stack: InteropStack,
  opener: BrowserOpener,
  calls: () => Promise<void>,
  context?: () => string,
): Promise<void> {
  const opened = opener.opened.length;
  const refreshes = tokenRequests(stack, "refresh_token").length;
  stack.expireAccessTokens();
  await calls();
  expect(opener.opened).toHaveLength(opened);
  expect(
    tokenRequests(stack, "refresh_token")
      .slice(refreshes)
      .map((x) => x.status),
    context?.(),
  ).toEqual([200]);
}
