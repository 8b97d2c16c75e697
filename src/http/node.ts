/**
 * node:http adapter: translates `IncomingMessage` → web `Request` and web `Response` →
 * `ServerResponse`. No protocol logic lives here (DESIGN.md principle 1).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { type BearerRequestHead, isFormType } from "../resource-server/bearer-token.js";
import type { ChallengeParts } from "../resource-server/challenge.js";
import { invalidRequest } from "../resource-server/errors.js";

/** A web-standard request handler. */
export type FetchHandler = (request: Request) => Promise<Response>;

export interface NodeListenerOptions {
  /**
   * Largest request body accepted, in bytes (default 1 MiB). A larger declared `Content-Length` is
   * answered 413 before the handler runs; a streamed body that grows past it errors the body stream
   * and the response is 413 if nothing was sent yet.
   */
  maxBodyBytes?: number;
  /**
   * Trust `X-Forwarded-Proto`, `X-Forwarded-Host` and `X-Forwarded-For` (only behind a proxy you
   * control that overwrites them). Default false: the URL comes from the socket's TLS state and the
   * `Host` header, the client address from the socket.
   */
  trustProxy?: boolean;
  /** Called with any error the handler throws (the client then gets a bare 500). Never given secrets. */
  onError?: (error: unknown) => void;
}

const DEFAULT_MAX_BODY = 1024 * 1024;

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
  controller: AbortController | undefined;
  aborted: boolean;
}

const ABORT_STATE = Symbol("gatehouse.abort");

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
    const state = this[ABORT_STATE];
    if (!state.controller) {
      state.controller = new AbortController();
      if (state.aborted) state.controller.abort();
    }
    return state.controller.signal;
  },
});

class BodyTooLargeError extends Error {
  constructor() {
    super("request body exceeds the configured limit");
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

function requestOrigin(req: IncomingMessage, trustProxy: boolean): string | undefined {
  let proto = (req.socket as TLSSocket).encrypted ? "https" : "http";
  let host = req.headers.host;
  if (trustProxy) {
    const fp = firstHeaderValue(req.headers["x-forwarded-proto"])?.toLowerCase();
    if (fp === "http" || fp === "https") proto = fp;
    const fh = firstHeaderValue(req.headers["x-forwarded-host"]);
    if (fh) host = fh;
  }
  if (!host || !HOST_HEADER.test(host)) return undefined;
  return `${proto}://${host}`;
}

/**
 * {@link requestOrigin} without `trustProxy`, reading `Host` from `rawHeaders` (the first field,
 * as `req.headers.host` would) so that `req.headers` is not built for a protected route.
 */
function directOrigin(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  let host: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const field = raw[i]!;
    if (field === "Host" || (field.length === 4 && field.toLowerCase() === "host")) {
      host = raw[i + 1]!;
      break;
    }
  }
  if (!host || !HOST_HEADER.test(host)) return undefined;
  return `${(req.socket as TLSSocket).encrypted ? "https" : "http"}://${host}`;
}

function requestClientAddress(req: IncomingMessage, trustProxy: boolean): string | undefined {
  if (trustProxy) {
    const forwarded = firstHeaderValue(req.headers["x-forwarded-for"]);
    if (forwarded) return forwarded;
  }
  return req.socket.remoteAddress;
}

/**
 * The request's header fields as name/value pairs, in order. Handed to the `Request` constructor
 * as a list: building a `Headers` first would make the constructor copy (and sort) it again.
 */
function buildHeaders(req: IncomingMessage): [string, string][] {
  const pairs: [string, string][] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // HTTP/2 pseudo-headers are not header fields.
    if (name.charCodeAt(0) === 58) continue;
    pairs.push([name, raw[i + 1]!]);
  }
  return pairs;
}

function bodyStream(
  req: IncomingMessage,
  limit: number,
  state: { tooLarge: boolean },
): ReadableStream<Uint8Array> {
  let received = 0;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on("data", (chunk: Buffer) => {
          received += chunk.length;
          if (received > limit) {
            state.tooLarge = true;
            controller.error(new BodyTooLargeError());
            req.pause();
            return;
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) req.pause();
        });
        req.once("end", () => {
          if (!state.tooLarge) controller.close();
        });
        req.once("error", (error) => {
          if (!state.tooLarge) controller.error(error);
        });
        req.once("aborted", () => {
          if (!state.tooLarge) controller.error(new Error("client aborted the request"));
        });
      },
      pull() {
        req.resume();
      },
      cancel() {
        req.resume();
      },
    },
    { highWaterMark: 4 },
  );
}

function plainResponse(res: ServerResponse, status: number, text: string): void {
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
 * Writes a web `Response` to a node `ServerResponse`: status, every header (each `Set-Cookie`
 * separately), and the body streamed with backpressure; a client disconnect cancels the body.
 */
export async function sendWebResponse(
  res: ServerResponse,
  response: Response,
  isHead = false,
): Promise<void> {
  res.statusCode = response.status;
  if (response.statusText) res.statusMessage = response.statusText;
  const headers = response.headers;
  const setCookies = headers.getSetCookie();
  headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    res.setHeader(name, value);
  });
  if (setCookies.length) res.setHeader("set-cookie", setCookies);

  const body = response.body;
  if (!body || isHead) {
    if (body) await body.cancel().catch(() => {});
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
    if (first.done || closed) {
      if (!closed) res.end();
      return;
    }
    let pending: Promise<ReadableStreamReadResult<Uint8Array>> | undefined = reader.read();
    const second = await Promise.race([pending, NOT_YET]);
    if (second !== NOT_YET_VALUE && second.done) {
      if (!res.hasHeader("content-length") && !res.hasHeader("transfer-encoding")) {
        res.setHeader("content-length", first.value.byteLength);
      }
      res.end(first.value);
      return;
    }
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
 * - The body is streamed, capped by `maxBodyBytes` (413).
 * - `request.signal` aborts when the client disconnects.
 * - Every response header is written, multiple `Set-Cookie` included; the body is streamed with
 *   backpressure; a client disconnect cancels the body and never crashes the process.
 * - A handler that throws yields a bare 500 with no detail.
 */
export function toNodeListener(
  handler: FetchHandler,
  options: NodeListenerOptions = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const trustProxy = options.trustProxy ?? false;
  const onError = options.onError;
  return (req, res) => {
    const origin = requestOrigin(req, trustProxy);
    if (!origin) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    const method = req.method ?? "GET";
    const hasBody = method !== "GET" && method !== "HEAD";
    const declared = req.headers["content-length"];
    if (hasBody && declared !== undefined && Number(declared) > limit) {
      plainResponse(res, 413, "Payload Too Large\n");
      req.resume();
      return;
    }
    const abort: AbortState = { controller: undefined, aborted: false };
    res.once("close", () => {
      if (res.writableFinished) return;
      abort.aborted = true;
      abort.controller?.abort();
    });
    const state = { tooLarge: false };
    let request: Request;
    try {
      const init: RequestInit & { duplex?: "half" } = { method, headers: buildHeaders(req) };
      if (hasBody) {
        init.body = bodyStream(req, limit, state);
        init.duplex = "half";
      }
      request = new NodeRequest(origin + (req.url ?? "/"), init, abort);
    } catch {
      // An unparseable request target or header value.
      plainResponse(res, 400, "Bad Request\n");
      return;
    }
    const address = requestClientAddress(req, trustProxy);
    if (address !== undefined) CLIENT_ADDRESSES.set(request, address);

    const isHead = method === "HEAD";
    handler(request)
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
          if (!abort.aborted) onError?.(error);
          plainResponse(res, 500, "Internal Server Error\n");
        },
      )
      .catch((error: unknown) => {
        // Writing failed (client gone, or the body stream errored mid-way): drop the connection.
        if (!abort.aborted) onError?.(error);
        if (!res.destroyed) res.destroy();
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
 * A body-less web `Request` carrying the URL, method and headers of `req`, for gates that only
 * look at headers (the node body stream stays untouched for the application). `url` overrides the
 * request target (Express's `originalUrl`). Returns `undefined` when `Host` is missing or invalid.
 */
export function webRequestHead(
  req: IncomingMessage,
  options: { trustProxy?: boolean; url?: string; body?: string } = {},
): Request | undefined {
  const origin = requestOrigin(req, options.trustProxy ?? false);
  if (!origin) return undefined;
  const method = req.method ?? "GET";
  let request: Request;
  try {
    request = new Request(origin + (options.url ?? req.url ?? "/"), {
      method,
      headers: buildHeaders(req),
      body: options.body !== undefined && method !== "GET" && method !== "HEAD" ? options.body : undefined,
    });
  } catch {
    return undefined;
  }
  const address = requestClientAddress(req, options.trustProxy ?? false);
  if (address !== undefined) CLIENT_ADDRESSES.set(request, address);
  return request;
}

/** The gate's verdict as data (`ResourceServer.requireBearerHead`). */
export type NodeBearerVerdict<Auth> = { ok: true; auth: Auth } | { ok: false; challenge: ChallengeParts };

/** What {@link nodeRequireBearer} needs from a resource server (see `createResourceServer`). */
export interface BearerGate<Auth> {
  requireBearer(options?: {
    scopes?: readonly string[] | ((request: Request) => readonly string[] | Promise<readonly string[]>);
  }): (request: Request, next: (request: Request, auth: Auth) => Promise<Response>) => Promise<Response>;
  /**
   * The same gate on a request head, answering with data instead of a `Response`. When present
   * (a `ResourceServer` has it) the node adapter uses it and builds no web `Request`/`Response`.
   */
  requireBearerHead?(options?: {
    scopes?: readonly string[] | ((request: Request) => readonly string[] | Promise<readonly string[]>);
  }): (
    head: BearerRequestHead,
    request?: () => Request,
  ) => NodeBearerVerdict<Auth> | Promise<NodeBearerVerdict<Auth>>;
}

export interface NodeRequireBearerOptions {
  scopes?: readonly string[] | ((request: Request) => readonly string[] | Promise<readonly string[]>);
  trustProxy?: boolean;
  /**
   * Largest urlencoded form body read to look for a token in it, in bytes (default 1 MiB); a
   * larger one is answered 413 before `handler` runs. Other bodies are never read by the gate.
   */
  maxBodyBytes?: number;
}

const PASSED = new Response(null, { status: 299 });
const GET_OR_HEAD = new Set(["GET", "HEAD"]);

/**
 * A header of `req` read from `rawHeaders` without building `req.headers`: lowercase `name`,
 * several fields joined with ", " as `Headers.get` does (so two `Authorization` fields stay
 * detectable as malformed, which `req.headers` would hide by keeping the first).
 */
function rawHeader(req: IncomingMessage, name: string): string | null {
  const raw = req.rawHeaders;
  let value: string | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const field = raw[i]!;
    if (field !== name && (field.length !== name.length || field.toLowerCase() !== name)) continue;
    value = value === null ? raw[i + 1]! : `${value}, ${raw[i + 1]!}`;
  }
  return value;
}

/** True when the node request carries content (RFC 9112 §6.3: Content-Length or Transfer-Encoding). */
function nodeHasContent(req: IncomingMessage): boolean {
  const length = rawHeader(req, "content-length");
  if (length !== null) return length.trim() !== "0";
  return rawHeader(req, "transfer-encoding") !== null;
}

class BodyReadError extends Error {
  constructor(readonly reason: "too-large" | "aborted") {
    super(
      reason === "too-large" ? "request body exceeds the configured limit" : "client aborted the request",
    );
    this.name = "BodyReadError";
  }
}

/**
 * Reads the whole body of `req` and puts it back (`unshift`) before `end` is emitted, so the
 * application still reads every byte from the same `IncomingMessage`. `req.complete` marks the
 * point where every byte has arrived.
 */
function readBodyKeepingIt(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("readable", onReadable);
      req.off("error", onFailure);
      req.off("aborted", onFailure);
      req.off("close", onClose);
    };
    const onFailure = () => {
      cleanup();
      reject(new BodyReadError("aborted"));
    };
    const onClose = () => {
      if (!req.complete) onFailure();
    };
    const onReadable = () => {
      for (let chunk: Buffer | null = req.read(); chunk !== null; chunk = req.read()) {
        size += chunk.length;
        if (size > limit) {
          cleanup();
          reject(new BodyReadError("too-large"));
          return;
        }
        chunks.push(chunk);
      }
      if (!req.complete) return;
      cleanup();
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      // Synchronously after the last read(): 'end' is only emitted once the buffer is empty.
      if (size > 0) req.unshift(body);
      resolve(body);
    };
    req.on("readable", onReadable);
    req.on("error", onFailure);
    req.on("aborted", onFailure);
    req.on("close", onClose);
  });
}

/** A {@link BearerRequestHead} read lazily from an `IncomingMessage`. */
class NodeRequestHead implements BearerRequestHead {
  failure: BodyReadError | undefined;
  constructor(
    private readonly req: IncomingMessage,
    readonly url: string,
    private readonly maxBodyBytes: number,
  ) {}
  header(name: string): string | null {
    return rawHeader(this.req, name);
  }
  get hasBody(): boolean {
    // RFC 6750 §2.2: the form method never applies to GET; a web Request has no body there either.
    return !GET_OR_HEAD.has(this.req.method ?? "GET") && nodeHasContent(this.req);
  }
  async bodyText(): Promise<string> {
    try {
      return (await readBodyKeepingIt(this.req, this.maxBodyBytes)).toString("utf8");
    } catch (error) {
      this.failure = error as BodyReadError;
      // The gate logs this as a bad request (not an internal error); the adapter answers 413 or
      // drops the connection instead of sending the challenge.
      throw invalidRequest("The request body could not be read", `form body ${this.failure.reason}`);
    }
  }
}

/** Writes a challenge from the gate with `writeHead`/`end` (no web `Response`). */
function writeChallenge(res: ServerResponse, challenge: ChallengeParts, isHead: boolean): void {
  const headers = challenge.headers;
  headers["content-length"] = String(challenge.body === null ? 0 : Buffer.byteLength(challenge.body));
  res.writeHead(challenge.status, headers);
  res.end(isHead || challenge.body === null ? undefined : challenge.body);
}

/** Origins already seen to parse as a URL (the Host regex admits a few that do not, e.g. `a%zz`). */
let parsedOrigin = "";
function targetParses(origin: string, target: string): boolean {
  // An origin-form target after a parsed origin always parses (special-scheme paths percent-encode).
  if (origin === parsedOrigin && target.charCodeAt(0) === 47) return true;
  try {
    new URL(origin + target);
  } catch {
    return false;
  }
  if (target.charCodeAt(0) === 47) parsedOrigin = origin;
  return true;
}

/**
 * Protects a node-style handler: the gate judges the request; on success `handler` runs with the
 * verified auth, otherwise the challenge (401/403/400, built by the resource server's one
 * challenge module) is written with `writeHead`/`end` and `handler` never runs.
 *
 * With a `ResourceServer` no web `Request` or `Response` is built: the gate reads the method, the
 * request target and headers straight from `IncomingMessage` (only a scopes function gets a web
 * `Request`). A request with content whose `Content-Type` is `application/x-www-form-urlencoded`
 * (not GET/HEAD) has its body read (up to `maxBodyBytes`, else 413) and refused with 400
 * `invalid_request` when it has an `access_token` parameter (RFC 6750 §2.2, never validated); the
 * bytes are put back into `req`, so `handler` reads the body in full. Other bodies are not touched.
 */
export function nodeRequireBearer<Auth>(
  gate: BearerGate<Auth>,
  options: NodeRequireBearerOptions,
  handler: (req: IncomingMessage, res: ServerResponse, auth: Auth) => void | Promise<void>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const trustProxy = options.trustProxy ?? false;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const check = gate.requireBearerHead?.({ scopes: options.scopes });
  if (check === undefined) return webGateListener(gate, options, limit, handler);
  const fail = (res: ServerResponse, head: NodeRequestHead) => {
    if (head.failure?.reason === "aborted") {
      if (!res.destroyed) res.destroy();
      return;
    }
    if (head.failure?.reason === "too-large") plainResponse(res, 413, "Payload Too Large\n");
    else plainResponse(res, 500, "Internal Server Error\n");
  };
  const decided = (
    req: IncomingMessage,
    res: ServerResponse,
    head: NodeRequestHead,
    verdict: NodeBearerVerdict<Auth>,
  ): void | Promise<void> => {
    if (head.failure) return fail(res, head);
    if (verdict.ok) return handler(req, res, verdict.auth);
    writeChallenge(res, verdict.challenge, req.method === "HEAD");
  };
  return (req, res) => {
    const origin = trustProxy ? requestOrigin(req, true) : directOrigin(req);
    const target = req.url ?? "/";
    if (!origin || !targetParses(origin, target)) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    const head = new NodeRequestHead(req, target, limit);
    const toRequest = () => {
      const request = webRequestHead(req, { trustProxy });
      if (!request) throw new Error("request head cannot be a web Request");
      return request;
    };
    let done: void | Promise<void>;
    try {
      const verdict = check(head, toRequest);
      if (verdict instanceof Promise) {
        verdict.then((v) => decided(req, res, head, v)).then(undefined, () => fail(res, head));
        return;
      }
      // A warm request is decided synchronously: the handler runs in this very event, as an
      // unprotected route would.
      done = decided(req, res, head, verdict);
    } catch {
      fail(res, head);
      return;
    }
    if (done instanceof Promise) done.then(undefined, () => fail(res, head));
  };
}

/** {@link nodeRequireBearer} for a gate without `requireBearerHead`: through a body-less web Request. */
function webGateListener<Auth>(
  gate: BearerGate<Auth>,
  options: NodeRequireBearerOptions,
  limit: number,
  handler: (req: IncomingMessage, res: ServerResponse, auth: Auth) => void | Promise<void>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const middleware = gate.requireBearer({ scopes: options.scopes });
  const run = (req: IncomingMessage, res: ServerResponse, body: string | undefined) => {
    const request = webRequestHead(req, { trustProxy: options.trustProxy, body });
    if (!request) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    middleware(request, async (_request, auth) => {
      await handler(req, res, auth);
      return PASSED;
    })
      .then(
        (response) =>
          response === PASSED ? undefined : sendWebResponse(res, response, req.method === "HEAD"),
        () => plainResponse(res, 500, "Internal Server Error\n"),
      )
      .catch(() => {
        if (!res.destroyed) res.destroy();
      });
  };
  return (req, res) => {
    const head = new NodeRequestHead(req, req.url ?? "/", limit);
    if (!(head.hasBody && isFormType(head.header("content-type")))) return run(req, res, undefined);
    // The form body goes to the gate as text (so it can refuse a token there); `req` keeps it.
    head.bodyText().then(
      (body) => run(req, res, body),
      () => {
        if (head.failure?.reason === "too-large") plainResponse(res, 413, "Payload Too Large\n");
        else if (!res.destroyed) res.destroy();
      },
    );
  };
}
