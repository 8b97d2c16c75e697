/**
 * node:http adapter, listener half: translates `IncomingMessage` → web `Request` (lazily, see
 * lazy-request.ts) and web `Response` → `ServerResponse`, and starts servers. No protocol logic
 * lives here (DESIGN.md principle 1). Public through `node.ts` (the `gatehouse/node` entry point);
 * the helpers marked "shared with ..." are internal to the adapters.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, isIP, isIPv4, isIPv6 } from "node:net";
import type { TLSSocket } from "node:tls";
import { GatehouseError, GatehouseTypeError } from "../shared/errors.js";
import { completeResponseBody, deferCompleteBodies } from "../shared/http.js";
import { jsonLogger } from "../shared/log.js";
import { headerPairs, LazyRequest, lazyRequestsWork, MATERIALIZE } from "./lazy-request.js";

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

/** Side channel for the client address: not a header, so a client cannot forge it. */
const CLIENT_ADDRESSES = new WeakMap<Request, string>();

/**
 * The address of the client that sent `request`, when it came through {@link toNodeListener}
 * (honouring `X-Forwarded-For` only with `trustProxy`). `undefined` for requests built elsewhere.
 */
export function clientAddress(request: Request): string | undefined {
  return CLIENT_ADDRESSES.get(request);
}

/** Attaches a client address to a request (for other adapters and tests). */
export function setClientAddress(request: Request, address: string): void {
  CLIENT_ADDRESSES.set(request, address);
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
  clone(): Request {
    const copy = this[MATERIALIZE]().clone();
    const address = CLIENT_ADDRESSES.get(this as unknown as Request);
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
  if (!METHOD_TOKEN.test(method)) return undefined;
  const upper = method.toUpperCase();
  if (FORBIDDEN_METHODS.has(upper)) return undefined;
  return NORMALIZED_METHODS.has(upper) ? upper : method;
}

/**
 * The lazy request for `req`, or undefined where `new Request` would have thrown: an unparseable
 * target, a URL with credentials (Fetch's Request constructor refuses them), a bad method.
 */
function lazyRequest(
  req: IncomingMessage,
  target: string,
  method: string,
  abort: AbortState,
  body: (() => ReadableStream<Uint8Array>) | undefined,
): Request | undefined {
  const normalized = requestMethod(method);
  if (normalized === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return undefined;
  }
  if (url.username !== "" || url.password !== "") return undefined;
  const request = new ListenerRequest(req, {
    url: url.href,
    method: normalized,
    body,
    signal: () => abortSignal(abort),
  });
  return request as unknown as Request;
}

class BodyTooLargeError extends GatehouseError<"ERR_BODY_TOO_LARGE"> {
  constructor() {
    super("ERR_BODY_TOO_LARGE", "request body exceeds the configured limit");
    this.name = "BodyTooLargeError";
  }
}

// RFC 9110 §7.2 / RFC 3986 §3.2.2: host [ ":" port ], reg-name, IPv4 or an IP literal in brackets.
const HOST_HEADER = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)(?::\d{1,5})?$/;

function firstHeaderValue(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const first = v.split(",")[0]?.trim();
  return first === "" ? undefined : first;
}

/**
 * The request's scheme: the socket's TLS state, or with `trustProxy` the first
 * `X-Forwarded-Proto` (shared with node-require-bearer.ts).
 */
export function requestScheme(req: IncomingMessage, trustProxy: boolean): "http" | "https" {
  if (trustProxy) {
    const fp = firstHeaderValue(req.headers["x-forwarded-proto"])?.toLowerCase();
    if (fp === "http" || fp === "https") return fp;
  }
  return (req.socket as TLSSocket).encrypted ? "https" : "http";
}

/**
 * The request's authority (`host[:port]`): `Host`, or with `trustProxy` the first
 * `X-Forwarded-Host` when there is one; undefined when missing or malformed (shared with
 * node-require-bearer.ts). Without `trustProxy`, `Host` is read from `rawHeaders` (the first field,
 * as `req.headers.host` would), so `req.headers` is not built for a protected route.
 */
export function requestHost(req: IncomingMessage, trustProxy: boolean): string | undefined {
  let host: string | undefined;
  if (trustProxy) host = firstHeaderValue(req.headers["x-forwarded-host"]) ?? req.headers.host;
  else {
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const field = raw[i]!;
      if (field === "Host" || (field.length === 4 && field.toLowerCase() === "host")) {
        host = raw[i + 1]!;
        break;
      }
    }
  }
  if (!host || !HOST_HEADER.test(host)) return undefined;
  return host;
}

/** The request's origin, or undefined for a missing or malformed `Host` (shared with node-require-bearer.ts). */
export function requestOrigin(req: IncomingMessage, trustProxy: boolean): string | undefined {
  const host = requestHost(req, trustProxy);
  return host === undefined ? undefined : `${requestScheme(req, trustProxy)}://${host}`;
}

/**
 * The number of trusted proxy hops `trustProxy` means (`true` = 1, `false` = 0); a misconfiguration
 * throws at set-up (shared with node-require-bearer.ts).
 */
export function proxyHops(trustProxy: boolean | number | undefined, where: string): number {
  if (trustProxy === undefined || trustProxy === false) return 0;
  if (trustProxy === true) return 1;
  if (typeof trustProxy !== "number" || !Number.isInteger(trustProxy) || trustProxy < 0) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `${where}: trustProxy must be a boolean or the number of trusted proxy hops (an integer >= 0)`,
    );
  }
  return trustProxy;
}

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_IPV6 = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/;

/** One `X-Forwarded-For` entry as an IP address: bare, `a.b.c.d:port` or `[v6]:port`; else undefined. */
function forwardedAddress(entry: string): string | undefined {
  const value = entry.trim();
  if (isIP(value) !== 0) return value;
  const v4 = IPV4_WITH_PORT.exec(value)?.[1];
  if (v4 !== undefined) return isIPv4(v4) ? v4 : undefined;
  const v6 = BRACKETED_IPV6.exec(value)?.[1];
  return v6 !== undefined && isIPv6(v6) ? v6 : undefined;
}

/**
 * The client address. Behind `hops` trusted proxies that append to `X-Forwarded-For` (the common
 * default), only the entries they wrote can be believed, the rightmost `hops`; everything left of
 * them is whatever the client sent. So the address is the `hops`-th entry from the right (RFC 7239
 * §5.2 reads the same list right to left), and the socket address when there is no such entry or it
 * is not an IP address.
 */
function requestClientAddress(req: IncomingMessage, hops: number): string | undefined {
  const socketAddress = req.socket.remoteAddress;
  if (hops === 0) return socketAddress;
  // Several X-Forwarded-For fields arrive joined with ", " in order (RFC 9110 §5.3).
  const forwarded = req.headers["x-forwarded-for"];
  if (forwarded === undefined) return socketAddress;
  const entries = (Array.isArray(forwarded) ? forwarded.join(",") : forwarded).split(",");
  if (entries.length < hops) return socketAddress;
  return forwardedAddress(entries[entries.length - hops]!) ?? socketAddress;
}

/**
 * The declared `Content-Length`: the first such field in `rawHeaders` whatever the case of its name,
 * as node's `req.headers` keeps (its parser already refused conflicting ones, RFC 9112 §6.3).
 */
function declaredLength(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 14 && name.toLowerCase() === "content-length") return raw[i + 1];
  }
  return undefined;
}

function bodyStream(
  req: IncomingMessage,
  limit: number,
  state: { tooLarge: boolean },
): ReadableStream<Uint8Array> {
  let received = 0;
  // Set once the stream is closed, errored or cancelled by its reader: from then on node's events
  // are ignored (enqueue or close on such a stream throws, and here that would be an uncaught
  // exception: a reader that stops at its own cap, as the authorization server's form reader does,
  // cancels while the client is still sending).
  let finished = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on("data", (chunk: Buffer) => {
          if (finished) return;
          received += chunk.length;
          if (received > limit) {
            finished = true;
            state.tooLarge = true;
            controller.error(new BodyTooLargeError());
            req.pause();
            return;
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) req.pause();
        });
        req.once("end", () => {
          if (finished) return;
          finished = true;
          controller.close();
        });
        req.once("error", (error) => {
          if (finished) return;
          finished = true;
          controller.error(error);
        });
        req.once("aborted", () => {
          if (finished) return;
          finished = true;
          controller.error(new Error("client aborted the request"));
        });
      },
      pull() {
        req.resume();
      },
      cancel() {
        // The rest of the body is read and dropped, so the connection can carry the response.
        finished = true;
        req.resume();
      },
    },
    { highWaterMark: 4 },
  );
}

/**
 * A short plain-text answer, or a dropped connection once a response has begun (shared with
 * node-require-bearer.ts).
 */
export function plainResponse(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

const NOT_YET_VALUE = Symbol("not yet");
/** Settles after any already-settled promise raced before it (promise jobs run in order). */
const NOT_YET: Promise<typeof NOT_YET_VALUE> = Promise.resolve(NOT_YET_VALUE);

/**
 * Statuses that carry no body (RFC 9110 §15.2, §15.3.5, §15.4.5): no Content-Length is added for
 * them (RFC 9110 §8.6: a server MUST NOT send one in a 1xx or 204 response).
 */
function statusHasBody(status: number): boolean {
  return status >= 200 && status !== 204 && status !== 304;
}

/**
 * Writes the status line and `fields` (flat name/value list) in one call, adding `Content-Length:
 * length` when the body's length is known, the response has no framing field of its own and its
 * status and the method allow a body. The fields come from a web `Headers`, which has validated
 * every name and value already (Fetch "header name"/"header value"), so node is given the list as
 * is rather than through `setHeader` one field at a time.
 */
function writeHead(
  res: ServerResponse,
  response: Response,
  fields: string[],
  framed: boolean,
  length: number | undefined,
  isHead: boolean,
): void {
  if (length !== undefined && !framed && !isHead && statusHasBody(response.status)) {
    fields.push("content-length", String(length));
  }
  if (response.statusText) res.writeHead(response.status, response.statusText, fields);
  else res.writeHead(response.status, fields);
}

/**
 * Writes a web `Response` to a node `ServerResponse`: status, every header (each `Set-Cookie`
 * separately), and the body streamed with backpressure; a client disconnect cancels the body. A
 * body kept whole as text goes out synchronously (undefined: no promise to make for it).
 */
function sendWebResponse(res: ServerResponse, response: Response, isHead = false): Promise<void> | undefined {
  // One walk over the fields: iterating a Headers yields each Set-Cookie on its own (Fetch "sort
  // and combine"), every other name once.
  const fields: string[] = [];
  let framed = false;
  for (const [name, value] of response.headers) {
    fields.push(name, value);
    if (name === "content-length" || name === "transfer-encoding") framed = true;
  }

  // A body built whole by Gatehouse's own helpers goes out in one write, its stream never read
  // (nor made, for a deferred one: so this comes before `response.body`).
  const complete = completeResponseBody(response);
  if (complete !== undefined) {
    writeHead(res, response, fields, framed, Buffer.byteLength(complete), isHead);
    if (isHead) res.end();
    else res.end(complete);
    return;
  }
  return streamWebResponse(res, response, fields, framed, isHead);
}

/** The rest of {@link sendWebResponse}: a body read from its stream. */
async function streamWebResponse(
  res: ServerResponse,
  response: Response,
  fields: string[],
  framed: boolean,
  isHead: boolean,
): Promise<void> {
  const body = response.body;
  if (!body || isHead) {
    if (body) await body.cancel().catch(() => {});
    writeHead(res, response, fields, framed, 0, isHead);
    res.end();
    return;
  }
  const reader = body.getReader();
  let closed = false;
  const onClose = () => {
    closed = true;
    reader.cancel().catch(() => {});
  };
  res.once("close", onClose);
  try {
    // Read-ahead: a body that is already complete (a string, a buffer, JSON) goes out in one write
    // with Content-Length instead of chunked framing. A body still being produced (SSE) is not
    // waited for: the second read only counts when it has already settled.
    const first = await reader.read();
    if (closed) return;
    if (first.done) {
      writeHead(res, response, fields, framed, 0, isHead);
      res.end();
      return;
    }
    let pending: Promise<ReadableStreamReadResult<Uint8Array>> | undefined = reader.read();
    const second = await Promise.race([pending, NOT_YET]);
    if (second !== NOT_YET_VALUE && second.done) {
      writeHead(res, response, fields, framed, first.value.byteLength, isHead);
      res.end(first.value);
      return;
    }
    writeHead(res, response, fields, framed, undefined, isHead);
    res.write(first.value);
    for (;;) {
      const { done, value } = await (pending ?? reader.read());
      pending = undefined;
      if (done || closed) break;
      if (!res.write(value)) {
        // Backpressure: wait until the socket drains or the client goes away.
        await new Promise<void>((resolve) => {
          const finish = () => {
            res.off("drain", finish);
            res.off("close", finish);
            resolve();
          };
          res.on("drain", finish);
          res.on("close", finish);
        });
        if (closed) break;
      }
    }
    if (!closed) res.end();
  } finally {
    res.off("close", onClose);
  }
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
 *   dropped).
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
    const target = origin + (req.url ?? "/");
    let request: Request | undefined;
    if (lazy) {
      const body = hasBody ? () => bodyStream(req, limit, state) : undefined;
      request = lazyRequest(req, target, method, abort, body);
    } else {
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
    if (address !== undefined) CLIENT_ADDRESSES.set(request, address);

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
    pending
      .then(
        (response) => {
          if (state.tooLarge && !res.headersSent) {
            plainResponse(res, 413, "Payload Too Large\n");
            return;
          }
          return sendWebResponse(res, response, isHead);
        },
        (error: unknown) => {
          if (state.tooLarge) {
            plainResponse(res, 413, "Payload Too Large\n");
            return;
          }
          if (!clientLeft(res)) onError(error);
          plainResponse(res, 500, "Internal Server Error\n");
        },
      )
      .catch((error: unknown) => {
        // Writing failed: the handler's value was no Response (a 500, nothing sent yet), or the
        // client went away or the body stream errored mid-way (the connection is dropped, since
        // the status is already on the wire; plainResponse does that once headers are sent).
        if (!clientLeft(res)) onError(error);
        plainResponse(res, 500, "Internal Server Error\n");
      });
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
