/**
 * `textResponse(text, init)`: a web `Response` whose body is known whole as text, which the node
 * listener writes with one `writeHead` and one `end` without making an undici `Response`, a
 * `Headers` or a body stream (public through `gatehouse-auth/node`).
 *
 * In Node 20 `new Response(text, { headers })` costs about as much as node:http's whole handling of a
 * small request: the body becomes a web `ReadableStream`, the init a validated `Headers`, and the
 * listener must read the stream back. A handler that answers with a string needs none of that when
 * the node listener is the one consuming the answer. So {@link textResponse} keeps the status, the
 * fields (checked as `new Response` checks them) and the text, answers `status`, `statusText`, `ok`,
 * `type`, `url`, `redirected` and `bodyUsed` itself, and builds the real `Response` (one, once) the
 * first time any other member is used: `headers` (so a mutation lands on the real `Headers`, and
 * the listener then writes those), `body`, `text()`, `clone()`, ... It stays a `Response` to every
 * consumer, as the lazy request stays a `Request` (lazy-request.ts): `instanceof Response`, every
 * member, and undici's per-instance slots forwarded to the real response. Whether that holds is
 * checked once with a probe; a runtime where it does not (an undici keeping its state in private
 * fields, Bun, Deno, whose servers read a `Response` natively) gets `new Response(text, init)`.
 *
 * An init the fast path does not take as it is (a status outside 200-599 or one without a body
 * (RFC 9110 §15.3.5, §15.4.5), a statusText or field value with characters Fetch refuses or
 * normalises, a field given as anything but a string or number) is handed to `new Response` itself,
 * which answers it exactly as the standard says (a normalised value, or the TypeError/RangeError).
 */
import { delegate } from "./lazy-request.js";

// RFC 9110 §5.1: a field name is a token (Fetch "header name").
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * A field value Fetch keeps as it is and node writes as it is (RFC 9110 §5.5: visible characters,
 * obs-text, spaces and tabs inside, none at either end: Fetch would strip those).
 */
const PLAIN_VALUE = /^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?$/;
/** RFC 9112 §4 reason-phrase (Fetch checks a statusText against it). */
const REASON = /^[\t\x20-\x7e\x80-\xff]*$/;
/** What `new Response(text)` adds without a Content-Type (Fetch "extract a body" for a string). */
const TEXT_TYPE = "text/plain;charset=UTF-8";

/** Builds the real response (module-internal symbols: not members a consumer could stumble on). */
const MATERIALIZE = Symbol("gatehouse.materializeResponse");
/** The parts to write, see {@link wholeTextResponse}. */
const WHOLE = Symbol("gatehouse.wholeResponse");

/** What the node listener writes for a text response: status, reason, flat name/value list, text. */
export interface WholeTextResponse {
  status: number;
  statusText: string;
  /** Name/value pairs flattened, names lower-case; a fresh array the caller may extend. */
  fields: string[];
  text: string;
}

/**
 * The lazy response. Not constructed through `Response` (that is the cost avoided); its prototype is
 * chained to `Response.prototype` below, and every member it does not define is the real
 * response's ({@link MATERIALIZE}).
 */
class TextResponse {
  readonly #text: string;
  readonly #status: number;
  readonly #statusText: string;
  /** Flat name/value list, validated; never mutated after construction. */
  readonly #fields: readonly string[];
  #real: Response | undefined;

  constructor(text: string, status: number, statusText: string, fields: readonly string[]) {
    this.#text = text;
    this.#status = status;
    this.#statusText = statusText;
    this.#fields = fields;
  }

  [MATERIALIZE](): Response {
    if (this.#real !== undefined) return this.#real;
    const pairs: [string, string][] = [];
    const fields = this.#fields;
    for (let i = 0; i < fields.length; i += 2) pairs.push([fields[i]!, fields[i + 1]!]);
    this.#real = new Response(this.#text, {
      status: this.#status,
      statusText: this.#statusText,
      headers: pairs,
    });
    return this.#real;
  }

  /**
   * The parts to write when the text is still the body: before the real response exists, or after,
   * while its body stream is neither read nor locked (then its `Headers`, which a consumer may have
   * changed, give the fields). Undefined when the stream is the truth.
   */
  [WHOLE](): WholeTextResponse | undefined {
    const real = this.#real;
    if (real === undefined) {
      return {
        status: this.#status,
        statusText: this.#statusText,
        fields: this.#fields.slice(),
        text: this.#text,
      };
    }
    if (real.bodyUsed || real.body?.locked !== false) return undefined;
    const fields: string[] = [];
    for (const [name, value] of real.headers) fields.push(name, value);
    return { status: real.status, statusText: real.statusText, fields, text: this.#text };
  }

  get status(): number {
    return this.#status;
  }
  get statusText(): string {
    return this.#statusText;
  }
  get ok(): boolean {
    return this.#status >= 200 && this.#status <= 299;
  }
  get type(): ResponseType {
    return "default";
  }
  get url(): string {
    return "";
  }
  get redirected(): boolean {
    return false;
  }
  get bodyUsed(): boolean {
    return this.#real?.bodyUsed ?? false;
  }
}

/** `Response` members the text response answers itself (everything else is the real response's). */
const OWN_MEMBERS = new Set([
  "constructor",
  "status",
  "statusText",
  "ok",
  "type",
  "url",
  "redirected",
  "bodyUsed",
]);

Object.setPrototypeOf(TextResponse.prototype, Response.prototype);
delegate(TextResponse.prototype, Response.prototype, OWN_MEMBERS, (self: TextResponse) =>
  self[MATERIALIZE](),
);
// undici's per-response slots (state, headers), read by its own functions from a response they are
// given: forwarded to the real response. Found on a probe rather than named: their names are undici's.
for (const slot of Object.getOwnPropertySymbols(new Response(null))) {
  Object.defineProperty(TextResponse.prototype, slot, {
    configurable: true,
    get(this: TextResponse) {
      return (this[MATERIALIZE]() as unknown as Record<symbol, unknown>)[slot];
    },
  });
}

let works: boolean | undefined;

/**
 * Whether text responses pass for real ones in this runtime (checked once): the standard's own
 * getter and `clone`, called on a probe, must reach the real response through the forwarded slots,
 * and `new Response(probe.body, probe)` must copy status and fields. Never under Bun or Deno.
 */
function textResponsesWork(): boolean {
  if (works !== undefined) return works;
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  try {
    const probe = new TextResponse("probe", 201, "Made", ["x-probe", "a"]) as unknown as Response;
    const typeGetter = Object.getOwnPropertyDescriptor(Response.prototype, "type")?.get;
    const copy = new Response(probe.body, probe);
    works =
      runtime.Bun === undefined &&
      runtime.Deno === undefined &&
      probe instanceof Response &&
      typeGetter?.call(probe) === "default" &&
      Response.prototype.clone.call(probe).status === 201 &&
      copy.status === 201 &&
      copy.headers.get("x-probe") === "a";
  } catch {
    works = false;
  }
  return works;
}

/**
 * Adds the fields of `headers` to `fields` (names lower-cased, as `Headers` keeps them); false when
 * the init is one the fast path leaves to `new Response` (see the module comment).
 */
function collectFields(headers: HeadersInit, fields: string[]): boolean {
  if (headers instanceof Headers) {
    // Already validated and normalised by Fetch; each Set-Cookie comes out on its own.
    for (const [name, value] of headers) fields.push(name, value);
    return true;
  }
  if (Array.isArray(headers)) {
    for (const pair of headers) {
      if (!Array.isArray(pair) || pair.length !== 2) return false;
      if (!addField(fields, pair[0], pair[1])) return false;
    }
    return true;
  }
  const proto = Object.getPrototypeOf(headers);
  if (proto !== Object.prototype && proto !== null) return false;
  const record = headers as Record<string, unknown>;
  for (const name of Object.keys(record)) if (!addField(fields, name, record[name])) return false;
  return true;
}

function addField(fields: string[], name: unknown, value: unknown): boolean {
  if (typeof name !== "string" || !TOKEN.test(name)) return false;
  const text = typeof value === "string" ? value : typeof value === "number" ? String(value) : undefined;
  if (text === undefined || !PLAIN_VALUE.test(text)) return false;
  fields.push(name.toLowerCase(), text);
  return true;
}

/**
 * A `Response` with the complete text `text` (and `init` as `new Response` takes it), which the node
 * listener ({@link toNodeListener}, `listen`, `gatehouse serve`) writes in one piece without building
 * an undici `Response`. Everywhere else it is an ordinary `Response`: any member beyond the status
 * builds one, once, from the same text and init. No Content-Type in `init` gives
 * `text/plain;charset=UTF-8`, as `new Response(text)` does.
 */
export function textResponse(text: string, init: ResponseInit = {}): Response {
  if (typeof text === "string" && textResponsesWork()) {
    const status = init.status ?? 200;
    const statusText = init.statusText ?? "";
    // 204, 205 and 304 carry no body; Fetch refuses a Response with one (and statuses outside 200-599).
    if (
      Number.isInteger(status) &&
      status >= 200 &&
      status <= 599 &&
      status !== 204 &&
      status !== 205 &&
      status !== 304 &&
      typeof statusText === "string" &&
      REASON.test(statusText)
    ) {
      const fields: string[] = [];
      if (init.headers === undefined || collectFields(init.headers, fields)) {
        let typed = false;
        for (let i = 0; i < fields.length; i += 2) if (fields[i] === "content-type") typed = true;
        if (!typed) fields.push("content-type", TEXT_TYPE);
        return new TextResponse(text, status, statusText, fields) as unknown as Response;
      }
    }
  }
  return new Response(text, init);
}

/**
 * The parts of a {@link textResponse} the node listener writes, while its text is still its body;
 * undefined for any other response or once its body stream was read or locked (then it is read
 * from the stream, as any response's).
 */
export function wholeTextResponse(response: Response): WholeTextResponse | undefined {
  if (!(response instanceof TextResponse)) return undefined;
  return response[WHOLE]();
}
