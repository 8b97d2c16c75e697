/**
 * Opening the system browser without a shell (SECURITY.md: an `authorization_endpoint` opened by a
 * shell allowed command injection in earlier MCP clients). The URL is validated first and handed
 * to the program as its one argument; `$BROWSER`, when set, names that program.
 */
import { spawn } from "node:child_process";
import { assertOpenableAuthorizationUrl } from "../protocol/authorization.js";
import {
  assertCallbackPort,
  type ExpectedResponseIssuer,
  formatWait,
  startLoopbackListener,
} from "./loopback-listener.js";
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
 * prints the URL). Never rejects for a missing browser; rejects for an unacceptable URL. The
 * program gets the URL as its one argument, with `shell: false`: nothing in the URL or in
 * `$BROWSER` is interpreted by a shell.
 */
export async function openBrowser(url: string | URL): Promise<boolean> {
  const checked = assertOpenableAuthorizationUrl(url).href;
  const command = browserCommand();
  if (!command) return false;
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
 * browser, and the URL printed when no browser can be opened (or always, with `printOnly`). Once
 * the URL is out, it says that it is waiting, how to cancel and when it gives up.
 */
export function browserSession(
  options: {
    print?: (message: string) => void;
    printOnly?: boolean;
    /** How long to wait for the callback. Default 5 minutes. */
    timeoutMs?: number;
    /** What the timeout error tells the user to do next. */
    timeoutHint?: string;
    open?: (url: URL) => Promise<boolean>;
    /**
     * Listen for the redirect on this port (1-65535) instead of a random one: the redirect URI is
     * then `http://127.0.0.1:<port>/callback`, for an authorization server that registered it with
     * an exact port. A port in use fails the login with `user_agent_failed`, naming the port.
     */
    callbackPort?: number;
    /**
     * While waiting for the browser, Ctrl-C (SIGINT) ends the wait, rejecting with the error this
     * returns (the flow then closes the listener), instead of ending the process: a command can
     * say that the login was cancelled. The handler is there only during the wait.
     */
    cancelOnInterrupt?: () => Error;
  } = {},
): AuthorizationSessionFactory {
  const print = options.print ?? ((m: string) => process.stderr.write(`${m}\n`));
  const timeoutMs = options.timeoutMs ?? 300_000;
  // Checked here, when the session is configured, not at the first login.
  assertCallbackPort(options.callbackPort, "callbackPort");
  return async () => {
    const listener = await startLoopbackListener({
      timeoutMs,
      ...(options.timeoutHint && { timeoutHint: options.timeoutHint }),
      ...(options.callbackPort !== undefined && { port: options.callbackPort }),
    });
    return {
      redirectUri: listener.redirectUri,
      ...(options.callbackPort !== undefined && { exactRedirectUri: true }),
      async open(authorizationUrl: URL, expectedIssuer?: ExpectedResponseIssuer) {
        const url = assertOpenableAuthorizationUrl(authorizationUrl);
        const state = url.searchParams.get("state") ?? "";
        const wait = listener.waitForCallback(state, expectedIssuer);
        const opened = options.printOnly ? false : await (options.open ?? openBrowser)(url);
        print(
          opened
            ? `Opened your browser to authorize. If nothing happened, open:\n  ${url.href}`
            : `Open this URL in a browser to authorize:\n  ${url.href}`,
        );
        print(
          `Waiting for you to finish in the browser (Ctrl-C to cancel; gives up after ${formatWait(timeoutMs)})…`,
        );
        const cancel = options.cancelOnInterrupt;
        if (!cancel) return wait;
        return new Promise<string>((resolve, reject) => {
          const onInterrupt = () => reject(cancel());
          process.once("SIGINT", onInterrupt);
          wait.then(resolve, reject).finally(() => process.off("SIGINT", onInterrupt));
        });
      },
      close: () => listener.close(),
    };
  };
}
