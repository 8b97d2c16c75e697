/**
 * An outbound HTTPS GET that is safe to point at a URL an attacker chose (server-side request
 * forgery guard). Used for Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document
 * §6 "Security Considerations": SSRF) and for anything nested in them (a JWKS URI).
 *
 * Guards, each checked in this order:
 * 1. the URL: `https:` only, no userinfo, no fragment, no dot segments (plain or percent-encoded),
 *    no backslashes, and a host spelled exactly as the WHATWG parser serialises it (so numeric
 *    spellings like `2130706433`, `0x7f.1` or `017700000001` are refused instead of reinterpreted);
 * 2. an IP-literal host in a special-use range is refused before any connection;
 * 3. DNS: a custom `lookup` refuses a name when ANY of its addresses is special-use;
 * 4. the connected socket: `remoteAddress` is classified again on `connect`, before any HTTP byte
 *    is sent, so a resolver that changed its mind (DNS rebinding) still cannot reach inside;
 * 5. the response: no redirects (3xx is an error), 2xx only, `Content-Encoding` identity only (the
 *    size cap is on the bytes we decode, so no compression), a media type from `accept`, a byte cap,
 *    and one deadline that covers queueing, DNS, connect, TLS, headers and body.
 *
 * Concurrency is limited per host and concurrent fetches of one URL share one request.
 *
 * Uses `node:https` directly: the global `fetch` cannot tell us which address it connected to.
 */

import { promises as dns, type LookupAddress } from "node:dns";
import https from "node:https";
import type { Socket } from "node:net";
import { isIP } from "node:net";
import { rootCertificates } from "node:tls";
import { GatehouseTypeError } from "./errors.js";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** Stable reasons a guarded fetch fails; callers branch on these, never on message text. */
export type GuardedFetchErrorCode =
  | "bad_url"
  | "blocked_address"
  | "dns"
  | "network"
  | "tls"
  | "timeout"
  | "aborted"
  | "redirect"
  | "http_status"
  | "content_type"
  | "content_encoding"
  | "too_large"
  | "bad_body";

/** A refused or failed guarded fetch. Never carries the response body. */
export class GuardedFetchError extends Error {
  readonly code: GuardedFetchErrorCode;
  /** HTTP status for `redirect` and `http_status`. */
  readonly status: number | undefined;
  constructor(
    code: GuardedFetchErrorCode,
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "GuardedFetchError";
    this.code = code;
    this.status = options.status;
  }
}

// ---------------------------------------------------------------------------------------------
// Address classification
// ---------------------------------------------------------------------------------------------

/**
 * Where an address points. `loopback` is separate from `special` only so the test-only opt-in can
 * allow it; both are refused by default.
 */
export type AddressClass = { kind: "public" } | { kind: "loopback" | "special"; range: string };

type V4Range = readonly [base: string, prefix: number, name: string, kind: "loopback" | "special"];

/** IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates), plus multicast and class E. */
const SPECIAL_V4: readonly V4Range[] = [
  ["0.0.0.0", 8, "this network 0.0.0.0/8", "special"],
  ["10.0.0.0", 8, "private 10.0.0.0/8", "special"],
  ["100.64.0.0", 10, "shared address space (CGNAT) 100.64.0.0/10", "special"],
  ["127.0.0.0", 8, "loopback 127.0.0.0/8", "loopback"],
  ["169.254.0.0", 16, "link-local 169.254.0.0/16", "special"],
  ["172.16.0.0", 12, "private 172.16.0.0/12", "special"],
  ["192.0.0.0", 24, "IETF protocol assignments 192.0.0.0/24", "special"],
  ["192.0.2.0", 24, "documentation 192.0.2.0/24", "special"],
  ["192.31.196.0", 24, "AS112 192.31.196.0/24", "special"],
  ["192.52.193.0", 24, "AMT 192.52.193.0/24", "special"],
  ["192.88.99.0", 24, "6to4 relay anycast 192.88.99.0/24", "special"],
  ["192.168.0.0", 16, "private 192.168.0.0/16", "special"],
  ["192.175.48.0", 24, "AS112 192.175.48.0/24", "special"],
  ["198.18.0.0", 15, "benchmarking 198.18.0.0/15", "special"],
  ["198.51.100.0", 24, "documentation 198.51.100.0/24", "special"],
  ["203.0.113.0", 24, "documentation 203.0.113.0/24", "special"],
  ["224.0.0.0", 4, "multicast 224.0.0.0/4", "special"],
  ["240.0.0.0", 4, "reserved and broadcast 240.0.0.0/4", "special"],
];

function parseIPv4(text: string): number | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    value = value * 256 + n;
  }
  return value;
}

const SPECIAL_V4_PARSED = SPECIAL_V4.map(([base, prefix, name, kind]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { network: (parseIPv4(base) ?? 0) & mask, mask, name, kind };
});

function classifyV4(value: number): AddressClass {
  for (const range of SPECIAL_V4_PARSED) {
    if ((value & range.mask) >>> 0 === range.network >>> 0) return { kind: range.kind, range: range.name };
  }
  return { kind: "public" };
}

/** Eight 16-bit groups, or undefined when `text` is not a plain IPv6 address (zones are refused). */
function parseIPv6(text: string): number[] | undefined {
  if (text.includes("%")) return undefined;
  let rest = text;
  // A dotted IPv4 tail (::ffff:127.0.0.1) becomes two hex groups before the groups are read.
  const lastColon = rest.lastIndexOf(":");
  if (lastColon >= 0 && rest.slice(lastColon + 1).includes(".")) {
    const v4 = parseIPv4(rest.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    rest = `${rest.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = rest.split("::");
  if (halves.length > 2) return undefined;
  const toGroups = (s: string): number[] | undefined => {
    if (s === "") return [];
    const groups: number[] = [];
    for (const g of s.split(":")) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      groups.push(Number.parseInt(g, 16));
    }
    return groups;
  };
  const head = toGroups(halves[0] ?? "");
  const back = halves.length === 2 ? toGroups(halves[1] ?? "") : [];
  if (!head || !back) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - back.length;
    if (missing < 1) return undefined;
    groups = [...head, ...new Array<number>(missing).fill(0), ...back];
  } else {
    groups = head;
  }
  return groups.length === 8 ? groups : undefined;
}

function v6Prefix(groups: number[], prefix: readonly number[], bits: number): boolean {
  for (let i = 0; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if (((groups[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function embeddedV4(groups: number[]): number {
  return ((groups[6] ?? 0) * 0x10000 + (groups[7] ?? 0)) >>> 0;
}

function classifyV6(groups: number[]): AddressClass {
  const allZeroUpTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (allZeroUpTo(8)) return { kind: "special", range: "unspecified ::/128" };
  if (allZeroUpTo(7) && groups[7] === 1) return { kind: "loopback", range: "loopback ::1/128" };
  // IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 reach the embedded IPv4 address: judge that.
  if (allZeroUpTo(5) && groups[5] === 0xffff) {
    const inner = classifyV4(embeddedV4(groups));
    return inner.kind === "public" ? inner : { kind: inner.kind, range: `IPv4-mapped ${inner.range}` };
  }
  if (v6Prefix(groups, [0x64, 0xff9b, 0, 0, 0, 0], 96)) {
    const inner = classifyV4(embeddedV4(groups));
    return inner.kind === "public" ? inner : { kind: inner.kind, range: `NAT64 ${inner.range}` };
  }
  const named: readonly [readonly number[], number, string][] = [
    [[0, 0, 0, 0, 0xffff, 0], 96, "IPv4-translated ::ffff:0:0:0/96"],
    [[0, 0, 0, 0, 0, 0], 96, "IPv4-compatible ::/96"],
    [[0x64, 0xff9b, 1], 48, "local-use NAT64 64:ff9b:1::/48"],
    [[0x100, 0, 0, 0], 64, "discard-only 100::/64"],
    [[0x2001, 0xdb8], 32, "documentation 2001:db8::/32"],
    [[0x2001, 0], 23, "IETF protocol assignments 2001::/23"],
    [[0x2002], 16, "6to4 2002::/16"],
    [[0x3fff, 0], 20, "documentation 3fff::/20"],
    [[0xfc00], 7, "unique local fc00::/7"],
    [[0xfe80], 10, "link-local fe80::/10"],
    [[0xfec0], 10, "site-local fec0::/10"],
    [[0xff00], 8, "multicast ff00::/8"],
  ];
  for (const [prefix, bits, name] of named) {
    if (v6Prefix(groups, prefix, bits)) return { kind: "special", range: name };
  }
  // Only global unicast 2000::/3 is routable on the internet; everything else is reserved.
  if (!v6Prefix(groups, [0x2000], 3)) return { kind: "special", range: "outside global unicast 2000::/3" };
  return { kind: "public" };
}

/**
 * Classifies an IP address (v4 dotted-decimal or v6, brackets allowed). Anything that does not
 * parse as a plain address is `special` (fail closed).
 */
export function classifyAddress(address: string): AddressClass {
  const text = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  const v4 = parseIPv4(text);
  if (v4 !== undefined) return classifyV4(v4);
  const v6 = text.includes(":") ? parseIPv6(text) : undefined;
  if (v6) return classifyV6(v6);
  return { kind: "special", range: "not a plain IP address" };
}

/** True when a connection to `address` is allowed under the given loopback opt-in. */
export function isAllowedAddress(address: string, allowLoopback: boolean): boolean {
  const c = classifyAddress(address);
  return c.kind === "public" || (allowLoopback && c.kind === "loopback");
}

// ---------------------------------------------------------------------------------------------
// URL checks
// ---------------------------------------------------------------------------------------------

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters make a URL unusable here
const CONTROL_OR_SPACE = /[\u0000-\u0020\u007f-\u009f]/;

/**
 * Why `raw` may not be fetched, or undefined. Pure string checks; the address checks come later.
 * The raw text is inspected as well as the parsed URL, because the WHATWG parser silently repairs
 * (and thereby hides) dot segments, numeric hosts and backslashes.
 */
export function fetchUrlProblem(raw: string): string | undefined {
  if (typeof raw !== "string" || raw.length === 0) return "URL must be a non-empty string";
  if (raw.length > 2048) return "URL is too long";
  if (CONTROL_OR_SPACE.test(raw)) return "URL must not contain whitespace or control characters";
  if (raw.includes("\\")) return "URL must not contain backslashes";
  const m = /^https:\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(raw);
  if (!m) return "URL must be an absolute https URL";
  const [, authority = "", path = "", , fragment] = m;
  if (fragment !== undefined) return "URL must not contain a fragment";
  if (authority.includes("@")) return "URL must not contain userinfo";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "URL is not valid";
  }
  if (url.protocol !== "https:") return "URL must use https";
  for (const segment of path.split("/")) {
    const decoded = segment.replace(/%2e/gi, ".");
    if (decoded === "." || decoded === "..") return "URL must not contain dot segments";
  }
  // The host must be written exactly as the parser serialises it (case aside): this refuses
  // numeric IPv4 spellings (2130706433, 0x7f.1, 0177.1, 127.1), percent-encoded and
  // non-canonical IPv6 hosts, and non-ASCII names (use the punycode form).
  const rawHost = authority.replace(/:\d*$/, "").toLowerCase();
  if (rawHost === "") return "URL must have a host";
  if (rawHost !== url.hostname) return "URL host must be written in canonical form";
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The fetch
// ---------------------------------------------------------------------------------------------

/** Resolves a host name to addresses (all of them). Injected in tests; defaults to `dns.lookup`. */
export type HostResolver = (hostname: string) => Promise<LookupAddress[]>;

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;
/** Node's `lookup` hook shape (net.connect), with and without `all`. */
export type LookupFunction = (
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: LookupCallback,
) => void;

export interface GuardedFetchOptions {
  /** Cap on the decoded body in bytes; larger bodies fail with `too_large`. */
  maxBytes: number;
  /** One deadline for queueing, DNS, connect, TLS, headers and body. */
  timeoutMs: number;
  /**
   * DANGEROUS, tests only: allow loopback destinations (never private or other special ranges) and
   * trust these extra CA certificates (PEM). Re-opens SSRF to this machine.
   */
  allowLoopback?: false | { ca?: string[] };
  /** Accepted media types, comma-separated (sent as `Accept`; the response must match one). */
  accept?: string;
  /** Stops waiting for the result (a coalesced request keeps running for the other callers). */
  signal?: AbortSignal;
}

export interface GuardedFetchResponse {
  status: number;
  headers: Headers;
  /** The body decoded as UTF-8 (invalid UTF-8 fails with `bad_body`). */
  body: string;
}

export type GuardedFetch = (url: string, options: GuardedFetchOptions) => Promise<GuardedFetchResponse>;

export interface GuardedFetchConfig {
  /** Simultaneous requests per host (host:port); more wait in line, inside their deadline. Default 4. */
  maxConcurrentPerHost?: number;
  /** DNS resolution; its answers are checked like any other (default: the system resolver). */
  resolveHost?: HostResolver;
  /**
   * Tests only: replaces the checked DNS lookup with a raw one, so the connect-time check on the
   * socket can be shown to stand on its own. That check still applies.
   */
  uncheckedLookupForTesting?: LookupFunction;
}

const defaultResolver: HostResolver = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/** A lookup that refuses the name when any address it resolves to is not allowed. */
function checkedLookup(resolve: HostResolver, allowLoopback: boolean): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (all) => {
        const family =
          options.family === 4 || options.family === "IPv4"
            ? 4
            : options.family === 6 || options.family === "IPv6"
              ? 6
              : 0;
        const addresses = family === 0 ? all : all.filter((a) => a.family === family);
        if (addresses.length === 0) {
          callback(Object.assign(new Error("host has no addresses"), { code: "ENOTFOUND" }), []);
          return;
        }
        // Any special-use answer refuses the whole name: a mixed answer is a rebinding tell.
        const blocked = addresses.find((a) => !isAllowedAddress(a.address, allowLoopback));
        if (blocked) {
          callback(
            new GuardedFetchError(
              "blocked_address",
              `host resolves to a refused address (${classDescription(blocked.address)})`,
            ),
            [],
          );
          return;
        }
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]?.address ?? "", addresses[0]?.family);
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, []),
    );
  };
}

function classDescription(address: string): string {
  const c = classifyAddress(address);
  return c.kind === "public" ? "public" : c.range;
}

/**
 * Destroys `socket` on connect when the peer address is not allowed (DNS rebinding defence: the
 * address that counts is the one actually connected, checked before the TLS handshake starts).
 */
export function guardSocket(socket: Socket, allowLoopback: boolean): void {
  const check = () => {
    const address = socket.remoteAddress;
    if (address === undefined || !isAllowedAddress(address, allowLoopback)) {
      socket.destroy(
        new GuardedFetchError(
          "blocked_address",
          `connected to a refused address (${address === undefined ? "unknown" : classDescription(address)})`,
        ),
      );
    }
  };
  if (!socket.connecting && socket.remoteAddress !== undefined) check();
  else socket.once("connect", check);
}

/** Media type of a Content-Type value, lowercased, without parameters. */
function mediaType(value: string | null | undefined): string {
  return (value ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

class HostLimiter {
  private readonly active = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();
  constructor(private readonly limit: number) {}

  async acquire(host: string, signal: AbortSignal): Promise<() => void> {
    if ((this.active.get(host) ?? 0) >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const queue = this.waiting.get(host) ?? [];
        const go = () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          const q = this.waiting.get(host);
          const at = q ? q.indexOf(go) : -1;
          if (q && at >= 0) q.splice(at, 1);
          reject(signal.reason);
        };
        queue.push(go);
        this.waiting.set(host, queue);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    } else {
      this.active.set(host, (this.active.get(host) ?? 0) + 1);
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.get(host)?.shift();
      if (next) {
        next(); // hand the slot over: the active count stays the same
      } else {
        const n = (this.active.get(host) ?? 1) - 1;
        if (n <= 0) this.active.delete(host);
        else this.active.set(host, n);
        this.waiting.delete(host);
      }
    };
  }
}

/**
 * Creates a guarded fetch with its own per-host limits and in-flight table. Most code uses the
 * shared {@link guardedFetch}.
 */
export function createGuardedFetch(config: GuardedFetchConfig = {}): GuardedFetch {
  const limiter = new HostLimiter(config.maxConcurrentPerHost ?? 4);
  const resolveHost = config.resolveHost ?? defaultResolver;
  const inFlight = new Map<string, Promise<GuardedFetchResponse>>();

  return (url, options) => {
    if (options.signal?.aborted) return Promise.reject(new GuardedFetchError("aborted", "fetch aborted"));
    const loopback = options.allowLoopback ? JSON.stringify(options.allowLoopback.ca ?? []) : "-";
    // Coalesce only identical requests: the same URL under different caps is another request.
    const key = JSON.stringify([url, options.maxBytes, options.timeoutMs, options.accept ?? "", loopback]);
    let shared = inFlight.get(key);
    if (!shared) {
      shared = fetchOnce(url, options, limiter, resolveHost, config.uncheckedLookupForTesting).finally(() =>
        inFlight.delete(key),
      );
      inFlight.set(key, shared);
    }
    return withCallerSignal(shared, options.signal);
  };
}

function withCallerSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new GuardedFetchError("aborted", "fetch aborted"));
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

function fetchOnce(
  rawUrl: string,
  options: GuardedFetchOptions,
  limiter: HostLimiter,
  resolveHost: HostResolver,
  uncheckedLookup: LookupFunction | undefined,
): Promise<GuardedFetchResponse> {
  const problem = fetchUrlProblem(rawUrl);
  const url = problem === undefined ? new URL(rawUrl) : undefined;
  // An IP-literal host is judged before its spelling, so 2130706433 reports as blocked_address.
  if (
    url &&
    isIP(url.hostname.replace(/^\[|\]$/g, "")) !== 0 &&
    !isAllowedAddress(url.hostname, !!options.allowLoopback)
  ) {
    return Promise.reject(
      new GuardedFetchError(
        "blocked_address",
        `URL host is a refused address (${classDescription(url.hostname)})`,
      ),
    );
  }
  if (!url) {
    const literal = literalHostOf(rawUrl);
    if (literal !== undefined && !isAllowedAddress(literal, !!options.allowLoopback)) {
      return Promise.reject(
        new GuardedFetchError(
          "blocked_address",
          `URL host is a refused address (${classDescription(literal)})`,
        ),
      );
    }
    return Promise.reject(new GuardedFetchError("bad_url", problem ?? "URL is not valid"));
  }
  if (!Number.isInteger(options.maxBytes) || options.maxBytes <= 0 || !(options.timeoutMs > 0)) {
    // API misuse, not a refused URL.
    return Promise.reject(
      new GatehouseTypeError("ERR_INVALID_OPTION", "guardedFetch: maxBytes and timeoutMs must be positive"),
    );
  }

  const allowLoopback = !!options.allowLoopback;
  const accept = options.accept ?? "application/json";
  const acceptedTypes = accept
    .split(",")
    .map((t) => mediaType(t))
    .filter((t) => t !== "");
  const deadline = new AbortController();

  return new Promise<GuardedFetchResponse>((resolve, reject) => {
    let settled = false;
    let release: (() => void) | undefined;
    let request: ReturnType<typeof https.request> | undefined;
    const timer = setTimeout(
      () => fail(new GuardedFetchError("timeout", `no complete response within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );

    function fail(error: GuardedFetchError): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      deadline.abort(error);
      request?.destroy();
      release?.();
      reject(error);
    }
    function succeed(value: GuardedFetchResponse): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      release?.();
      resolve(value);
    }

    limiter.acquire(url.host, deadline.signal).then(
      (releaseSlot) => {
        release = releaseSlot;
        if (settled) {
          releaseSlot();
          return;
        }
        start();
      },
      () => {
        /* the deadline fired while queued: fail() already ran */
      },
    );

    function start(): void {
      const extraCa = options.allowLoopback ? (options.allowLoopback.ca ?? []) : [];
      const req = https.request(url as URL, {
        method: "GET",
        agent: false, // no pooled sockets: every request is looked up and checked afresh
        lookup: uncheckedLookup ?? checkedLookup(resolveHost, allowLoopback),
        ca: extraCa.length > 0 ? [...rootCertificates, ...extraCa] : undefined,
        rejectUnauthorized: true,
        minVersion: "TLSv1.2",
        maxHeaderSize: 16384,
        headers: { accept, "accept-encoding": "identity", "user-agent": "gatehouse" },
      });
      request = req;
      req.on("socket", (socket) => guardSocket(socket, allowLoopback));
      req.on("error", (err) => fail(toGuardedError(err)));
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        const headers = new Headers();
        try {
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
          }
        } catch (cause) {
          // A header value Headers will not hold must fail this fetch, not throw out of the emitter.
          return fail(new GuardedFetchError("network", "response has malformed headers", { cause }));
        }
        // Spec CIMD / SECURITY.md: never follow redirects.
        if (status >= 300 && status < 400)
          return fail(new GuardedFetchError("redirect", `refused redirect (HTTP ${status})`, { status }));
        if (status < 200 || status >= 300)
          return fail(new GuardedFetchError("http_status", `unexpected HTTP ${status}`, { status }));
        const encoding = (headers.get("content-encoding") ?? "identity").trim().toLowerCase();
        if (encoding !== "identity" && encoding !== "")
          return fail(new GuardedFetchError("content_encoding", "response is content-encoded"));
        if (acceptedTypes.length > 0 && !acceptedTypes.includes(mediaType(headers.get("content-type")))) {
          return fail(
            new GuardedFetchError("content_type", `content type is not ${acceptedTypes.join(" or ")}`),
          );
        }
        const declared = Number(headers.get("content-length") ?? Number.NaN);
        if (Number.isFinite(declared) && declared > options.maxBytes) {
          return fail(
            new GuardedFetchError("too_large", `response is larger than ${options.maxBytes} bytes`),
          );
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > options.maxBytes) {
            fail(new GuardedFetchError("too_large", `response is larger than ${options.maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on("error", (err) => fail(toGuardedError(err)));
        res.on("aborted", () =>
          fail(new GuardedFetchError("network", "connection closed before the body ended")),
        );
        res.on("end", () => {
          if (!res.complete)
            return fail(new GuardedFetchError("network", "connection closed before the body ended"));
          let body: string;
          try {
            body = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
          } catch {
            return fail(new GuardedFetchError("bad_body", "response body is not UTF-8"));
          }
          succeed({ status, headers, body });
        });
      });
      req.end();
    }
  });
}

/** The IP literal a URL's raw authority names, when the URL itself is refused for other reasons. */
function literalHostOf(raw: string): string | undefined {
  const m = /^https:\/\/(?:[^/?#@]*@)?([^/?#]*)/i.exec(raw);
  if (!m) return undefined;
  try {
    const host = new URL(`https://${m[1] ?? ""}/`).hostname;
    return isIP(host.replace(/^\[|\]$/g, "")) !== 0 ? host : undefined;
  } catch {
    return undefined;
  }
}

function toGuardedError(err: unknown): GuardedFetchError {
  if (err instanceof GuardedFetchError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") {
    if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ENODATA")
      return new GuardedFetchError("dns", "host name did not resolve", { cause: err });
    if (
      /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED|ERR_OSSL)/.test(code) ||
      code.includes("CERT")
    ) {
      return new GuardedFetchError("tls", "TLS handshake failed", { cause: err });
    }
    if (code === "HPE_HEADER_OVERFLOW")
      return new GuardedFetchError("too_large", "response headers are too large", { cause: err });
  }
  return new GuardedFetchError("network", "connection failed", { cause: err });
}

/** The process-wide guarded fetch (one per-host limit and in-flight table for every caller). */
export const guardedFetch: GuardedFetch = createGuardedFetch();
