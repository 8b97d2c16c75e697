/**
 * A one-shot loopback redirect listener (RFC 8252 §7.3): binds 127.0.0.1 only on a random port,
 * accepts the first callback whose `state` matches, then closes; a timeout closes it too.
 * Requests with another path or a wrong state get an error page and do not end the wait.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqualString } from "../../shared/crypto.js";
import { AuthorizationFlowError } from "../errors.js";

/** "5 min", "90 s": how long a wait lasts, for the messages that mention it. */
export function formatWait(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const seconds = Math.round(ms / 1000);
  return seconds >= 60 && seconds % 60 === 0 ? `${seconds / 60} min` : `${seconds} s`;
}

export interface LoopbackListener {
  /** `http://127.0.0.1:<port><path>`. */
  redirectUri: string;
  /** Resolves with the full callback URL once a request carries `expectedState`. */
  waitForCallback(expectedState: string): Promise<string>;
  close(): Promise<void>;
}

const PAGE = (title: string, text: string) =>
  `<!doctype html><meta charset="utf-8"><title>${title}</title><p>${text}</p>`;

export async function startLoopbackListener(
  options: {
    path?: string;
    timeoutMs?: number;
    port?: number;
    /** What the timeout error tells the user to do next. */
    timeoutHint?: string;
  } = {},
): Promise<LoopbackListener> {
  const path = options.path ?? "/callback";
  const timeoutMs = options.timeoutMs ?? 300_000;
  let expected: string | undefined;
  let settle: { resolve(url: string): void; reject(error: Error): void } | undefined;
  let done = false;
  const early: string[] = [];

  const server: Server = createServer((req, res) => {
    const headers = {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
    };
    const url = new URL(req.url ?? "/", `http://127.0.0.1`);
    if (req.method !== "GET" || url.pathname !== path || done) {
      res.writeHead(404, headers).end(PAGE("Not found", "Nothing here."));
      return;
    }
    const states = url.searchParams.getAll("state");
    const full = `http://127.0.0.1:${(server.address() as AddressInfo).port}${req.url}`;
    if (expected === undefined) {
      // The authorization URL is not known yet; keep the callback until it is.
      early.push(full);
      res.writeHead(200, headers).end(PAGE("Received", "You can close this window."));
      return;
    }
    if (states.length !== 1 || !timingSafeEqualString(states[0]!, expected)) {
      res
        .writeHead(400, headers)
        .end(PAGE("Rejected", "This response does not belong to the login in progress."));
      return;
    }
    done = true;
    res.writeHead(200, headers).end(PAGE("Done", "Authorization received. You can close this window."));
    settle?.resolve(full);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  let timer: NodeJS.Timeout | undefined;

  const close = () =>
    new Promise<void>((resolve) => {
      done = true;
      if (timer) clearTimeout(timer);
      server.closeAllConnections?.();
      server.close(() => resolve());
    });

  return {
    redirectUri: `http://127.0.0.1:${port}${path}`,
    waitForCallback(expectedState: string) {
      expected = expectedState;
      return new Promise<string>((resolve, reject) => {
        settle = {
          resolve: (u) => {
            void close().then(() => resolve(u));
          },
          reject,
        };
        for (const url of early.splice(0)) {
          const state = new URL(url).searchParams.get("state");
          if (state !== null && timingSafeEqualString(state, expectedState)) {
            done = true;
            settle.resolve(url);
            return;
          }
        }
        timer = setTimeout(() => {
          void close().then(() =>
            reject(
              new AuthorizationFlowError(
                "authorization_timed_out",
                `no authorization callback within ${formatWait(timeoutMs)}: ${
                  options.timeoutHint ?? "start the authorization again"
                }`,
                { kind: "action", step: "user agent (loopback redirect listener, RFC 8252 §7.3)" },
              ),
            ),
          );
        }, timeoutMs);
        timer.unref?.();
      });
    },
    close,
  };
}
