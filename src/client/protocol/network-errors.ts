/**
 * What a transport failure means and what to do about it. `fetch` reports every network failure
 * as `TypeError: fetch failed`; the reason is a system or TLS error code somewhere down the
 * `cause` chain (or among an `AggregateError`'s `errors`, when several addresses were tried).
 * This module finds that code and turns it into one sentence that says what to do next.
 *
 * Nothing here reads a request or response body, so no token can end up in the text.
 */

/** The family of a transport failure; callers branch on this, never on the sentence. */
export type NetworkFailureKind =
  | "connection_refused"
  | "host_not_found"
  | "untrusted_certificate"
  | "expired_certificate"
  | "certificate_name_mismatch"
  | "not_tls"
  | "timeout"
  | "connection_reset"
  | "network_unreachable"
  | "blocked_port"
  | "invalid_url";

export interface NetworkFailure {
  kind: NetworkFailureKind;
  /** The system, TLS or undici code found in the cause chain (e.g. `ECONNREFUSED`). */
  code: string | undefined;
  /** One sentence naming the host and what to do next. */
  hint: string;
}

/** Codes OpenSSL uses when the chain does not end at a CA that Node trusts. */
const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_UNTRUSTED",
  "CERT_SIGNATURE_FAILURE",
  "INVALID_CA",
]);
const EXPIRED = new Set(["CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID"]);
const TIMEOUT = new Set([
  "ETIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ABORT_ERR",
]);

interface Found {
  code: string | undefined;
  timeout: boolean;
  badPort: boolean;
  address: string | undefined;
  port: number | undefined;
  hostname: string | undefined;
}

/** Walks `cause` links and `AggregateError.errors`, depth-first, at most a few levels deep. */
function walk(error: unknown, found: Found, depth: number, seen: Set<unknown>): void {
  if (depth > 8 || typeof error !== "object" || error === null || seen.has(error)) return;
  seen.add(error);
  const e = error as {
    code?: unknown;
    name?: unknown;
    message?: unknown;
    address?: unknown;
    port?: unknown;
    hostname?: unknown;
    errors?: unknown;
    cause?: unknown;
  };
  // The innermost code wins: `fetch failed` wraps the socket error that says what happened.
  if (typeof e.code === "string" && (found.code === undefined || depth > 0)) found.code = e.code;
  if (e.name === "TimeoutError") found.timeout = true;
  if (e.message === "bad port") found.badPort = true;
  if (typeof e.address === "string") found.address = e.address;
  if (typeof e.port === "number") found.port = e.port;
  if (typeof e.hostname === "string") found.hostname = e.hostname;
  if (Array.isArray(e.errors)) for (const inner of e.errors) walk(inner, found, depth + 1, seen);
  walk(e.cause, found, depth + 1, seen);
}

function parse(url: string | URL | undefined): URL | undefined {
  if (url === undefined) return undefined;
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/**
 * Explains a transport failure, or returns undefined when `error` is not one (an OAuth error, a
 * refusal, a bug). `url` is the URL that was being fetched, used to name the origin and host;
 * without it, the address from the socket error is used.
 */
export function explainNetworkError(error: unknown, url?: string | URL): NetworkFailure | undefined {
  const found: Found = {
    code: undefined,
    timeout: false,
    badPort: false,
    address: undefined,
    port: undefined,
    hostname: undefined,
  };
  walk(error, found, 0, new Set());
  const target = parse(url);
  const fromSocket = found.address
    ? `${found.address}${found.port !== undefined ? `:${found.port}` : ""}`
    : found.hostname;
  const origin = target?.origin ?? fromSocket ?? "the server";
  const host = target?.host ?? fromSocket ?? "the server";
  const code = found.code;

  if (code === "ECONNREFUSED") {
    return {
      kind: "connection_refused",
      code,
      hint: `nothing is listening at ${origin}: is the server running? (for the demo: npm start)`,
    };
  }
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME" || code === "EAI_FAIL") {
    return {
      kind: "host_not_found",
      code,
      hint: `cannot resolve ${target?.hostname ?? found.hostname ?? host}: check the URL${
        code === "EAI_AGAIN" ? " (or your DNS / network connection)" : ""
      }`,
    };
  }
  if (code !== undefined && UNTRUSTED.has(code)) {
    return {
      kind: "untrusted_certificate",
      code,
      hint: `the TLS certificate of ${host} is not trusted (${code}): set NODE_EXTRA_CA_CERTS=<ca.pem> for a private CA`,
    };
  }
  if (code !== undefined && EXPIRED.has(code)) {
    return {
      kind: "expired_certificate",
      code,
      hint: `the TLS certificate of ${host} is not trusted: it ${
        code === "CERT_HAS_EXPIRED" ? "has expired" : "is not valid yet"
      } (check the server's certificate, or this machine's clock)`,
    };
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return {
      kind: "certificate_name_mismatch",
      code,
      hint: `the TLS certificate of ${host} is not trusted: it does not name ${
        target?.hostname ?? host
      } (use the host name the certificate was issued for)`,
    };
  }
  if (
    code === "ERR_SSL_WRONG_VERSION_NUMBER" ||
    code === "EPROTO" ||
    code === "ERR_SSL_PACKET_LENGTH_TOO_LONG"
  ) {
    return {
      kind: "not_tls",
      code,
      hint: `${host} did not answer with TLS: if the server speaks plain HTTP, use http:// (allowed on loopback only)`,
    };
  }
  if (found.timeout || (code !== undefined && TIMEOUT.has(code))) {
    return {
      kind: "timeout",
      code,
      hint: `${origin} did not answer in time: check that the server is up and reachable, then try again`,
    };
  }
  if (code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET") {
    return {
      kind: "connection_reset",
      code,
      hint: `${origin} closed the connection: is it the right port and protocol? Try again, or check the server's log`,
    };
  }
  if (code === "ENETUNREACH" || code === "EHOSTUNREACH" || code === "EADDRNOTAVAIL") {
    return {
      kind: "network_unreachable",
      code,
      hint: `no route to ${host}: check your network connection and the URL`,
    };
  }
  if (found.badPort) {
    return {
      kind: "blocked_port",
      code,
      hint: `fetch refuses port ${target?.port || "of this URL"} (a "bad port" in the Fetch standard): run the server on another port`,
    };
  }
  if (code === "ERR_INVALID_URL") {
    return { kind: "invalid_url", code, hint: "not a valid absolute URL: include the scheme, e.g. https://" };
  }
  return undefined;
}
