/**
 * Opening the system browser without a shell (SECURITY.md: an `authorization_endpoint` opened by a
 * shell allowed command injection in earlier MCP clients). The URL is validated first and handed
 * to the program as its one argument; `$BROWSER`, when set, names that program.
 */
import { spawn } from "node:child_process";
import { assertOpenableAuthorizationUrl } from "../authorization.js";
import { startLoopbackListener } from "./loopback-listener.js";
import type { AuthorizationSessionFactory } from "./session.js";

function browserCommand(): string | undefined {
  const fromEnv = process.env.BROWSER?.trim();
  if (fromEnv) return fromEnv;
  if (process.platform === "darwin") return "open";
  if (process.platform === "win32") return undefined; // no shell-free default worth trusting
  return "xdg-open";
}

/**
 * Opens `url` in a browser; resolves false when no browser could be started (the caller then
 * prints the URL). Never throws for a missing browser; throws for an unacceptable URL.
 */
export function openBrowser(url: string | URL): Promise<boolean> {
  const checked = assertOpenableAuthorizationUrl(url).href;
  const command = browserCommand();
  if (!command) return Promise.resolve(false);
  return new Promise((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(command, [checked], { stdio: "ignore", detached: true, shell: false });
    } catch {
      resolve(false);
      return;
    }
    child.once("error", () => resolve(false));
    child.once("spawn", () => {
      child.unref();
      resolve(true);
    });
  });
}

/**
 * The command line's user agent: a fresh one-shot loopback listener per authorization, the system
 * browser, and the URL printed when no browser can be opened (or always, with `printOnly`).
 */
export function browserSession(
  options: {
    print?: (message: string) => void;
    printOnly?: boolean;
    timeoutMs?: number;
    open?: (url: URL) => Promise<boolean>;
  } = {},
): AuthorizationSessionFactory {
  const print = options.print ?? ((m: string) => process.stderr.write(`${m}\n`));
  return async () => {
    const listener = await startLoopbackListener({
      ...(options.timeoutMs && { timeoutMs: options.timeoutMs }),
    });
    return {
      redirectUri: listener.redirectUri,
      async open(authorizationUrl: URL) {
        const url = assertOpenableAuthorizationUrl(authorizationUrl);
        const state = url.searchParams.get("state") ?? "";
        const wait = listener.waitForCallback(state);
        const opened = options.printOnly ? false : await (options.open ?? openBrowser)(url);
        print(
          opened
            ? `Opened your browser to authorize. If nothing happened, open:\n  ${url.href}`
            : `Open this URL in a browser to authorize:\n  ${url.href}`,
        );
        return wait;
      },
      close: () => listener.close(),
    };
  };
}
