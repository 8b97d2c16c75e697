/**
 * node:http adapter, the request head: the URL's scheme and authority (`Host`, or `X-Forwarded-*`
 * with `trustProxy`), the trusted proxy hop count, the client address and the declared
 * `Content-Length`, read from an `IncomingMessage` before any web `Request` exists. Split out of
 * node-listener.ts (which re-exports what the other adapters share) to keep that file to the listener.
 */
import type { IncomingMessage } from "node:http";
import { isIP, isIPv4, isIPv6 } from "node:net";
import type { TLSSocket } from "node:tls";
import { GatehouseTypeError } from "../shared/errors.js";

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
export function requestClientAddress(req: IncomingMessage, hops: number): string | undefined {
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
export function declaredLength(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 14 && name.toLowerCase() === "content-length") return raw[i + 1];
  }
  return undefined;
}
