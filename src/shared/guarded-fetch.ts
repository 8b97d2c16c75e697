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
 *    steps 2-4 ask one function, `isAllowedAddress`, under one {@link AddressPolicy} per request
 *    (public only, unless the caller opts in to loopback for tests or to the private ranges for a
 *    destination an operator configured);
 * 5. the response: no redirects (3xx is an error), 2xx only, `Content-Encoding` identity only (the
 *    size cap is on the bytes we decode, so no compression), a media type from `accept`, a byte cap,
 *    and one deadline that covers queueing, DNS, connect, TLS, headers and body.
 *
 * Concurrency is limited per host and concurrent fetches of one URL share one request.
 *
 * Uses `node:https` directly: the global `fetch` cannot tell us which address it connected to.
 *
 * The address classifier lives in `ip-address.ts`, the URL checks in `guarded-fetch-url.ts` and the
 * per-host limiter in `guarded-fetch-limiter.ts`; the first two are re-exported here.
 */

import { promises as dns, type LookupAddress } from "node:dns";
import https from "node:https";
import type { Socket } from "node:net";
import { isIP } from "node:net";
import { rootCertificates } from "node:tls";
import { GatehouseError, GatehouseTypeError, type GuardedFetchErrorCode } from "./errors.js";
import { HostLimiter } from "./guarded-fetch-limiter.js";
import { fetchUrlProblem, literalHostOf } from "./guarded-fetch-url.js";
import { type AddressPolicy, classDescription, isAllowedAddress } from "./ip-address.js";
import { mediaType } from "./media-type.js";
import { SingleFlight } from "./single-flight.js";

export { fetchUrlProblem } from "./guarded-fetch-url.js";
export { type AddressPolicy, classifyAddress, isAllowedAddress } from "./ip-address.js";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** Stable reasons a guarded fetch fails; callers branch on these, never on message text. */
export type { GuardedFetchErrorCode };

/** A refused or failed guarded fetch. Never carries the response body. */
export class GuardedFetchError extends GatehouseError<GuardedFetchErrorCode> {
  /** HTTP status for `redirect` and `http_status`. */
  readonly status: number | undefined;
  constructor(
    code: GuardedFetchErrorCode,
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(code, message, { cause: options.cause });
    this.name = "GuardedFetchError";
    this.status = options.status;
  }
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

/** Where a request may connect and which certificate authorities it trusts. */
export interface FetchDestinationOptions {
  /**
   * DANGEROUS, tests only: allow loopback destinations (never private or other special ranges) and
   * trust these extra CA certificates (PEM, as `ca`). Re-opens SSRF to this machine.
   */
  allowLoopback?: false | { ca?: string[] };
  /**
   * Allow the private ranges (RFC 1918, fc00::/7) too. Only for a destination an operator
   * configured (an identity provider on their own network), never for a URL from a request:
   * link-local (169.254.169.254), unspecified, multicast and loopback stay refused.
   */
  allowPrivateNetwork?: boolean;
  /** CA certificates (PEM) trusted in addition to the system roots (an operator's private CA). */
  ca?: string[];
}

export interface GuardedFetchOptions extends FetchDestinationOptions {
  /** Cap on the decoded body in bytes; larger bodies fail with `too_large`. */
  maxBytes: number;
  /** One deadline for queueing, DNS, connect, TLS, headers and body. */
  timeoutMs: number;
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

/** The address policy of a request's destination options (public only unless opted in). */
function addressPolicy(destination: FetchDestinationOptions): AddressPolicy {
  return { loopback: !!destination.allowLoopback, privateNetwork: destination.allowPrivateNetwork === true };
}

/** The extra CAs a request trusts: `ca` and the tests-only loopback opt-in's. */
function extraCas(destination: FetchDestinationOptions): string[] {
  return [
    ...(destination.ca ?? []),
    ...(destination.allowLoopback ? (destination.allowLoopback.ca ?? []) : []),
  ];
}

/**
 * The connection half of a guarded request, shared by the guarded GET and the upstream provider
 * requests (src/authorization-server/upstream/http.ts): the checked DNS lookup and TLS settings for
 * `https.request`, and the policy to pass to {@link guardSocket} on the request's socket.
 */
export function guardedConnection(
  destination: FetchDestinationOptions,
  resolveHost: HostResolver = defaultResolver,
): {
  policy: AddressPolicy;
  requestOptions: Pick<
    https.RequestOptions,
    "agent" | "lookup" | "ca" | "rejectUnauthorized" | "minVersion" | "maxHeaderSize"
  >;
} {
  const policy = addressPolicy(destination);
  const ca = extraCas(destination);
  return {
    policy,
    requestOptions: {
      agent: false, // no pooled sockets: every request is looked up and checked afresh
      lookup: checkedLookup(resolveHost, policy),
      ca: ca.length > 0 ? [...rootCertificates, ...ca] : undefined,
      rejectUnauthorized: true,
      minVersion: "TLSv1.2",
      maxHeaderSize: 16384,
    },
  };
}

/**
 * The refusal of a URL whose host is an IP literal the policy does not allow (judged before its
 * spelling, so `https://2130706433/` reports as blocked_address), before any socket exists: Node
 * does not consult `lookup` for a literal, and even a TCP handshake to 169.254.169.254 is too much.
 */
export function refusedLiteralHost(rawUrl: string, policy: AddressPolicy): GuardedFetchError | undefined {
  let literal: string | undefined;
  if (fetchUrlProblem(rawUrl) === undefined) {
    const host = new URL(rawUrl).hostname;
    if (isIP(host.replace(/^\[|\]$/g, "")) !== 0) literal = host;
  } else {
    literal = literalHostOf(rawUrl);
  }
  if (literal === undefined || isAllowedAddress(literal, policy)) return undefined;
  return new GuardedFetchError(
    "blocked_address",
    `URL host is a refused address (${classDescription(literal)})`,
  );
}

/** A lookup that refuses the name when any address it resolves to is not allowed. */
function checkedLookup(resolve: HostResolver, policy: AddressPolicy): LookupFunction {
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
        const blocked = addresses.find((a) => !isAllowedAddress(a.address, policy));
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

/**
 * Destroys `socket` on connect when the peer address is not allowed (DNS rebinding defence: the
 * address that counts is the one actually connected, checked before the TLS handshake starts).
 */
export function guardSocket(socket: Socket, policy: AddressPolicy): void {
  const check = () => {
    const address = socket.remoteAddress;
    if (address === undefined || !isAllowedAddress(address, policy)) {
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

/**
 * Creates a guarded fetch with its own per-host limits and in-flight table. Most code uses the
 * shared {@link guardedFetch}.
 */
export function createGuardedFetch(config: GuardedFetchConfig = {}): GuardedFetch {
  const limiter = new HostLimiter(config.maxConcurrentPerHost ?? 4);
  const resolveHost = config.resolveHost ?? defaultResolver;
  const inFlight = new SingleFlight<GuardedFetchResponse>();

  return (url, options) => {
    if (options.signal?.aborted) return Promise.reject(new GuardedFetchError("aborted", "fetch aborted"));
    // Coalesce only identical requests: the same URL under different caps, another address policy
    // or other trusted CAs is another request (one must never receive what only the other may reach).
    const policy = addressPolicy(options);
    const key = JSON.stringify([
      url,
      options.maxBytes,
      options.timeoutMs,
      options.accept ?? "",
      policy.loopback,
      policy.privateNetwork,
      extraCas(options),
    ]);
    const shared = inFlight.run(key, () =>
      fetchOnce(url, options, limiter, resolveHost, config.uncheckedLookupForTesting),
    );
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
  const connection = guardedConnection(options, resolveHost);
  const policy = connection.policy;
  const refused = refusedLiteralHost(rawUrl, policy);
  if (refused) return Promise.reject(refused);
  const problem = fetchUrlProblem(rawUrl);
  if (problem !== undefined) return Promise.reject(new GuardedFetchError("bad_url", problem));
  const url = new URL(rawUrl);
  if (!Number.isInteger(options.maxBytes) || options.maxBytes <= 0 || !(options.timeoutMs > 0)) {
    // API misuse, not a refused URL.
    return Promise.reject(
      new GatehouseTypeError("ERR_INVALID_OPTION", "guardedFetch: maxBytes and timeoutMs must be positive"),
    );
  }

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
      const req = https.request(url as URL, {
        ...connection.requestOptions,
        ...(uncheckedLookup ? { lookup: uncheckedLookup } : {}),
        method: "GET",
        headers: { accept, "accept-encoding": "identity", "user-agent": "gatehouse" },
      });
      request = req;
      req.on("socket", (socket) => guardSocket(socket, policy));
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
