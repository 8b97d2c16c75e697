/**
 * Extracting the bearer token from a request (RFC 6750 §2, spec "Access token usage"), or the
 * DPoP-bound token of the `DPoP` scheme (RFC 9449 §7.1) where the resource accepts it.
 *
 * The rules are written once, against {@link BearerRequestHead}: the few parts of a request they
 * read. A web `Request` is one such head ({@link headOfRequest}); the node:http adapter gives the
 * gate a head read straight from `IncomingMessage`, so a protected route does not pay for building
 * a web `Request`.
 */

import { mediaType } from "../shared/media-type.js";
import { invalidRequest } from "./errors.js";

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const NOT_B64_OR_PAD = /[^A-Za-z0-9\-._~+/=]/;
// RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
const SCHEME = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)(?: +(.*))?$/s;

const FORM = "application/x-www-form-urlencoded";
/** Only used to parse an origin-form request target; the host never matters. */
const TARGET_BASE = "http://target.invalid";

/**
 * The parts of a request the token rules read. Adapters that do not hold a web `Request` build one
 * from their own request object.
 */
export interface BearerRequestHead {
  /**
   * The absolute URL or the origin-form request target (`/path?query`); the token rules read only
   * the query. DPoP's `htu` is compared with {@link requestUrl} when given, else with this.
   */
  readonly url: string;
  /**
   * The request method: DPoP's `htm` must equal it (RFC 9449 §4.3); a `GET` or `HEAD` request is
   * never looked at for a form body (RFC 6750 §2.2).
   */
  readonly method?: string;
  /**
   * The absolute request URL as this server answers at it: scheme and authority as the adapter
   * resolved them (after trusted proxies), then the request target. Read only for a DPoP request,
   * whose proof's `htu` must name it (RFC 9449 §4.3 point 9). Omitted when `url` is absolute.
   */
  requestUrl?(): string;
  /**
   * The request's authority (`host[:port]`) as the adapter resolved it: the `Host` header, or the
   * forwarded host when it trusts a proxy. When absent, the `Host` header is used. Read only when
   * the resource checks hosts (DNS-rebinding defence, host-guard.ts).
   */
  readonly host?: string;
  /**
   * A header field value by lowercase name, `null` when absent. Several fields of one name are
   * joined with ", " (as `Headers.get` does), so two `Authorization` fields are malformed.
   */
  header(name: string): string | null;
  /** True when the request carries content (a body, possibly empty once read). */
  readonly hasBody: boolean;
  /**
   * The body as text. Called only for a urlencoded body (the one place a token could hide); it
   * must leave the body readable in full for the application.
   */
  bodyText(): Promise<string>;
}

/**
 * A web `Request` seen as a {@link BearerRequestHead} (its body is read through a clone). A class,
 * so the getters live on its prototype: an object literal with getters costs an allocation per
 * accessor on every request.
 */
class WebRequestHead implements BearerRequestHead {
  readonly url: string;
  constructor(private readonly request: Request) {
    this.url = request.url;
  }
  /** The URL's authority, which the adapter built from Host (or a trusted X-Forwarded-Host). */
  get host(): string | undefined {
    return authorityOf(this.url);
  }
  get method(): string {
    return this.request.method;
  }
  header(name: string): string | null {
    return this.request.headers.get(name);
  }
  /**
   * Read only when needed (a urlencoded Content-Type): some hosts build the body, or the whole
   * request, on first access (@hono/node-server materialises a full `Request` for it).
   */
  get hasBody(): boolean {
    return this.request.body !== null;
  }
  /** A clone tees the body, so the handler still reads it in full. */
  bodyText(): Promise<string> {
    return this.request.clone().text();
  }
}

/** A web `Request` seen as a {@link BearerRequestHead}. */
export function headOfRequest(request: Request): BearerRequestHead {
  return new WebRequestHead(request);
}

/** `host[:port]` of an absolute URL as WHATWG serialises it (`scheme://authority/path`). */
export function authorityOf(url: string): string | undefined {
  const start = url.indexOf("//");
  if (start < 0) return undefined;
  const end = url.indexOf("/", start + 2);
  return url.slice(start + 2, end < 0 ? undefined : end);
}

/** A token sent with the `DPoP` authentication scheme (RFC 9449 §7.1): it needs a proof. */
export class DPoPCredentials {
  constructor(readonly token: string) {}
}

/**
 * The bearer token of a request (RFC 6750 §2), `undefined` when it carries no credentials or
 * credentials of another scheme (RFC 6750 §3.1: no error code then). With `acceptDPoP`, a token
 * of the `DPoP` scheme comes back as {@link DPoPCredentials}; without, that scheme is "another".
 *
 * Throws `invalid_request` (400) for a malformed `Authorization` header, and for a token in the
 * query string or a form body: the spec forbids the query (MUST NOT) and Gatehouse supports the
 * header method only (`bearer_methods_supported: ["header"]`); such a token is never validated.
 *
 * Synchronous unless a urlencoded body has to be read (then a promise, which rejects instead of
 * throwing), so a request without a form body is judged without waiting.
 *
 * `verifiedBefore(token)` may answer true for a string the verifier already accepted (a cache hit,
 * `cachedVerifier`, which only remembers b64tokens): its syntax was checked when it was first
 * presented, so the scan is skipped for it. Any other string is checked as always.
 */
export function extractBearerToken(
  head: BearerRequestHead,
  acceptDPoP = false,
  verifiedBefore?: (token: string) => boolean,
): Credentials | Promise<Credentials> {
  const token = headerToken(head, acceptDPoP, verifiedBefore);
  if (!mayCarryFormToken(head)) return token;
  return head.bodyText().then((body) => {
    // RFC 6750 §2.2 method, not offered by this resource: refused, never validated.
    if (formHasToken(body)) {
      throw invalidRequest("Access tokens are not accepted in the request body", "token in form body");
    }
    return token;
  });
}

/** A bearer token, a DPoP-scheme token, or none. */
type Credentials = string | DPoPCredentials | undefined;

/** The query-string refusal and the `Authorization` header: the rules that need no body. */
function headerToken(
  head: BearerRequestHead,
  acceptDPoP: boolean,
  verifiedBefore: ((token: string) => boolean) | undefined,
): Credentials {
  // Spec, Access token usage: a token MUST NOT be in the query string (RFC 6750 §2.3 refused).
  if (queryMayHaveToken(head.url) && new URL(head.url, TARGET_BASE).searchParams.has("access_token")) {
    throw invalidRequest("Access tokens are not accepted in the query string", "token in query");
  }
  const header = head.header("authorization");
  if (header === null) return undefined;
  // Fast path for the common, well-formed case: "Bearer " + b64token.
  if (header.startsWith("Bearer ")) {
    const token = header.slice(7);
    if (verifiedBefore?.(token) || isB64Token(token)) return token;
  }
  const match = SCHEME.exec(header.trim());
  if (!match) throw invalidRequest("Malformed Authorization header", "authorization header syntax");
  // RFC 9110 §11.1: the scheme name is case-insensitive.
  const scheme = match[1]!.toLowerCase();
  const dpop = acceptDPoP && scheme === "dpop";
  if (scheme !== "bearer" && !dpop) return undefined;
  const token = match[2];
  // Several Authorization headers are folded with ", " and fail here. RFC 9449 §7.1: the DPoP
  // scheme's token has the same token68 syntax as Bearer's.
  if (token === undefined || !B64TOKEN.test(token)) {
    throw invalidRequest("Malformed Authorization header", "bearer credentials syntax");
  }
  return dpop ? new DPoPCredentials(token) : token;
}

/**
 * Cheap pre-test so the URL is only parsed when its query could name `access_token`: literally, or
 * percent-encoded (`acc%65ss_token` decodes to the same name).
 */
function queryMayHaveToken(url: string): boolean {
  const q = url.indexOf("?");
  if (q < 0) return false;
  return url.includes("access_token", q) || url.includes("%", q);
}

/**
 * RFC 6750 §2.1 b64token: one or more of the b64 characters, then only `=`. A search for a
 * character outside the set is cheaper than the anchored pattern on a few hundred characters
 * (this runs on every protected request whose token is not in the cache; shared with cache.ts,
 * which remembers only such tokens).
 */
export function isB64Token(value: string): boolean {
  if (value.length === 0 || NOT_B64_OR_PAD.test(value)) return false;
  const pad = value.indexOf("=");
  if (pad < 0) return true;
  if (pad === 0) return false;
  for (let i = pad + 1; i < value.length; i++) if (value.charCodeAt(i) !== 61) return false;
  return true;
}

/** True when the request has a urlencoded body, which must be checked for `access_token`. */
function mayCarryFormToken(head: BearerRequestHead): boolean {
  // RFC 6750 §2.2: the form-encoded body parameter method MUST NOT be used with GET (nor has HEAD
  // body semantics), so such a request carries no form token: no header read for it (a web
  // Request cannot even have a body there; the node and Express heads never had one).
  const method = head.method;
  if (method === "GET" || method === "HEAD") return false;
  // Content-Type next: it is a header read, `hasBody` may be costly (see headOfRequest).
  return mediaType(head.header("content-type")) === FORM && head.hasBody;
}

/** True when a urlencoded form body has an `access_token` parameter (RFC 6750 §2.2). */
function formHasToken(body: string): boolean {
  // No substring shortcut: the name may be percent-encoded in the body.
  return new URLSearchParams(body).has("access_token");
}
