/**
 * JSON and OAuth error responses (RFC 6749 §5.1, §5.2), never cached; and responses whose body is
 * known whole when built, which the node listener writes in one piece.
 */
import type { OAuthError } from "./errors.js";

/**
 * The text each response from {@link completeResponse} was built with. A side channel, not a header:
 * the node listener writes this text directly instead of reading the body stream back chunk by
 * chunk (the stream stays untouched and readable for every other consumer).
 */
const COMPLETE_BODIES = new WeakMap<Response, string>();

/** Statuses whose response has no body (Fetch "null body status"): `new Response(text)` refuses them. */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** Set by the node listener, see {@link deferCompleteBodies}. */
let deferBodies = false;

/**
 * Called by the node listener when it is set up: from then on {@link completeResponse} builds a
 * {@link DeferredBodyResponse}, whose body stream is created only if some code asks for it. In
 * Node 20 a web `ReadableStream` costs more to construct than the rest of a small response, and the
 * listener never needs it (it writes the text from the side channel). Not under Bun or Deno: their
 * servers read a `Response`'s body natively, past the JavaScript getters, and would send nothing.
 */
export function deferCompleteBodies(): void {
  const runtime = globalThis as { Bun?: unknown; Deno?: unknown };
  if (runtime.Bun === undefined && runtime.Deno === undefined) deferBodies = true;
}

/**
 * A `Response` whose complete text is kept aside and whose body stream is made on first use: every
 * body member (`body`, `bodyUsed`, `text()`, `json()`, `arrayBuffer()`, `bytes()`, `blob()`,
 * `formData()`, `clone()`) works on a real `Response` built from the text and the headers at that
 * moment, so a consumer sees an ordinary response. Only {@link completeResponseBody} (the node listener) reads the
 * text without it.
 */
class DeferredBodyResponse extends Response {
  readonly #text: string;
  #materialized: Response | undefined;

  constructor(text: string, init: ResponseInit) {
    super(null, init);
    this.#text = text;
    // As `new Response(text)` would add (Fetch "extract a body": text/plain;charset=UTF-8).
    if (!this.headers.has("content-type")) this.headers.set("content-type", "text/plain;charset=UTF-8");
  }

  /** The response carrying the real body stream, made once. */
  #withBody(): Response {
    this.#materialized ??= new Response(this.#text, { headers: this.headers });
    return this.#materialized;
  }

  /** The text, while no code has asked for the body stream (then the stream is the truth). */
  untouchedText(): string | undefined {
    return this.#materialized === undefined ? this.#text : undefined;
  }

  override get body(): Response["body"] {
    return this.#withBody().body;
  }
  override get bodyUsed(): boolean {
    return this.#materialized?.bodyUsed ?? false;
  }
  override text(): Promise<string> {
    return this.#withBody().text();
  }
  override json(): Promise<unknown> {
    return this.#withBody().json();
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    return this.#withBody().arrayBuffer();
  }
  override blob(): Promise<Blob> {
    return this.#withBody().blob();
  }
  override formData(): Promise<FormData> {
    return this.#withBody().formData();
  }
  override bytes(): Promise<Uint8Array<ArrayBuffer>> {
    // `Response.prototype.bytes` exists from Node 22 (undici 6.x in Node 20 lacks it).
    const response = this.#withBody() as Response & { bytes?: () => Promise<Uint8Array<ArrayBuffer>> };
    if (typeof response.bytes === "function") return response.bytes();
    return response.arrayBuffer().then((buffer) => new Uint8Array(buffer));
  }
  override clone(): Response {
    // Fetch "clone": a read or locked body cannot be cloned.
    const body = this.#materialized?.body;
    if (this.bodyUsed || body?.locked) throw new TypeError("Response.clone: Body has already been consumed.");
    return new DeferredBodyResponse(this.#text, {
      status: this.status,
      statusText: this.statusText,
      headers: this.headers,
    });
  }
}

/** A `Response` with the complete text `body`, registered for {@link completeResponseBody}. */
export function completeResponse(body: string, init: ResponseInit = {}): Response {
  if (deferBodies && !NULL_BODY_STATUSES.has(init.status ?? 200)) return new DeferredBodyResponse(body, init);
  const response = new Response(body, init);
  COMPLETE_BODIES.set(response, body);
  return response;
}

/**
 * The text `response` was built with by {@link completeResponse}, while its body stream has not been
 * asked for (deferred), or not read or locked; `undefined` otherwise (then the body must be read from
 * the stream). Never makes a deferred body's stream.
 */
export function completeResponseBody(response: Response): string | undefined {
  if (response instanceof DeferredBodyResponse) return response.untouchedText();
  const body = COMPLETE_BODIES.get(response);
  if (body === undefined || response.bodyUsed || response.body?.locked !== false) return undefined;
  return body;
}

/** Headers every OAuth response carries: no caching of tokens or errors (RFC 6749 §5.1). */
export const NO_STORE: Readonly<Record<string, string>> = { "cache-control": "no-store", pragma: "no-cache" };

export function jsonResponse(body: unknown, init: { status?: number; headers?: HeadersInit } = {}): Response {
  const headers = new Headers(init.headers);
  headers.set("content-type", "application/json");
  return completeResponse(JSON.stringify(body), { status: init.status ?? 200, headers });
}

/** An RFC 6749 §5.2 error response: JSON body without the private detail, `no-store`. */
export function oauthErrorResponse(error: OAuthError, headers?: HeadersInit): Response {
  // The error's own headers first (a challenge, `Retry-After`), then the caller's.
  const h = new Headers(error.headers);
  for (const [k, v] of new Headers(headers)) h.set(k, v);
  for (const [k, v] of Object.entries(NO_STORE)) h.set(k, v);
  return jsonResponse(error.toJSON(), { status: error.status, headers: h });
}
