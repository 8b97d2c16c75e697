/**
 * JSON and OAuth error responses (RFC 6749 §5.1, §5.2), never cached.
 */
import type { OAuthError } from "./errors.js";

/** Headers every OAuth response carries: no caching of tokens or errors (RFC 6749 §5.1). */
export const NO_STORE: Readonly<Record<string, string>> = { "cache-control": "no-store", pragma: "no-cache" };

export function jsonResponse(body: unknown, init: { status?: number; headers?: HeadersInit } = {}): Response {
  const headers = new Headers(init.headers);
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(body), { status: init.status ?? 200, headers });
}

/** An RFC 6749 §5.2 error response: JSON body without the private detail, `no-store`. */
export function oauthErrorResponse(error: OAuthError, headers?: HeadersInit): Response {
  // The error's own headers first (a challenge, `Retry-After`), then the caller's.
  const h = new Headers(error.headers);
  for (const [k, v] of new Headers(headers)) h.set(k, v);
  for (const [k, v] of Object.entries(NO_STORE)) h.set(k, v);
  return jsonResponse(error.toJSON(), { status: error.status, headers: h });
}
