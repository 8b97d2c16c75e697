/**
 * A one-shot loopback redirect listener (RFC 8252 §7.3): binds 127.0.0.1 only, on a random port
 * unless one is pinned, accepts the first callback whose `state` matches, then closes; a timeout
 * closes it too. Requests with another path or a wrong state get an error page and do not end the
 * wait.
 */
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqualString } from "../../shared/crypto.js";
import { GatehouseTypeError } from "../../shared/errors.js";
import { AuthorizationFlowError } from "../errors.js";

const LISTENER_STEP = "user agent (loopback redirect listener, RFC 8252 §7.3)";

/** Whether `port` can be pinned for the listener: an integer from 1 to 65535 (0 means a random one). */
export function isCallbackPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

/** Refuses a pinned port out of range (misuse: `GatehouseTypeError` `ERR_INVALID_OPTION`). */
export function assertCallbackPort(port: number | undefined, option = "port"): void {
  if (port === undefined || port === 0 || isCallbackPort(port)) return;
  throw new GatehouseTypeError(
    "ERR_INVALID_OPTION",
    `${option} must be an integer from 1 to 65535 (or 0 for a random port), got ${String(port)}`,
  );
}

/** Why a pinned port could not be bound, in words naming it; `undefined` for other failures. */
function bindProblem(error: unknown, port: number): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === "EADDRINUSE") {
    return `port ${port} on 127.0.0.1 is already in use (another program, or another login waiting on it): stop it or pin another port`;
  }
  if (code === "EACCES") {
    return `port ${port} on 127.0.0.1 may not be opened by this user (ports below 1024 need privileges): pin a port from 1024 up`;
  }
  return undefined;
}

/** "5 min", "90 s": how long a wait lasts, for the messages that mention it. */
export function formatWait(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  const seconds = Math.round(ms / 1000);
  return seconds >= 60 && seconds % 60 === 0 ? `${seconds / 60} min` : `${seconds} s`;
}

/**
 * What the listener checks a response's `iss` against before its page says anything about the
 * response's content: the issuer recorded with the request and whether that server announced
 * `authorization_response_iss_parameter_supported` (RFC 9207 §2.4; spec "Authorization response
 * validation").
 */
export interface ExpectedResponseIssuer {
  issuer: string;
  issParameterSupported: boolean;
}

export interface LoopbackListener {
  /** `http://127.0.0.1:<port><path>`. */
  redirectUri: string;
  /**
   * Resolves with the full callback URL once a request carries `expectedState`. With
   * `expectedIssuer` the page shown in the browser says whether the user approved or denied;
   * without, it says only that the response arrived (it cannot tell a genuine answer from a
   * mixed-up one). The caller validates the response either way.
   */
  waitForCallback(expectedState: string, expectedIssuer?: ExpectedResponseIssuer): Promise<string>;
  close(): Promise<void>;
}

/**
 * The look of the authorization server's pages (a card on a grey background), restated here: the
 * client role does not import the authorization server. Allowed by its hash in the CSP.
 */
const CALLBACK_STYLE = `*{box-sizing:border-box}
body{margin:0;background:#f3f4f6;color:#111827;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:30rem;margin:3rem auto;padding:2rem;background:#fff;border:1px solid #e5e7eb;border-radius:12px;box-shadow:0 1px 3px rgba(0,0,0,.06)}
h1{font-size:1.35rem;margin:0 0 1rem;line-height:1.3}
p{margin:.5rem 0}
.muted{color:#6b7280;font-size:.9rem}
code{font:.85em ui-monospace,SFMono-Regular,Menlo,monospace;background:#eef2ff;padding:.05rem .3rem;border-radius:4px;overflow-wrap:anywhere}
.notice{background:#ecfdf5;border:1px solid #10b981;color:#064e3b;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}
.warning{background:#fffbeb;border:1px solid #f59e0b;color:#78350f;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}
.error{background:#fef2f2;border:1px solid #ef4444;color:#7f1d1d;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}`;

/** No script, nothing from elsewhere, no framing: the page only shows text. */
const CALLBACK_CSP = `default-src 'none'; style-src 'sha256-${createHash("sha256")
  .update(CALLBACK_STYLE, "utf8")
  .digest("base64")}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Everything a response carries is text from outside: it never reaches the page unescaped. */
function escapeText(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

type Tone = "notice" | "warning" | "error";

/** One message for the browser; `detailHtml` is already escaped. */
interface CallbackMessage {
  status: number;
  title: string;
  tone?: Tone;
  lead: string;
  detailHtml?: string;
}

function callbackPage(message: CallbackMessage): string {
  const lead = escapeText(message.lead);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeText(message.title)}</title>
<style>${CALLBACK_STYLE}</style>
</head>
<body>
<main>
<h1>${escapeText(message.title)}</h1>
${message.tone ? `<p class="${message.tone}" data-testid="outcome">${lead}</p>` : `<p data-testid="outcome">${lead}</p>`}
${message.detailHtml ? `<p>${message.detailHtml}</p>` : ""}
<p class="muted">You can close this window and return to the application.</p>
</main>
</body>
</html>
`;
}

/**
 * RFC 9207 §2.4 as the spec's table states it: compare `iss` with the recorded issuer by simple
 * string comparison; reject it absent when the server announced it, or repeated.
 */
function issuerChecksOut(params: URLSearchParams, expected: ExpectedResponseIssuer): boolean {
  const values = params.getAll("iss");
  if (values.length > 1) return false;
  if (values.length === 0) return !expected.issParameterSupported;
  return values[0] === expected.issuer;
}

/** An error code is shown only in its RFC 6749 §5.2 character set, and not at any length. */
const SHOWN_ERROR_CODE = /^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/;

/**
 * What the page says about the response that matched the login in progress. The response's own
 * fields (`error`, the presence of `code`) are read only after `iss` checked out: a response
 * from another server is neither acted on nor displayed (spec "Authorization response validation").
 */
function outcomeMessage(
  params: URLSearchParams,
  expected: ExpectedResponseIssuer | undefined,
): CallbackMessage {
  if (expected === undefined) {
    return {
      status: 200,
      title: "Response received",
      lead: "The application received the server's answer and checks it now; it shows whether you are signed in.",
    };
  }
  if (!issuerChecksOut(params, expected)) {
    return {
      status: 400,
      title: "Response not used",
      tone: "warning",
      lead: "This response does not come from the server you were signing in to, so the application did not use it. Start the sign-in again from the application.",
    };
  }
  const errors = params.getAll("error");
  if (errors.length === 0 && params.getAll("code").length === 1) {
    return {
      status: 200,
      title: "Access approved",
      tone: "notice",
      lead: "You approved the access. The application continues on its own.",
    };
  }
  if (errors.length === 1 && errors[0] === "access_denied") {
    return {
      status: 200,
      title: "Access denied",
      tone: "warning",
      lead: "You denied the access. The application was not given access to your account.",
    };
  }
  const code = errors.length === 1 ? errors[0]! : "";
  return {
    status: 200,
    title: "Authorization failed",
    tone: "error",
    lead: "The server did not grant access.",
    ...(SHOWN_ERROR_CODE.test(code) && {
      detailHtml: `Error code: <code data-testid="error-code">${escapeText(code)}</code>`,
    }),
  };
}

export async function startLoopbackListener(
  options: {
    path?: string;
    timeoutMs?: number;
    /**
     * The port to listen on, for an authorization server that registered the redirect URI with an
     * exact port; default (or 0) a random free one, which RFC 8252 §7.3 lets the server accept.
     */
    port?: number;
    /** What the timeout error tells the user to do next. */
    timeoutHint?: string;
  } = {},
): Promise<LoopbackListener> {
  assertCallbackPort(options.port);
  const path = options.path ?? "/callback";
  const timeoutMs = options.timeoutMs ?? 300_000;
  let expected: string | undefined;
  let expectedIssuer: ExpectedResponseIssuer | undefined;
  let settle: { resolve(url: string): void; reject(error: Error): void } | undefined;
  let done = false;
  const early: string[] = [];

  const server: Server = createServer((req, res) => {
    const send = (message: CallbackMessage) =>
      res
        .writeHead(message.status, {
          "content-type": "text/html; charset=utf-8",
          "cache-control": "no-store",
          "referrer-policy": "no-referrer",
          "x-content-type-options": "nosniff",
          "x-frame-options": "DENY",
          "content-security-policy": CALLBACK_CSP,
        })
        .end(callbackPage(message));
    const url = new URL(req.url ?? "/", `http://127.0.0.1`);
    if (req.method !== "GET" || url.pathname !== path || done) {
      send({ status: 404, title: "Not found", lead: "Nothing is waiting for a response here." });
      return;
    }
    const states = url.searchParams.getAll("state");
    const full = `http://127.0.0.1:${(server.address() as AddressInfo).port}${req.url}`;
    if (expected === undefined) {
      // The authorization URL is not known yet; keep the callback until it is.
      early.push(full);
      send(outcomeMessage(url.searchParams, undefined));
      return;
    }
    if (states.length !== 1 || !timingSafeEqualString(states[0]!, expected)) {
      send({
        status: 400,
        title: "Response not used",
        tone: "warning",
        lead: "This response does not belong to the sign-in in progress, so it was ignored.",
      });
      return;
    }
    done = true;
    send(outcomeMessage(url.searchParams, expectedIssuer));
    settle?.resolve(full);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  }).catch((error: unknown) => {
    const problem = options.port ? bindProblem(error, options.port) : undefined;
    throw new AuthorizationFlowError(
      "user_agent_failed",
      problem ?? `cannot listen on 127.0.0.1 for the redirect: ${(error as Error).message}`,
      { kind: "action", step: LISTENER_STEP, cause: error },
    );
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
    waitForCallback(expectedState: string, issuer?: ExpectedResponseIssuer) {
      expected = expectedState;
      expectedIssuer = issuer;
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
                { kind: "action", step: LISTENER_STEP },
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
