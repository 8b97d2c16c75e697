/**
 * node:http adapter, listener half: translates `IncomingMessage` → web `Request` (lazily, see
 * lazy-request.ts) and web `Response` → `ServerResponse`, and starts servers. No protocol logic
 * lives here (DESIGN.md principle 1). Public through `node.ts` (the `gatehouse/node` entry point);
 * the helpers marked "shared with ..." are internal to the adapters.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { deferCompleteBodies } from "../shared/http.js";
import { jsonLogger } from "../shared/log.js";
import {
  headerPairs,
  LazyRequest,
  type LazyRequestInit,
  lazyRequestsWork,
  MATERIALIZE,
} from "./lazy-request.js";
import { bodyStream, readBodyUpTo } from "./node-request-body.js";
import { declaredLength, proxyHops, requestClientAddress, requestOrigin } from "./node-request-head.js";
import { plainResponse, sendWebResponse } from "./node-response.js";

// Moved to sibling files; re-exported here for the other adapters.
export { proxyHops, requestHost, requestScheme } from "./node-request-head.js";
export { plainResponse } from "./node-response.js";

/**
 * A web-standard request handler. The second argument carries what only the host knows: the
 * client's address (the socket, or `X-Forwarded-For` with `trustProxy`), for handlers that rate-limit
 * per client, such as the authorization server's `fetch`.
 */
export type FetchHandler = (request: Request, info?: { clientAddress?: string }) => Promise<Response>;

export interface NodeListenerOptions {
  /**
   * Largest request body accepted, in bytes (default 1 MiB). A larger declared `Content-Length` is
   * answered 413 before the handler runs; a streamed body that grows past it errors the body stream
   * and the response is 413 if nothing was sent yet.
   */
  maxBodyBytes?: number;
  /**
   * Requests come through proxies you control: the number of them (trusted hops), `true` for one,
   * `false` or 0 for none (the default). With one or more, the URL comes from `X-Forwarded-Proto`
   * and `X-Forwarded-Host`, and the client address is the entry of `X-Forwarded-For` the outermost
   * trusted proxy appended: the Nth from the right, N = the hop count (the socket address when the
   * header has fewer entries or that entry is not an IP address). Without, the URL comes from the
   * socket's TLS state and `Host`, the client address from the socket.
   */
  trustProxy?: boolean | number;
  /**
   * Called with any error the handler throws or rejects with, or that ends its response early (the
   * client then gets a bare 500, or a cut connection once the status was sent). The error is the
   * handler's own; pass it to logs with care. Default: one JSON line on stderr, `handler_error`,
   * naming the error's class only (its message may carry what the handler was handling).
   */
  onError?: (error: unknown) => void;
}

const stderrLog = jsonLogger();

/**
 * The default `onError` (shared with node-require-bearer.ts): a failed request is one log line,
 * with the error's class name and string `code`, never its message or stack, which may quote a
 * token or a secret the handler held (SECURITY.md: nothing secret in logs).
 */
export function logHandlerError(error: unknown): void {
  const fields: Record<string, unknown> = {
    error: error instanceof Error ? error.name : typeof error,
  };
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.length <= 64) fields.code = code;
  stderrLog.error("handler_error", fields);
}

/** Default body cap, in bytes (shared with node-require-bearer.ts). */
export const DEFAULT_MAX_BODY = 1024 * 1024;

/**
 * Side channel for the client address: not a header, so a client cannot forge it. The listener's
 * own lazy requests keep it in a module-private slot instead ({@link OWN_ADDRESS}): an entry per
 * request in a WeakMap is extra work for the garbage collector on every request.
 */
const CLIENT_ADDRESSES = new WeakMap<Request, string>();
/** The slot of a {@link ListenerRequest} holding its client address (module-private symbol). */
const OWN_ADDRESS = Symbol("gatehouse.clientAddress");

/**
 * The address of the client that sent `request`, when it came through {@link toNodeListener}
 * (honouring `X-Forwarded-For` only with `trustProxy`). `undefined` for requests built elsewhere.
 */
export function clientAddress(request: Request): string | undefined {
  if ((request as unknown) instanceof ListenerRequest)
    return (request as unknown as ListenerRequest)[OWN_ADDRESS];
  return CLIENT_ADDRESSES.get(request);
}

/** Attaches a client address to a request (for other adapters and tests). */
export function setClientAddress(request: Request, address: string): void {
  if ((request as unknown) instanceof ListenerRequest)
    (request as unknown as ListenerRequest)[OWN_ADDRESS] = address;
  else CLIENT_ADDRESSES.set(request, address);
}

interface AbortState {
  /** The response: its state says whether the client left (see {@link clientLeft}). */
  res: ServerResponse;
  controller: AbortController | undefined;
}

/**
 * Whether the client went away before the response was finished: node marks the response destroyed
 * when the connection closes, finished only once it was all handed to the socket.
 */
function clientLeft(res: ServerResponse): boolean {
  return res.destroyed && !res.writableFinished;
}

const ABORT_STATE = Symbol("gatehouse.abort");

/**
 * The request's abort signal, made on first use: aborted at once if the client already left, else
 * when it does. Nothing is registered for a request whose handler never asks (most do not).
 */
function abortSignal(state: AbortState): AbortSignal {
  if (!state.controller) {
    const controller = new AbortController();
    state.controller = controller;
    const res = state.res;
    if (clientLeft(res)) controller.abort();
    else
      res.once("close", () => {
        if (!res.writableFinished) controller.abort();
      });
  }
  return state.controller.signal;
}

/**
 * A Request whose `signal` is created on first use: linking a signal through the Request
 * constructor costs more than the rest of the request conversion, and most handlers never look.
 */
class NodeRequest extends Request {
  [ABORT_STATE]: AbortState;
  constructor(input: string, init: RequestInit, abort: AbortState) {
    super(input, init);
    this[ABORT_STATE] = abort;
  }

  /** A clone keeps the client address (handlers that clone to peek at the body still see it). */
  override clone(): Request {
    const copy = super.clone();
    const address = CLIENT_ADDRESSES.get(this);
    if (address !== undefined) CLIENT_ADDRESSES.set(copy, address);
    return copy;
  }
}
Object.defineProperty(NodeRequest.prototype, "signal", {
  configurable: true,
  get(this: NodeRequest): AbortSignal {
    return abortSignal(this[ABORT_STATE]);
  },
});

/**
 * The listener's request where the runtime lets a lazy one pass for a real `Request`
 * (lazy-request.ts): method, URL and header reads come from the `IncomingMessage`, the real request
 * is built only for the rest. A clone keeps the client address, as {@link NodeRequest}'s does.
 */
class ListenerRequest extends LazyRequest {
  [OWN_ADDRESS]: string | undefined = undefined;

  clone(): Request {
    const copy = this[MATERIALIZE]().clone();
    const address = this[OWN_ADDRESS];
    if (address !== undefined) CLIENT_ADDRESSES.set(copy, address);
    return copy;
  }
}

// Fetch "normalize a method": these six are upper-cased whatever their case; others kept as sent.
const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);
// Fetch "forbidden method": the Request constructor refuses them.
const FORBIDDEN_METHODS = new Set(["CONNECT", "TRACE", "TRACK"]);
const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * The method as `new Request` would make it (RFC 9110 §9.1: a token), or undefined where the Request
 * constructor throws, so the lazy request answers the same requests 400 as a built one did.
 */
function requestMethod(method: string): string | undefined {
  // node's parser hands the common methods over upper-case already: nothing to check or change.
  if (method === "GET" || method === "POST") return method;
  if (!METHOD_TOKEN.test(method)) return undefined;
  const upper = method.toUpperCase();
  if (FORBIDDEN_METHODS.has(upper)) return undefined;
  return NORMALIZED_METHODS.has(upper) ? upper : method;
}

/**
 * An origin-form request target (RFC 9112 §3.2.1) the WHATWG URL parser serialises exactly as
 * written after an origin it leaves unchanged: only characters no part of the path or query
 * percent-encodes or rewrites (no `\`, `'`, `^`, `|`, braces, brackets, quotes, spaces, non-ASCII),
 * and no dot segment, plain or percent-encoded ({@link DOT_SEGMENT}), which the parser would remove.
 */
const PLAIN_TARGET = /^\/[A-Za-z0-9\-._~!$&()*+,;=:@/?%]*$/;
const DOT_SEGMENT = /\/\.|%2e/i;

/** The last origin checked by {@link canonicalOrigin} and the answer: a server sees few Hosts. */
let lastOrigin = "";
let lastOriginCanonical = false;

/**
 * Whether the URL parser serialises `origin` as it is: a lower-case host, no default port, no
 * IPv4 or IPv6 shorthand (else the target goes through the parser, which normalises it).
 */
function canonicalOrigin(origin: string): boolean {
  if (origin === lastOrigin) return lastOriginCanonical;
  let canonical = false;
  try {
    canonical = new URL(`${origin}/`).href === `${origin}/`;
  } catch {
    canonical = false;
  }
  lastOrigin = origin;
  lastOriginCanonical = canonical;
  return canonical;
}

/**
 * The request URL as `new Request(origin + path).url` would give it, or undefined where the
 * Request constructor throws (an unparseable target, a URL with credentials). A plain target after
 * a canonical origin is the URL as it is (parsing it costs more than the rest of the head); any
 * other goes through the parser. The `Host` check (node-request-head.ts) allows no `@` or `/`, so
 * the origin cannot carry credentials or end early.
 */
function requestUrl(origin: string, path: string): string | undefined {
  if (PLAIN_TARGET.test(path) && !DOT_SEGMENT.test(path) && canonicalOrigin(origin)) return origin + path;
  let url: URL;
  try {
    url = new URL(origin + path);
  } catch {
    return undefined;
  }
  if (url.username !== "" || url.password !== "") return undefined;
  return url.href;
}

/**
 * The lazy request for `req`, or undefined where `new Request` would have thrown: an unparseable
 * target, a URL with credentials (Fetch's Request constructor refuses them), a bad method.
 */
function lazyRequest(
  req: IncomingMessage,
  origin: string,
  path: string,
  method: string,
  abort: AbortState,
  body: LazyRequestInit["body"],
  readBody: LazyRequestInit["readBody"],
): Request | undefined {
  const normalized = requestMethod(method);
  if (normalized === undefined) return undefined;
  const url = requestUrl(origin, path);
  if (url === undefined) return undefined;
  const request = new ListenerRequest(req, {
    url,
    method: normalized,
    body,
    readBody,
    signal: () => abortSignal(abort),
  });
  return request as unknown as Request;
}

/**
 * Wraps a web-standard handler as a node:http request listener.
 *
 * - The request URL is absolute: `https` when the socket is TLS, the authority from `Host`
 *   (from `X-Forwarded-*` only with `trustProxy`); a missing or malformed `Host` is answered 400
 *   (RFC 9112 §3.2 requires exactly one valid Host).
 * - The request is built as far as the handler looks (lazy-request.ts): method, URL, header reads
 *   and the body stream come from the `IncomingMessage`; the full `Request` is built only when
 *   another member is used, and `fetch(request)` / `new Request(request)` see the same request.
 *   A target, method or URL the Request constructor would refuse is answered 400.
 * - The body is streamed, capped by `maxBodyBytes` (413); a reader may stop early (the rest is
 *   dropped). A reader with a cap of its own (shared/bounded-body.ts `readRequestUpTo`) gets it
 *   whole without a stream, under the same caps.
 * - `request.signal` aborts when the client disconnects.
 * - Every response header is written, multiple `Set-Cookie` included; the body is streamed with
 *   backpressure; a client disconnect cancels the body and never crashes the process.
 * - A handler that throws (synchronously too) or rejects yields a bare 500 with no detail and one
 *   `onError` call; the server goes on serving. A handler may return a `Response` or a promise of one.
 */
export function toNodeListener(
  handler: FetchHandler,
  options: NodeListenerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const hops = proxyHops(options.trustProxy, "toNodeListener");
  const trustProxy = hops > 0;
  const onError = options.onError ?? logHandlerError;
  // This listener writes responses built whole from their text: their body streams need not exist.
  deferCompleteBodies();
  // A request built only as far as the handler looks, where the runtime allows (lazy-request.ts).
  const lazy = lazyRequestsWork();
  return (req, res) => {
    const origin = requestOrigin(req, trustProxy);
    if (!origin) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    const method = req.method ?? "GET";
    const hasBody = method !== "GET" && method !== "HEAD";
    const declared = hasBody ? declaredLength(req) : undefined;
    if (declared !== undefined && Number(declared) > limit) {
      plainResponse(res, 413, "Payload Too Large\n");
      req.resume();
      return;
    }
    const abort: AbortState = { res, controller: undefined };
    const state = { tooLarge: false };
    const path = req.url ?? "/";
    let request: Request | undefined;
    if (lazy) {
      const body = hasBody ? () => bodyStream(req, limit, state) : undefined;
      // The same body without a stream, for a reader with its own cap (lazy-request.ts).
      const readBody = hasBody
        ? (callerLimit: number) => readBodyUpTo(req, limit, state, callerLimit)
        : undefined;
      request = lazyRequest(req, origin, path, method, abort, body, readBody);
    } else {
      const target = origin + path;
      try {
        const init: RequestInit & { duplex?: "half" } = { method, headers: headerPairs(req.rawHeaders) };
        if (hasBody) {
          init.body = bodyStream(req, limit, state);
          init.duplex = "half";
        }
        request = new NodeRequest(target, init, abort);
      } catch {
        request = undefined;
      }
    }
    if (request === undefined) {
      // An unparseable request target, a forbidden method or a bad header value.
      plainResponse(res, 400, "Bad Request\n");
      return;
    }
    const address = requestClientAddress(req, hops);
    if (address !== undefined) setClientAddress(request, address);

    const isHead = method === "HEAD";
    let pending: Promise<Response>;
    try {
      // A handler may throw before returning, or hand back a Response itself rather than a promise
      // of one (Hono's app.fetch does for a synchronous route): either answers this request alone,
      // never the process. Promise.resolve returns a native promise as it is (no allocation).
      pending = Promise.resolve(handler(request, { clientAddress: address }));
    } catch (error) {
      pending = Promise.reject(error);
    }
    // Writing failed: the handler's value was no Response (a 500, nothing sent yet), or the client
    // went away or the body stream errored mid-way (the connection is dropped, since the status is
    // already on the wire; plainResponse does that once headers are sent).
    const writeFailed = (error: unknown) => {
      if (!clientLeft(res)) onError(error);
      plainResponse(res, 500, "Internal Server Error\n");
    };
    // One reaction, no `.catch` promise after it: a write that fails synchronously is caught here,
    // a streamed one by its own promise.
    pending.then(
      (response) => {
        if (state.tooLarge && !res.headersSent) {
          plainResponse(res, 413, "Payload Too Large\n");
          return;
        }
        let streaming: Promise<void> | undefined;
        try {
          streaming = sendWebResponse(res, response, isHead);
        } catch (error) {
          writeFailed(error);
          return;
        }
        streaming?.catch(writeFailed);
      },
      (error: unknown) => {
        if (state.tooLarge) {
          plainResponse(res, 413, "Payload Too Large\n");
          return;
        }
        try {
          if (!clientLeft(res)) onError(error);
          plainResponse(res, 500, "Internal Server Error\n");
        } catch (failure) {
          // As before this reaction had no .catch of its own: an onError that throws is reported
          // once more and the connection still answered (or dropped).
          writeFailed(failure);
        }
      },
    );
  };
}

/** A running server from {@link listen}. */
export interface ListeningServer {
  server: Server;
  /** `http://host:port` with the real port (brackets around IPv6 literals), no trailing slash. */
  url: string;
  /** Stops accepting connections, closes open ones, resolves when the server is closed. */
  close(): Promise<void>;
}

/**
 * Starts a node:http server for `handler` (tests, examples and the CLI). `port: 0` picks a free
 * port; the returned `url` carries the real one. Default host `127.0.0.1`.
 */
export function listen(
  handler: FetchHandler,
  options: { port?: number; host?: string } & NodeListenerOptions = {},
): Promise<ListeningServer> {
  const host = options.host ?? "127.0.0.1";
  const server = createServer(toNodeListener(handler, options));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      const { port } = server.address() as AddressInfo;
      const hostPart = host.includes(":") ? `[${host}]` : host;
      resolve({
        server,
        url: `http://${hostPart}:${port}`,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeAllConnections();
          }),
      });
    });
  });
}

/**
 * A web `Request` carrying the URL, method and headers of `req` (and `body`, a form the caller
 * already read), for a scopes function judging a request that the adapters otherwise never turn
 * into a web `Request` (shared with node-require-bearer.ts and express.ts). `url` overrides the
 * request target (Express's `originalUrl`). Throws when `Host` is missing or invalid or the request
 * cannot be a web `Request` (the adapters check the head before).
 */
export function webRequestHead(
  req: IncomingMessage,
  options: { trustProxy?: boolean | number; url?: string; body?: string } = {},
): Request {
  const hops = proxyHops(options.trustProxy, "webRequestHead");
  const origin = requestOrigin(req, hops > 0);
  if (!origin) throw new Error("request without a valid Host cannot be a web Request");
  const method = req.method ?? "GET";
  const request = new Request(origin + (options.url ?? req.url ?? "/"), {
    method,
    headers: headerPairs(req.rawHeaders),
    body: options.body !== undefined && method !== "GET" && method !== "HEAD" ? options.body : undefined,
  });
  const address = requestClientAddress(req, hops);
  if (address !== undefined) CLIENT_ADDRESSES.set(request, address);
  return request;
}
