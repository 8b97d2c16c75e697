import type { IncomingMessage, ServerResponse } from "node:http";
import { BODY_TOO_LARGE, type OperationContext, type ReadBody } from "../resource-server/operations/gate.js";

/** Request headers passed to the upstream (MCP transport spec, Streamable HTTP). */
export const PASSED_REQUEST_HEADERS = ["accept", "content-type", "mcp-protocol-version", "last-event-id"];
/**
 * Set from the judged body, never copied from the client (2026-07-28, SEP-2243: a server may route
 * by them; a client's own could name another operation than the body the gate judged).
 */
export const OPERATION_HEADERS = ["mcp-method", "mcp-name"];
/** Response headers never relayed: hop-by-hop (RFC 9110 §7.6.1), and those fetch has undone. */
export const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  // The listener frames the answer itself (a JSON answer is re-sent as text, a stream chunked).
  "content-length",
  "set-cookie",
]);
export const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
export const SESSION_MAC_CHARS = 22;
/** Printable ASCII only: what a header value built from a token claim or a tool name may hold. */
export const PRINTABLE = /^[\x20-\x7e]*$/;
/** Every request header the relay reads, so the node path reads them in one pass over the fields. */
export const READ_REQUEST_HEADERS = new Set([
  ...PASSED_REQUEST_HEADERS,
  ...OPERATION_HEADERS,
  "mcp-session-id",
]);
/**
 * An idle connection to the upstream is closed after this long: before common servers' own
 * keep-alive timeouts (node's 5 s; a `Keep-Alive: timeout=` hint shortens it).
 */
export const IDLE_UPSTREAM_CONNECTION_MS = 4000;
/** Waiting this long for the upstream's headers, the relay starts watching for the client leaving. */
export const WATCH_CLIENT_AFTER_MS = 1000;

/** A JSON-RPC error answer's status and body (MCP transport spec: errors as JSON-RPC). */
export function jsonRpcErrorBody(message: string, id: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message } });
}

export function jsonRpcError(status: number, message: string, id: unknown = null): Response {
  return new Response(jsonRpcErrorBody(message, id), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

export function writeJsonRpcError(res: ServerResponse, status: number, message: string, id: unknown): void {
  const body = jsonRpcErrorBody(message, id);
  res.writeHead(status, [
    "content-type",
    "application/json",
    "cache-control",
    "no-store",
    "content-length",
    String(Buffer.byteLength(body)),
  ]);
  res.end(body);
}

/** The id of a single request (for an error answer in its name), else `null`. */
export function singleId(context: OperationContext): unknown {
  const only = context.messages.length === 1 ? context.messages[0] : undefined;
  return only?.kind === "request" ? only.id : null;
}

/** Header values the verified token yields; a value a header cannot carry is left out. */
export function identityValue(value: string | undefined): string | undefined {
  return value !== undefined && PRINTABLE.test(value) ? value : undefined;
}

/** Statuses whose answers have no body (RFC 9110 §15.3.5, §15.4.5). */
export const NULL_BODY = new Set([204, 205, 304]);
/** Largest JSON answer the relay reads whole: 64 MiB. */
export const MAX_JSON_ANSWER = 64 * 1024 * 1024;
export const JSON_TYPE = /^application\/json/i;
/** Answer headers the gateway writes itself (the session id bound to the caller, CORS exposure). */
export const REPLACED_RESPONSE_HEADERS = new Set(["mcp-session-id", "access-control-expose-headers"]);
export const EXPOSED = "Mcp-Session-Id, WWW-Authenticate";
export const BAD_UPSTREAM = "The MCP server behind the gateway did not answer";
export const BAD_ANSWER = "The MCP server behind the gateway sent an answer too large or cut";

/** Whether the relay reads the answer whole (JSON as it is on the wire) rather than streaming it. */
export function wholeAnswer(head: AnswerHead): boolean {
  return head.type !== undefined && JSON_TYPE.test(head.type) && !head.encoded;
}

/** The upstream answer's fields for the client, and what the relay reads of them. */
export interface AnswerHead {
  /** Flat name/value list: hop-by-hop and replaced fields dropped. */
  fields: string[];
  /** `Content-Type` (the first), `Content-Encoding` present, `Mcp-Session-Id` (the first). */
  type: string | undefined;
  encoded: boolean;
  session: string | undefined;
}

/**
 * One pass over node's `rawHeaders` of the upstream's answer (node's `headers` object is built on
 * first use, a second pass and an object per answer; the relay needs three fields of it).
 */
export function answerHeadOf(raw: readonly string[]): AnswerHead {
  const head: AnswerHead = { fields: [], type: undefined, encoded: false, session: undefined };
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    if (name === "content-type") head.type ??= value;
    else if (name === "content-encoding") head.encoded = true;
    else if (name === "mcp-session-id") head.session ??= value;
    if (!DROPPED_RESPONSE_HEADERS.has(name) && !REPLACED_RESPONSE_HEADERS.has(name))
      head.fields.push(name, value);
  }
  return head;
}

export function readAll(message: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    message.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        message.destroy();
        reject(new RangeError("answer too large"));
        return;
      }
      chunks.push(chunk);
    });
    message.once("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    message.once("error", reject);
    message.once("aborted", () => reject(new Error("answer cut")));
  });
}

/**
 * A POST body read from node's stream, at most `limit` bytes (a larger declared or received body is
 * {@link BODY_TOO_LARGE}, what the gate answers 413 for once the token is judged), decoded as the
 * web path's reader decodes it (UTF-8, malformed sequences replaced, a leading BOM dropped).
 * Rejects when the client leaves mid-body.
 */
export function readNodeBody(
  req: IncomingMessage,
  limit: number,
  declared: string | null,
): Promise<ReadBody> {
  // `declared`: the request's Content-Length as the head read it (not node's `headers` object,
  // built on first use).
  if (declared !== null && Number(declared) > limit) return Promise.resolve(BODY_TOO_LARGE);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("aborted", onGone);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // The rest is read and dropped (node's flowing mode), so the connection can carry the 413.
        resolve(BODY_TOO_LARGE);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString("utf8");
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    const onGone = () => {
      cleanup();
      reject(new Error("client left mid-body"));
    };
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onGone);
    req.once("aborted", onGone);
  });
}

/**
 * The fields the relay reads from node's `rawHeaders` in one pass, combined as Fetch's
 * `Headers.get` combines a repeated field (RFC 9110 §5.3: joined with ", " in order).
 */
export function relayFieldsOf(raw: readonly string[]): (name: string) => string | null {
  const found: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!READ_REQUEST_HEADERS.has(name)) continue;
    const value = raw[i + 1]!;
    found[name] = found[name] === undefined ? value : `${found[name]}, ${value}`;
  }
  return (name) => found[name] ?? null;
}

/** The path of an absolute URL as WHATWG serialises it (`scheme://authority/path?query#fragment`). */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  let end = url.indexOf("?", start);
  if (end < 0) end = url.length;
  const hash = url.indexOf("#", start);
  return url.slice(start, hash >= 0 && hash < end ? hash : end);
}

/** Subscribes `gone` to the client leaving; answers the unsubscribe. */
export type ClientWatch = (gone: () => void) => (() => void) | undefined;

export function watchSignal(request: Request): ClientWatch {
  return (gone) => {
    const signal = request.signal;
    if (signal.aborted) {
      gone();
      return undefined;
    }
    signal.addEventListener("abort", gone, { once: true });
    return () => signal.removeEventListener("abort", gone);
  };
}

export function watchResponse(res: ServerResponse): ClientWatch {
  return (gone) => {
    if (res.destroyed) {
      gone();
      return undefined;
    }
    const onClose = () => {
      if (!res.writableFinished) gone();
    };
    res.once("close", onClose);
    return () => res.off("close", onClose);
  };
}

export class UpstreamFailure extends Error {
  constructor(readonly reason: string) {
    super(`upstream ${reason}`);
  }
}
