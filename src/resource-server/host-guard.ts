/**
 * DNS-rebinding defence for the gate: the one decision on whether a request's `Host` (and `Origin`,
 * when it has one) may reach this resource at all.
 *
 * A page on `http://evil.example:3000` whose name is re-pointed at 127.0.0.1 can send requests to a
 * local server as "same origin"; the browser still writes `Host: evil.example:3000`. The MCP
 * transport specification's defence for local servers is to validate `Host` and `Origin` against
 * an allow-list. Bearer tokens are not ambient credentials, so this is defence in depth: it keeps a
 * rebinding page from even learning what the resource answers (challenges, metadata locations).
 */
import { GatehouseTypeError } from "../shared/errors.js";
import { isLoopbackHost } from "../shared/resource-uri.js";
import type { BearerRequestHead } from "./bearer-token.js";
import { HostNotAllowedError } from "./errors.js";

export interface HostGuardOptions {
  /**
   * `host[:port]` values a request's `Host` may have, compared case-insensitively. `false` turns the
   * check off. Default: for a loopback resource (localhost, 127.0.0.0/8, [::1]) the resource's own
   * host and `localhost`, `127.0.0.1`, `[::1]` on the resource's port; otherwise no check.
   */
  allowedHosts?: readonly string[] | false;
  /**
   * Origins (`scheme://host[:port]`, or `null`) a request carrying an `Origin` header may have;
   * requests without `Origin` are not affected. `false` turns the check off. Default: the allowed
   * hosts on the resource's scheme, whenever the Host check is on; otherwise no check.
   */
  allowedOrigins?: readonly string[] | false;
}

/** Throws {@link HostNotAllowedError} for a request that must not reach the resource. */
export type HostGuard = (head: BearerRequestHead) => void;

const DEFAULT_PORTS: Readonly<Record<string, string>> = { "http:": "80", "https:": "443" };
/** The loopback names a local client may use for the same server (spec: "localhost" redirects). */
const LOOPBACK_ALIASES = ["localhost", "127.0.0.1", "[::1]"];
// RFC 9110 §7.2 / RFC 3986 §3.2.2: uri-host [ ":" port ], with an IP literal in brackets.
const HOST = /^(?:\[[0-9a-f:.]+\]|[a-z0-9\-._~%]+)(?::\d{1,5})?$/i;
// RFC 6454 §6.2: scheme "://" host [ ":" port ], no path; or the opaque origin "null".
const ORIGIN = /^[a-z][a-z0-9+.-]*:\/\/(?:\[[0-9a-f:.]+\]|[a-z0-9\-._~%]+)(?::\d{1,5})?$/i;

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

function checkedList(value: unknown, name: string, pattern: RegExp, example: string): string[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw invalidOption(`${name} must be a non-empty array of strings, or false`);
  }
  return value.map((entry) => {
    if (
      typeof entry !== "string" ||
      !(pattern.test(entry) || (name === "allowedOrigins" && entry === "null"))
    ) {
      throw invalidOption(`${name} entries must look like ${example}`);
    }
    return entry.toLowerCase();
  });
}

/** `host` and the other spelling of the same authority on the scheme's default port, if any. */
function withDefaultPortSpellings(hosts: Iterable<string>, defaultPort: string | undefined): Set<string> {
  const out = new Set<string>();
  for (const host of hosts) {
    out.add(host);
    if (defaultPort === undefined) continue;
    // A web `Request` URL drops the default port, a raw Host header may carry it: accept both.
    const bare = host.endsWith(`:${defaultPort}`) ? host.slice(0, -defaultPort.length - 1) : undefined;
    if (bare !== undefined) out.add(bare);
    else if (!/:\d+$/.test(host)) out.add(`${host}:${defaultPort}`);
  }
  return out;
}

/**
 * Builds the guard for `resource` (a canonical resource URI), or `undefined` when neither `Host`
 * nor `Origin` is checked, so the gate pays nothing. Options are validated now.
 */
export function hostGuard(resource: string, options: HostGuardOptions): HostGuard | undefined {
  const url = new URL(resource);
  const scheme = url.protocol;
  const defaultPort = DEFAULT_PORTS[scheme];
  const port = url.port || defaultPort;
  const { allowedHosts, allowedOrigins } = options;
  if (allowedHosts !== undefined && allowedHosts !== false && !Array.isArray(allowedHosts)) {
    throw invalidOption("allowedHosts must be a non-empty array of strings, or false");
  }
  if (allowedOrigins !== undefined && allowedOrigins !== false && !Array.isArray(allowedOrigins)) {
    throw invalidOption("allowedOrigins must be a non-empty array of strings, or false");
  }

  let hostList: string[] | undefined;
  if (Array.isArray(allowedHosts)) {
    hostList = checkedList(allowedHosts, "allowedHosts", HOST, '"localhost:3000" or "api.example.com"');
  } else if (allowedHosts === undefined && isLoopbackHost(url.hostname)) {
    const names = new Set([url.hostname, ...LOOPBACK_ALIASES]);
    hostList = [...names].map((name) => (port === undefined ? name : `${name}:${port}`));
  }
  const hosts = hostList && withDefaultPortSpellings(hostList, defaultPort);

  let origins: Set<string> | undefined;
  if (Array.isArray(allowedOrigins)) {
    origins = new Set(checkedList(allowedOrigins, "allowedOrigins", ORIGIN, '"http://localhost:3000"'));
  } else if (allowedOrigins === undefined && hostList !== undefined) {
    // RFC 6454 §6.2: a serialised origin omits the scheme's default port.
    origins = new Set(
      hostList.map((host) => {
        const bare =
          defaultPort !== undefined && host.endsWith(`:${defaultPort}`)
            ? host.slice(0, -defaultPort.length - 1)
            : host;
        return `${scheme}//${bare}`;
      }),
    );
  }

  if (hosts === undefined && origins === undefined) return undefined;
  // The last value found allowed, exactly as sent: the same spelling again is allowed again (the
  // lists never change), so a run of requests from one client compares one short string instead
  // of hashing a fresh one into the set. Only allowed values are ever remembered.
  let allowedHost: string | undefined;
  let allowedOrigin: string | undefined;
  return (head) => {
    if (hosts !== undefined) {
      const host = head.host ?? head.header("host");
      if (host !== allowedHost) {
        // The raw value first: a well-behaved client sends exactly an allowed spelling.
        if (host === null || !(hosts.has(host) || hosts.has(host.toLowerCase()))) {
          throw new HostNotAllowedError("host", host);
        }
        allowedHost = host;
      }
    }
    if (origins !== undefined) {
      const origin = head.header("origin");
      if (origin !== null && origin !== allowedOrigin) {
        if (!(origins.has(origin) || origins.has(origin.toLowerCase()))) {
          throw new HostNotAllowedError("origin", origin);
        }
        allowedOrigin = origin;
      }
    }
  };
}
