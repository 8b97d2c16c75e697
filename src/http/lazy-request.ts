/**
 * A web `Request` view of a node `IncomingMessage`, built on demand (internal to the node listener).
 *
 * In Node 20 constructing a `Request` costs more than node:http's whole handling of a small request:
 * the constructor makes an `AbortController` (a transferable object, slow to create), copies and
 * validates every header field, and a body becomes a web `ReadableStream` (slower still). Most
 * handlers read the method, the URL and a header or two. So {@link LazyRequest} answers those from
 * the `IncomingMessage` directly, makes the body stream only when `body` is asked for, and builds the
 * real `Request` (one, once) when any other member is used.
 *
 * It stays a `Request` to every consumer: `instanceof Request` holds (its prototype chain ends at
 * `Request.prototype`), each `Request` member it does not answer itself is the real request's, and
 * the per-instance slots the runtime's own `fetch` and `Request` constructor read from a request
 * they are given (undici keeps them as symbol-keyed properties) are forwarded to the real request, so
 * `fetch(request)` and `new Request(request)` see the same method, URL, headers, body and signal.
 * Whether that forwarding works is checked once, by building a probe and copying it through the
 * runtime's own `Request` constructor ({@link lazyRequestsWork}); a runtime where it does not (a
 * future undici keeping its state in private fields, Bun, Deno) gets eagerly built requests instead.
 */
import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { READ_BODY_UP_TO, type TOO_LARGE } from "../shared/bounded-body.js";

/**
 * Whether a web stream has been read from or cancelled (node's `stream.isDisturbed` takes web streams
 * too; its types name node streams only).
 */
const isDisturbed = (stream: ReadableStream): boolean =>
  Readable.isDisturbed(stream as unknown as NodeJS.ReadableStream);

/** What the listener hands over to build the view: all already validated by the listener. */
export interface LazyRequestInit {
  /** The absolute URL, as the WHATWG URL parser serialises it (what `new Request(url).url` gives). */
  url: string;
  /** The method, normalised as the Request constructor would (Fetch "normalize a method"). */
  method: string;
  /** Makes the body stream (called at most once); undefined for a request without a body. */
  body: (() => ReadableStream<Uint8Array>) | undefined;
  /**
   * Reads the body whole, bounded, without a stream (called at most once, and only while `body`
   * was not called): shared/bounded-body.ts `READ_BODY_UP_TO`.
   */
  readBody?: ((limit: number) => Promise<Uint8Array | typeof TOO_LARGE>) | undefined;
  /** The request's abort signal (made on first use by the listener). */
  signal: () => AbortSignal;
}

/** The header fields of `raw` (node's `rawHeaders`) as name/value pairs, pseudo-headers left out. */
export function headerPairs(raw: readonly string[]): [string, string][] {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // HTTP/2 pseudo-headers (":path") are not header fields.
    if (name.charCodeAt(0) === 58) continue;
    pairs.push([name, raw[i + 1]!]);
  }
  return pairs;
}

// RFC 9110 §5.1: a field name is a token; Fetch's `Headers.get` refuses anything else with a TypeError.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Fetch "normalize" a header value: HTTP whitespace (tab, LF, CR, space) off both ends. */
function normalizeValue(value: string): string {
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(value.length - 1);
  const ws = (c: number) => c === 9 || c === 10 || c === 13 || c === 32;
  if (!ws(first) && !ws(last)) return value;
  return value.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
}

/** Builds the real request (module-internal: not a string member a handler could stumble on). */
export const MATERIALIZE = Symbol("gatehouse.materialize");
/** Whether the real request exists. */
const BUILT = Symbol("gatehouse.built");
/** The built request's `Headers` (building it). */
const REAL_HEADERS = Symbol("gatehouse.realHeaders");

/**
 * A `Headers` whose `get` and `has` read node's `rawHeaders` until the request is built, and whose
 * every other member (set, append, delete, iteration) is the built request's own `Headers`: a
 * mutation builds the request first, so there is never a second copy of the fields to diverge.
 */
class LazyRequestHeaders {
  readonly #raw: readonly string[];
  readonly #owner: LazyRequest;

  constructor(raw: readonly string[], owner: LazyRequest) {
    this.#raw = raw;
    this.#owner = owner;
  }

  [REAL_HEADERS](): Headers {
    return this.#owner[MATERIALIZE]().headers;
  }

  /**
   * The combined value of `name` as Fetch's `Headers.get` gives it (RFC 9110 §5.3: repeated fields
   * joined with ", " in order; Fetch joins Cookie with "; "), or null; undefined once the request is
   * built (then its `Headers` answers).
   */
  #lookup(name: unknown, member: string): string | null | undefined {
    if (this.#owner[BUILT]()) return undefined;
    const text = String(name);
    if (!TOKEN.test(text)) throw new TypeError(`Headers.${member}: "${text}" is an invalid header name.`);
    const lower = text.toLowerCase();
    const raw = this.#raw;
    let value: string | null = null;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const field = raw[i]!;
      if (field.length !== lower.length || field.toLowerCase() !== lower) continue;
      const v = normalizeValue(raw[i + 1]!);
      value = value === null ? v : `${value}${lower === "cookie" ? "; " : ", "}${v}`;
    }
    return value;
  }

  get(...args: [name: string]): string | null {
    // As Fetch's Headers.get: the name is required (WebIDL), not read as "undefined".
    if (args.length < 1) throw new TypeError("Headers.get: 1 argument required");
    const name = args[0];
    const value = this.#lookup(name, "get");
    return value === undefined ? this[REAL_HEADERS]().get(name) : value;
  }

  has(...args: [name: string]): boolean {
    // As Fetch's Headers.has: the name is required (WebIDL), not read as "undefined".
    if (args.length < 1) throw new TypeError("Headers.has: 1 argument required");
    const name = args[0];
    const value = this.#lookup(name, "has");
    return value === undefined ? this[REAL_HEADERS]().has(name) : value !== null;
  }
}

/**
 * The lazy request. Not constructed through `Request` (that is the cost avoided); its prototype is
 * chained to `Request.prototype` below, and every `Request` member it does not define is delegated
 * to the real request ({@link MATERIALIZE}).
 */
export class LazyRequest {
  readonly #req: IncomingMessage;
  readonly #init: LazyRequestInit;
  #headers: LazyRequestHeaders | undefined;
  /** The body stream, once made (by `body` or by building the request). */
  #stream: ReadableStream<Uint8Array> | undefined;
  /** The body was read directly ({@link READ_BODY_UP_TO}): it is used, as a read stream is. */
  #readDirectly = false;
  #real: Request | undefined;

  constructor(req: IncomingMessage, init: LazyRequestInit) {
    this.#req = req;
    // Fetch: a GET or HEAD request has no body (the Request constructor refuses one).
    this.#init =
      init.method === "GET" || init.method === "HEAD"
        ? { ...init, body: undefined, readBody: undefined }
        : init;
  }

  [BUILT](): boolean {
    return this.#real !== undefined;
  }

  /**
   * The real `Request`, built once from the fields as received (nothing can have changed them: every
   * mutation builds this first), the body and the listener's signal. The body is the stream `body`
   * handed out if any (the same object, so `request.body` stays one stream); one already being read
   * cannot be a new request's body, so then the real request gets a stream marked as read: its
   * text(), clone(), `new Request(request)` and `fetch(request)` refuse it, as they would refuse
   * this request's.
   */
  [MATERIALIZE](): Request {
    if (this.#real !== undefined) return this.#real;
    const init: RequestInit & { duplex?: "half" } = {
      method: this.#init.method,
      headers: headerPairs(this.#req.rawHeaders),
      signal: this.#init.signal(),
    };
    let inUse = false;
    if (this.#init.body !== undefined) {
      const stream = this.#stream;
      if (stream === undefined && !this.#readDirectly) {
        this.#stream = this.#init.body();
        init.body = this.#stream;
      } else if (stream !== undefined && !stream.locked && !isDisturbed(stream)) {
        init.body = stream;
      } else {
        inUse = true;
        init.body = new ReadableStream({ start: (controller) => controller.close() });
      }
      init.duplex = "half";
    }
    const real = new Request(this.#init.url, init);
    // Locked and disturbed: unusable as a body, as the stream the handler holds is.
    if (inUse) void real.body?.getReader().read();
    this.#real = real;
    return real;
  }

  get method(): string {
    return this.#init.method;
  }

  get url(): string {
    return this.#init.url;
  }

  get headers(): Headers {
    this.#headers ??= new LazyRequestHeaders(this.#req.rawHeaders, this);
    return this.#headers as unknown as Headers;
  }

  get signal(): AbortSignal {
    return this.#init.signal();
  }

  /**
   * The body stream, made on first use without building the request (a form reader needs no more);
   * null for a request without a body.
   */
  get body(): ReadableStream<Uint8Array> | null {
    // Once built, the real request's body is the body: its clone() tees the stream and keeps one
    // branch as its own, so the stream handed out before is locked to the tee from then on.
    if (this.#real !== undefined) return this.#real.body;
    if (this.#init.body === undefined) return null;
    // Read directly already: the body is the real request's, a stream marked as read.
    if (this.#readDirectly) return this[MATERIALIZE]().body;
    this.#stream ??= this.#init.body();
    return this.#stream;
  }

  /** Fetch "body used": the body stream has been read from or cancelled, or the body read directly. */
  get bodyUsed(): boolean {
    if (this.#real !== undefined) return this.#real.bodyUsed;
    return this.#readDirectly || (this.#stream !== undefined && isDisturbed(this.#stream));
  }

  /**
   * The body read whole and bounded from the `IncomingMessage`, without a stream (the token
   * endpoint's form, the operation gate's JSON-RPC body), when nothing else has touched it: no
   * stream made, the request not built. Undefined otherwise (the caller reads `body`).
   */
  [READ_BODY_UP_TO](limit: number): Promise<Uint8Array | typeof TOO_LARGE> | undefined {
    const read = this.#init.readBody;
    if (read === undefined || this.#readDirectly || this.#stream !== undefined || this.#real !== undefined)
      return undefined;
    this.#readDirectly = true;
    return read(limit);
  }
}

/** `Request` members the lazy request answers itself (everything else goes to the real request). */
const OWN_MEMBERS = new Set(["constructor", "method", "url", "headers", "signal", "body", "bodyUsed"]);

/** The same for `Headers`. */
const OWN_HEADER_MEMBERS = new Set(["constructor", "get", "has"]);

/**
 * Delegates every member of `target` (a web class's prototype) that `lazy` does not define to the
 * object `real(this)` returns: getters read it, methods are called on it. So members added by a
 * future runtime are delegated too, not inherited unbound (shared with text-response.ts).
 */
export function delegate(
  lazy: object,
  target: object,
  own: ReadonlySet<string>,
  real: (self: never) => object,
): void {
  for (const key of Reflect.ownKeys(target)) {
    if (typeof key === "string" && own.has(key)) continue;
    if (key === Symbol.toStringTag) continue;
    const descriptor = Object.getOwnPropertyDescriptor(target, key);
    if (descriptor === undefined) continue;
    if (descriptor.get !== undefined) {
      const getter = descriptor.get;
      Object.defineProperty(lazy, key, {
        configurable: true,
        get(this: never) {
          return getter.call(real(this));
        },
      });
    } else if (typeof descriptor.value === "function") {
      const method = descriptor.value as (...args: unknown[]) => unknown;
      Object.defineProperty(lazy, key, {
        configurable: true,
        writable: true,
        value(this: never, ...args: unknown[]) {
          return method.apply(real(this), args);
        },
      });
    }
  }
}

Object.setPrototypeOf(LazyRequest.prototype, Request.prototype);
Object.setPrototypeOf(LazyRequestHeaders.prototype, Headers.prototype);
delegate(LazyRequest.prototype, Request.prototype, OWN_MEMBERS, (self: LazyRequest) => self[MATERIALIZE]());
delegate(LazyRequestHeaders.prototype, Headers.prototype, OWN_HEADER_MEMBERS, (self: LazyRequestHeaders) =>
  self[REAL_HEADERS](),
);

// The runtime's per-request slots (undici: state, signal, headers, dispatcher, as symbol-keyed own
// properties), read by `fetch(request)` and `new Request(request)` from the request they are given:
// forwarded to the real request. Found on a probe rather than named: their names are undici's.
for (const slot of Object.getOwnPropertySymbols(new Request("http://localhost/"))) {
  Object.defineProperty(LazyRequest.prototype, slot, {
    configurable: true,
    get(this: LazyRequest) {
      return (this[MATERIALIZE]() as unknown as Record<symbol, unknown>)[slot];
    },
  });
}

let works: boolean | undefined;

/**
 * Tests only: makes {@link lazyRequestsWork} answer `value` (undefined: probe again), so the eager
 * request a runtime without the forwarding gets is tested here too. Listeners already made keep
 * what they read.
 */
export function overrideLazyRequestsForTests(value: boolean | undefined): void {
  works = value;
}

/**
 * Whether lazy requests pass for real ones in this runtime: a probe with a body, a repeated field
 * and an odd-case name, copied by the runtime's own `Request` constructor (what `fetch` does with
 * a request), must come out with the same method, URL, fields and a body. Checked once.
 */
export function lazyRequestsWork(): boolean {
  if (works !== undefined) return works;
  try {
    const probe = new LazyRequest(
      { rawHeaders: ["X-Probe", "a", "x-PROBE", "b"] } as unknown as IncomingMessage,
      {
        url: "http://probe.invalid/p?q=1",
        method: "PUT",
        body: () => new ReadableStream({ start: (c) => c.close() }),
        signal: () => new AbortController().signal,
      },
    ) as unknown as Request;
    const copy = new Request(probe);
    works =
      probe instanceof Request &&
      copy.url === "http://probe.invalid/p?q=1" &&
      copy.method === "PUT" &&
      copy.headers.get("x-probe") === "a, b" &&
      copy.body !== null;
  } catch {
    works = false;
  }
  return works;
}
