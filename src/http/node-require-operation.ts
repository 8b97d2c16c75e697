/**
 * node:http adapter, operation gate half: {@link nodeRequireOperation} protects a node-style MCP
 * handler (e.g. the SDK's `transport.handleRequest(req, res, parsedBody)`) with the operation
 * gate (resource-server/operations/gate.ts): the POST body is read here once, bounded, its bytes
 * put back into `req`, and the handler gets the parsed body with the verified token. With the
 * listing filter on, the handler's answer to a listing request is filtered on its way out.
 * Translation only: every decision is the gate's.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import {
  BODY_TOO_LARGE,
  type OperationContext,
  type OperationGate,
  type ReadBody,
} from "../resource-server/operations/gate.js";
import { plainResponse, proxyHops } from "./node-listener.js";
import {
  BodyReadError,
  NodeRequestHead,
  originResolver,
  readBodyKeepingIt,
  writeChallenge,
} from "./node-require-bearer.js";

export interface NodeRequireOperationOptions {
  /** Trusted proxy hops in front of this server, as for `toNodeListener` (`true` = 1). */
  trustProxy?: boolean | number;
}

/** Reads a POST body for the gate: text, or the over-the-cap marker; an abort is thrown. */
export async function readNodeBody(req: IncomingMessage, limit: number): Promise<ReadBody> {
  if (req.method !== "POST") return undefined;
  try {
    return (await readBodyKeepingIt(req, limit)).toString("utf8");
  } catch (error) {
    if (error instanceof BodyReadError && error.reason === "too-large") return BODY_TOO_LARGE;
    throw error;
  }
}

function headerList(headers: OutgoingHttpHeaders): [string, string][] {
  const out: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.push([name, String(v)]);
  }
  return out;
}

/**
 * Routes what the handler writes to `res` through the gate's listing filter: the status and
 * headers (from `writeHead` and `setHeader`) and the body chunks become a web `Response`, whose
 * filtered form is written to the real `res` (SSE event by event, JSON once complete).
 */
export function filterNodeResponse(
  res: ServerResponse,
  gate: OperationGate,
  context: OperationContext,
): void {
  const realWriteHead = res.writeHead.bind(res);
  const realWrite = res.write.bind(res);
  const realEnd = res.end.bind(res);
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  let started = false;
  const start = (status: number, extra: OutgoingHttpHeaders | undefined) => {
    if (started) return;
    started = true;
    const headers = new Headers(headerList({ ...res.getHeaders(), ...extra }));
    for (const name of res.getHeaderNames()) res.removeHeader(name);
    const bodyless = status === 204 || status === 304 || res.req?.method === "HEAD";
    const response = new Response(bodyless ? null : body, { status, headers });
    void gate
      .filterResponse(response, context)
      .then(async (filtered) => {
        const out: OutgoingHttpHeaders = {};
        filtered.headers.forEach((value, name) => {
          out[name] = value;
        });
        realWriteHead(filtered.status, out);
        if (typeof res.flushHeaders === "function") res.flushHeaders();
        if (filtered.body === null) return void realEnd();
        const reader = filtered.body.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          realWrite(value);
        }
        realEnd();
      })
      .catch(() => {
        // A listing the filter could not rewrite is not sent half-filtered: the stream is cut.
        if (!res.destroyed) res.destroy();
      });
  };
  const chunkOf = (chunk: unknown, encoding?: unknown): Uint8Array =>
    typeof chunk === "string"
      ? Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8")
      : (chunk as Uint8Array);
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    const headers = rest.find((r) => typeof r === "object" && r !== null) as OutgoingHttpHeaders | undefined;
    start(status, headers);
    return res;
  }) as typeof res.writeHead;
  res.flushHeaders = () => {};
  res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    start(res.statusCode, undefined);
    controller.enqueue(chunkOf(chunk, encoding));
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") queueMicrotask(() => (done as () => void)());
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, encoding?: unknown, callback?: unknown) => {
    start(res.statusCode, undefined);
    if (chunk !== undefined && chunk !== null && typeof chunk !== "function") {
      controller.enqueue(chunkOf(chunk, encoding));
    }
    controller.close();
    const done = [chunk, encoding, callback].find((a) => typeof a === "function");
    if (done) res.once("finish", done as () => void);
    return res;
  }) as typeof res.end;
}

/**
 * Protects a node-style MCP handler with the operation gate. On success `handler` runs with the
 * verified token's facts and the parsed body (pass it on, e.g. as the SDK's `parsedBody`); the
 * body's bytes are also put back into `req`. Otherwise the gate's answer (401/403 challenge, 400
 * or 413 JSON-RPC error) is written and `handler` never runs.
 */
export function nodeRequireOperation(
  gate: OperationGate,
  options: NodeRequireOperationOptions,
  handler: (req: IncomingMessage, res: ServerResponse, context: OperationContext) => void | Promise<void>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const hops = proxyHops(options.trustProxy, "nodeRequireOperation");
  const resolveOrigin = originResolver();
  const fail = (res: ServerResponse) => {
    if (res.headersSent) {
      if (!res.destroyed) res.destroy();
    } else plainResponse(res, 500, "Internal Server Error\n");
  };
  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const head = new NodeRequestHead(req, req.url ?? "/", 0);
    if (!resolveOrigin(req, head, hops > 0)) {
      plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
      return;
    }
    let body: ReadBody;
    try {
      body = await readNodeBody(req, gate.readLimit(head));
    } catch {
      // The client went away mid-body: nobody to answer.
      if (!res.destroyed) res.destroy();
      return;
    }
    const verdict = await gate.judge(head, body, started);
    if (!verdict.ok) {
      writeChallenge(res, verdict.answer, req.method === "HEAD");
      return;
    }
    if (verdict.listings !== undefined) filterNodeResponse(res, gate, verdict);
    await handler(req, res, verdict);
  };
  return (req, res) => {
    serve(req, res).catch(() => fail(res));
  };
}
