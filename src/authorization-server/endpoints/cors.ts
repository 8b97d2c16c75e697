/**
 * CORS for the endpoints a browser-based client calls directly (metadata, JWKS, token,
 * registration, revocation). Any origin, never credentials: these endpoints authenticate clients by
 * what is in the request, never by cookies, so a wildcard origin exposes nothing.
 */
export function withCors(response: Response): Response {
  try {
    // The endpoints' own responses have mutable headers: set in place, no second Response.
    setCorsHeaders(response.headers);
    return response;
  } catch {
    // Immutable headers (a Response from fetch): a copy carries them.
    const headers = new Headers(response.headers);
    setCorsHeaders(headers);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }
}

function setCorsHeaders(headers: Headers): void {
  headers.set("access-control-allow-origin", "*");
  // RFC 9449 §8: a browser-based client reads the server's nonce only when it is exposed.
  headers.set("access-control-expose-headers", "www-authenticate, retry-after, dpop-nonce");
}

/** Answers a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`). */
export function preflightResponse(allowed: readonly string[]): Response {
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": [...allowed, "OPTIONS"].join(", "),
      // `dpop`: the proof header of DPoP token requests (RFC 9449 §4.1).
      "access-control-allow-headers": "authorization, content-type, mcp-protocol-version, dpop",
      "access-control-max-age": "600",
      allow: [...allowed, "OPTIONS"].join(", "),
    },
  });
}
