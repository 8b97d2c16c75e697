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

/** A `Response` with the complete text `body`, registered for {@link completeResponseBody}. */
export function completeResponse(body: string, init: ResponseInit = {}): Response {
  const response = new Response(body, init);
  COMPLETE_BODIES.set(response, body);
  return response;
}

/**
 * The text `response` was built with by {@link completeResponse}, while its body stream has not been
 * read or locked; `undefined` otherwise (then the body must be read from the stream).
 */
export function completeResponseBody(response: Response): string | undefined {
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
