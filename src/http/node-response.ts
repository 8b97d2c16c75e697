/**
 * node:http adapter, the response half: a web `Response` written to a node `ServerResponse`
 * (headers in one call, a whole body in one write, a stream with backpressure), and the short
 * plain-text answers the adapters give themselves. Split out of node-listener.ts (which re-exports
 * `plainResponse` for the other adapters).
 */
import type { ServerResponse } from "node:http";
import { completeResponseBody } from "../shared/http.js";
import { wholeTextResponse } from "./text-response.js";

/**
 * A short plain-text answer, or a dropped connection once a response has begun (shared with
 * node-require-bearer.ts).
 */
export function plainResponse(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

const NOT_YET_VALUE = Symbol("not yet");
/** Settles after any already-settled promise raced before it (promise jobs run in order). */
const NOT_YET: Promise<typeof NOT_YET_VALUE> = Promise.resolve(NOT_YET_VALUE);

/**
 * Statuses that carry no body (RFC 9110 §15.2, §15.3.5, §15.4.5): no Content-Length is added for
 * them (RFC 9110 §8.6: a server MUST NOT send one in a 1xx or 204 response).
 */
function statusHasBody(status: number): boolean {
  return status >= 200 && status !== 204 && status !== 304;
}

/**
 * Writes the status line and `fields` (flat name/value list) in one call, adding `Content-Length:
 * length` when the body's length is known, the response has no framing field of its own and its
 * status and the method allow a body. The fields come from a web `Headers`, which has validated
 * every name and value already (Fetch "header name"/"header value"), so node is given the list as
 * is rather than through `setHeader` one field at a time.
 */
function writeHead(
  res: ServerResponse,
  response: Response,
  fields: string[],
  framed: boolean,
  length: number | undefined,
  isHead: boolean,
): void {
  if (length !== undefined && !framed && !isHead && statusHasBody(response.status)) {
    fields.push("content-length", String(length));
  }
  if (response.statusText) res.writeHead(response.status, response.statusText, fields);
  else res.writeHead(response.status, fields);
}

/**
 * Writes a web `Response` to a node `ServerResponse`: status, every header (each `Set-Cookie`
 * separately), and the body streamed with backpressure; a client disconnect cancels the body. A
 * body kept whole as text goes out synchronously (undefined: no promise to make for it).
 */
export function sendWebResponse(
  res: ServerResponse,
  response: Response,
  isHead = false,
): Promise<void> | undefined {
  // A textResponse whose text is still its body: written from its own parts, before anything here
  // asks for `headers` (which would build the undici Response it exists to avoid).
  const whole = wholeTextResponse(response);
  if (whole !== undefined) {
    const { status, statusText, fields, text } = whole;
    let framed = false;
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i];
      if (name === "content-length" || name === "transfer-encoding") framed = true;
    }
    // Text responses never have a null-body status (textResponse hands those to new Response).
    if (!framed && !isHead) fields.push("content-length", String(Buffer.byteLength(text)));
    if (statusText) res.writeHead(status, statusText, fields);
    else res.writeHead(status, fields);
    if (isHead) res.end();
    else res.end(text);
    return;
  }
  // One walk over the fields: iterating a Headers yields each Set-Cookie on its own (Fetch "sort
  // and combine"), every other name once.
  const fields: string[] = [];
  let framed = false;
  for (const [name, value] of response.headers) {
    fields.push(name, value);
    if (name === "content-length" || name === "transfer-encoding") framed = true;
  }

  // A body built whole by Gatehouse's own helpers goes out in one write, its stream never read
  // (nor made, for a deferred one: so this comes before `response.body`).
  const complete = completeResponseBody(response);
  if (complete !== undefined) {
    writeHead(res, response, fields, framed, Buffer.byteLength(complete), isHead);
    if (isHead) res.end();
    else res.end(complete);
    return;
  }
  return streamWebResponse(res, response, fields, framed, isHead);
}

/** The rest of {@link sendWebResponse}: a body read from its stream. */
async function streamWebResponse(
  res: ServerResponse,
  response: Response,
  fields: string[],
  framed: boolean,
  isHead: boolean,
): Promise<void> {
  const body = response.body;
  if (!body || isHead) {
    if (body) await body.cancel().catch(() => {});
    writeHead(res, response, fields, framed, 0, isHead);
    res.end();
    return;
  }
  const reader = body.getReader();
  let closed = false;
  const onClose = () => {
    closed = true;
    reader.cancel().catch(() => {});
  };
  res.once("close", onClose);
  try {
    // Read-ahead: a body that is already complete (a string, a buffer, JSON) goes out in one write
    // with Content-Length instead of chunked framing. A body still being produced (SSE) is not
    // waited for: the second read only counts when it has already settled.
    const first = await reader.read();
    if (closed) return;
    if (first.done) {
      writeHead(res, response, fields, framed, 0, isHead);
      res.end();
      return;
    }
    let pending: Promise<ReadableStreamReadResult<Uint8Array>> | undefined = reader.read();
    const second = await Promise.race([pending, NOT_YET]);
    if (second !== NOT_YET_VALUE && second.done) {
      writeHead(res, response, fields, framed, first.value.byteLength, isHead);
      res.end(first.value);
      return;
    }
    writeHead(res, response, fields, framed, undefined, isHead);
    res.write(first.value);
    for (;;) {
      const { done, value } = await (pending ?? reader.read());
      pending = undefined;
      if (done || closed) break;
      if (!res.write(value)) {
        // Backpressure: wait until the socket drains or the client goes away.
        await new Promise<void>((resolve) => {
          const finish = () => {
            res.off("drain", finish);
            res.off("close", finish);
            resolve();
          };
          res.on("drain", finish);
          res.on("close", finish);
        });
        if (closed) break;
      }
    }
    if (!closed) res.end();
  } finally {
    res.off("close", onClose);
  }
}
