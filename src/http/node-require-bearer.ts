/**
 * node:http adapter, bearer gate half: {@link nodeRequireBearer} protects a node-style handler
 * with the resource server's judgement (`ResourceServer.judge`) on a request head read straight
 * from `IncomingMessage` (and, for a urlencoded form, its body), without building a web
 * `Request`/`Response` (RFC 6750 §2). Public through `node.ts` (the `gatehouse/node` entry point).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { BearerRequestHead } from "../resource-server/bearer-token.js";
import type { ChallengeParts } from "../resource-server/challenge.js";
import { invalidRequest } from "../resource-server/errors.js";
import type { BearerVerdict, RequiredScopes, ResourceServer } from "../resource-server/resource-server.js";
import type { AuthInfo } from "../resource-server/types.js";
import { GatehouseError } from "../shared/errors.js";
import {
  DEFAULT_MAX_BODY,
  logHandlerError,
  plainResponse,
  proxyHops,
  requestHost,
  requestScheme,
  webRequestHead,
} from "./node-listener.js";

export interface NodeRequireBearerOptions {
  scopes?: RequiredScopes;
  /**
   * Trusted proxy hops in front of this server, as for `toNodeListener` (`true` = 1): the host the
   * gate checks and the request URL then come from `X-Forwarded-Host`/`-Proto`.
   */
  trustProxy?: boolean | number;
  /**
   * Largest urlencoded form body read to look for a token in it, in bytes (default 1 MiB); a
   * larger one is answered 413 before `handler` runs. Other bodies are never read by the gate.
   */
  maxBodyBytes?: number;
  /**
   * Called with any error `handler` throws or rejects with (the client then gets a bare 500, or a
   * cut connection once the status was sent), as `toNodeListener`'s `onError`, whose default (one
   * `handler_error` line on stderr naming the error's class) it shares.
   */
  onError?: (error: unknown) => void;
}

const GET_OR_HEAD = new Set(["GET", "HEAD"]);

/**
 * A header of `req` read from `rawHeaders` without building `req.headers`: lowercase `name`,
 * several fields joined with ", " as `Headers.get` does (so two `Authorization` fields stay
 * detectable as malformed, which `req.headers` would hide by keeping the first).
 */
function rawHeader(req: IncomingMessage, name: string): string | null {
  const raw = req.rawHeaders;
  let value: string | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const field = raw[i]!;
    if (field !== name && (field.length !== name.length || field.toLowerCase() !== name)) continue;
    value = value === null ? raw[i + 1]! : `${value}, ${raw[i + 1]!}`;
  }
  return value;
}

/** True when the node request carries content (RFC 9112 §6.3: Content-Length or Transfer-Encoding). */
function nodeHasContent(req: IncomingMessage): boolean {
  const length = rawHeader(req, "content-length");
  if (length !== null) return length.trim() !== "0";
  return rawHeader(req, "transfer-encoding") !== null;
}

export class BodyReadError extends GatehouseError<"ERR_BODY_TOO_LARGE" | "ERR_BODY_ABORTED"> {
  constructor(readonly reason: "too-large" | "aborted") {
    super(
      reason === "too-large" ? "ERR_BODY_TOO_LARGE" : "ERR_BODY_ABORTED",
      reason === "too-large" ? "request body exceeds the configured limit" : "client aborted the request",
    );
    this.name = "BodyReadError";
  }
}

/**
 * Reads the whole body of `req` and puts it back (`unshift`) before `end` is emitted, so the
 * application still reads every byte from the same `IncomingMessage`. `req.complete` marks the
 * point where every byte has arrived.
 */
export function readBodyKeepingIt(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("readable", onReadable);
      req.off("error", onFailure);
      req.off("aborted", onFailure);
      req.off("close", onClose);
    };
    const onFailure = () => {
      cleanup();
      reject(new BodyReadError("aborted"));
    };
    const onClose = () => {
      if (!req.complete) onFailure();
    };
    const onReadable = () => {
      for (let chunk: Buffer | null = req.read(); chunk !== null; chunk = req.read()) {
        size += chunk.length;
        if (size > limit) {
          cleanup();
          reject(new BodyReadError("too-large"));
          return;
        }
        chunks.push(chunk);
      }
      if (!req.complete) return;
      cleanup();
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      // Synchronously after the last read(): 'end' is only emitted once the buffer is empty.
      if (size > 0) req.unshift(body);
      resolve(body);
    };
    req.on("readable", onReadable);
    req.on("error", onFailure);
    req.on("aborted", onFailure);
    req.on("close", onClose);
  });
}

/**
 * `field` (of the same length) names the header `lower`: its usual spellings compare at once; any
 * other is lower-cased only when its first letter matches (another field of that length, e.g.
 * `Accept` beside `Origin`, costs no lower-casing).
 */
function isField(field: string, usual: string, lower: string): boolean {
  if (field === usual || field === lower) return true;
  return (field.charCodeAt(0) | 0x20) === lower.charCodeAt(0) && field.toLowerCase() === lower;
}

/** Several fields of one name, joined with ", " as `Headers.get` does (see {@link rawHeader}). */
function joined(previous: string | null, value: string): string {
  return previous === null ? value : `${previous}, ${value}`;
}

/**
 * A {@link BearerRequestHead} read from an `IncomingMessage`. The fields every protected request
 * reads (Host, Authorization, Origin, Content-Type) are picked up in one pass over `rawHeaders`,
 * with the same rules as {@link rawHeader} (any case of the name; several fields joined, so two
 * `Authorization` fields stay malformed); any other header is looked up when asked for.
 */
export class NodeRequestHead implements BearerRequestHead {
  failure: BodyReadError | undefined = undefined;
  /** The first `Host` field as sent, unchecked (as `requestHost` reads it). */
  readonly sentHost: string | undefined;
  /** The checked authority (after trusted proxies), set by the adapter before the gate runs. */
  host: string | undefined = undefined;
  /** `scheme://authority` as resolved (after trusted proxies), for DPoP's `htu`. */
  origin = "";
  private readonly authorization: string | null;
  private readonly originField: string | null;
  private readonly contentType: string | null;
  constructor(
    private readonly req: IncomingMessage,
    readonly url: string,
    private readonly maxBodyBytes: number,
  ) {
    let host: string | undefined;
    let authorization: string | null = null;
    let origin: string | null = null;
    let contentType: string | null = null;
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const field = raw[i]!;
      // By length first: most fields are none of the four and cost one comparison.
      switch (field.length) {
        case 4:
          if (host === undefined && isField(field, "Host", "host")) host = raw[i + 1]!;
          break;
        case 6:
          if (isField(field, "Origin", "origin")) origin = joined(origin, raw[i + 1]!);
          break;
        case 12:
          if (isField(field, "Content-Type", "content-type")) contentType = joined(contentType, raw[i + 1]!);
          break;
        case 13:
          if (isField(field, "Authorization", "authorization"))
            authorization = joined(authorization, raw[i + 1]!);
          break;
      }
    }
    this.sentHost = host;
    this.authorization = authorization;
    this.originField = origin;
    this.contentType = contentType;
  }
  get method(): string {
    return this.req.method ?? "GET";
  }
  requestUrl(): string {
    return this.origin + this.url;
  }
  header(name: string): string | null {
    switch (name) {
      case "authorization":
        return this.authorization;
      case "origin":
        return this.originField;
      case "content-type":
        return this.contentType;
      default:
        return rawHeader(this.req, name);
    }
  }
  get hasBody(): boolean {
    // RFC 6750 §2.2: the form method never applies to GET; a web Request has no body there either.
    return !GET_OR_HEAD.has(this.req.method ?? "GET") && nodeHasContent(this.req);
  }
  async bodyText(): Promise<string> {
    try {
      return (await readBodyKeepingIt(this.req, this.maxBodyBytes)).toString("utf8");
    } catch (error) {
      this.failure = error as BodyReadError;
      // The gate logs this as a bad request (not an internal error); the adapter answers 413 or
      // drops the connection instead of sending the challenge.
      throw invalidRequest("The request body could not be read", `form body ${this.failure.reason}`);
    }
  }
}

/** Writes a challenge from the gate with `writeHead`/`end` (no web `Response`; shared with express.ts). */
export function writeChallenge(res: ServerResponse, challenge: ChallengeParts, isHead: boolean): void {
  const headers = challenge.headers;
  headers["content-length"] = String(challenge.body === null ? 0 : Buffer.byteLength(challenge.body));
  res.writeHead(challenge.status, headers);
  res.end(isHead || challenge.body === null ? undefined : challenge.body);
}

/** True when `url` parses (the Host pattern admits a few authorities that do not, e.g. `a%zz`). */
function parses(url: string): boolean {
  try {
    new URL(url);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves a head's authority and origin: the scheme and `Host` (or, with `trustProxy`, the
 * forwarded ones, node-listener.ts), set on `head`. False when there is no authority or when the
 * origin and the request target do not make a URL (RFC 9112 §3.2): the adapter answers 400.
 *
 * Remembers the last authority (with its scheme) checked with an origin-form target: a request
 * that repeats both exactly skips the URL parse, since an origin-form target after an origin that
 * parses always parses (special-scheme paths percent-encode). Only an origin that parsed is
 * remembered. One resolver per protected route (node:http and Express share it).
 */
export function originResolver(): (
  req: IncomingMessage,
  head: NodeRequestHead,
  trustProxy: boolean,
) => boolean {
  let knownHost: string | undefined;
  let knownScheme = "";
  let knownOrigin = "";
  return (req, head, trustProxy) => {
    const target = head.url;
    const scheme = requestScheme(req, trustProxy);
    const sent = trustProxy ? requestHost(req, true) : head.sentHost;
    if (sent !== undefined && sent === knownHost && scheme === knownScheme && target.charCodeAt(0) === 47) {
      head.host = sent;
      head.origin = knownOrigin;
      return true;
    }
    const host = trustProxy ? sent : requestHost(req, false);
    const origin = `${scheme}://${host}`;
    if (host === undefined || !parses(origin + target)) return false;
    if (target.charCodeAt(0) === 47) {
      knownHost = host;
      knownScheme = scheme;
      knownOrigin = origin;
    }
    head.host = host;
    head.origin = origin;
    return true;
  };
}

/**
 * Protects a node-style handler: the gate judges the request; on success `handler` runs with the
 * verified auth, otherwise the challenge (401/403/400, built by the resource server's one
 * challenge module) is written with `writeHead`/`end` and `handler` never runs.
 *
 * No web `Request` or `Response` is built: the gate reads the method, the request target and
 * headers straight from `IncomingMessage` (only a scopes function gets a web `Request`). A request with content whose `Content-Type` is `application/x-www-form-urlencoded`
 * (not GET/HEAD) has its body read (up to `maxBodyBytes`, else 413) and refused with 400
 * `invalid_request` when it has an `access_token` parameter (RFC 6750 §2.2, never validated); the
 * bytes are put back into `req`, so `handler` reads the body in full. Other bodies are not touched.
 */
export function nodeRequireBearer(
  gate: Pick<ResourceServer, "judge">,
  options: NodeRequireBearerOptions,
  handler: (req: IncomingMessage, res: ServerResponse, auth: AuthInfo) => void | Promise<void>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const hops = proxyHops(options.trustProxy, "nodeRequireBearer");
  const trustProxy = hops > 0;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY;
  const judge = gate.judge({ scopes: options.scopes });
  const onError = options.onError ?? logHandlerError;
  const fail = (res: ServerResponse, head: NodeRequestHead, error: unknown) => {
    if (head.failure?.reason === "aborted") {
      if (!res.destroyed) res.destroy();
      return;
    }
    if (head.failure?.reason === "too-large") return plainResponse(res, 413, "Payload Too Large\n");
    // One failed request is one report and one 500 (a cut connection once the status was sent);
    // the server goes on serving.
    onError(error);
    plainResponse(res, 500, "Internal Server Error\n");
  };
  const decided = (
    req: IncomingMessage,
    res: ServerResponse,
    head: NodeRequestHead,
    verdict: BearerVerdict,
  ): void | Promise<void> => {
    if (head.failure) return fail(res, head, head.failure);
    if (verdict.ok) {
      const done = handler(req, res, verdict.auth);
      // A web Response returned here would answer nothing and leave the request hanging.
      if (done instanceof Response) throw new TypeError("a node-style handler returned a web Response");
      return done;
    }
    writeChallenge(res, verdict.challenge, req.method === "HEAD");
  };
  const resolveOrigin = originResolver();
  const toWebRequest =
    typeof options.scopes === "function"
      ? (req: IncomingMessage) => () => webRequestHead(req, { trustProxy: hops })
      : undefined;
  return (req, res) => {
    const target = req.url ?? "/";
    const head = new NodeRequestHead(req, target, limit);
    if (!resolveOrigin(req, head, trustProxy)) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    let done: void | Promise<void>;
    try {
      const verdict = judge(head, toWebRequest?.(req));
      if (verdict instanceof Promise) {
        verdict.then((v) => decided(req, res, head, v)).then(undefined, (e) => fail(res, head, e));
        return;
      }
      // A warm request is decided synchronously: the handler runs in this very event, as an
      // unprotected route would.
      done = decided(req, res, head, verdict);
    } catch (error) {
      fail(res, head, error);
      return;
    }
    if (done instanceof Promise) done.then(undefined, (e) => fail(res, head, e));
  };
}
