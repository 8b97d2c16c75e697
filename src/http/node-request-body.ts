/**
 * node:http adapter, the request body: an `IncomingMessage` as a web `ReadableStream`, with
 * backpressure and the `maxBodyBytes` cap, or read whole and bounded without a stream. Split out
 * of node-listener.ts, its only user.
 */
import type { IncomingMessage } from "node:http";
import { TOO_LARGE } from "../shared/bounded-body.js";
import { GatehouseError } from "../shared/errors.js";

class BodyTooLargeError extends GatehouseError<"ERR_BODY_TOO_LARGE"> {
  constructor() {
    super("ERR_BODY_TOO_LARGE", "request body exceeds the configured limit");
    this.name = "BodyTooLargeError";
  }
}

export function bodyStream(
  req: IncomingMessage,
  limit: number,
  state: { tooLarge: boolean },
): ReadableStream<Uint8Array> {
  let received = 0;
  // Set once the stream is closed, errored or cancelled by its reader: from then on node's events
  // are ignored (enqueue or close on such a stream throws, and here that would be an uncaught
  // exception: a reader that stops at its own cap, as the authorization server's form reader does,
  // cancels while the client is still sending).
  let finished = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        req.on("data", (chunk: Buffer) => {
          if (finished) return;
          received += chunk.length;
          if (received > limit) {
            finished = true;
            state.tooLarge = true;
            controller.error(new BodyTooLargeError());
            req.pause();
            return;
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) req.pause();
        });
        req.once("end", () => {
          if (finished) return;
          finished = true;
          controller.close();
        });
        req.once("error", (error) => {
          if (finished) return;
          finished = true;
          controller.error(error);
        });
        req.once("aborted", () => {
          if (finished) return;
          finished = true;
          controller.error(new Error("client aborted the request"));
        });
      },
      pull() {
        req.resume();
      },
      cancel() {
        // The rest of the body is read and dropped, so the connection can carry the response.
        finished = true;
        req.resume();
      },
    },
    { highWaterMark: 4 },
  );
}

/**
 * The body read whole, without a web stream (shared/bounded-body.ts `READ_BODY_UP_TO`): what a
 * reader of {@link bodyStream} with its own cap `limit` gets, at a fraction of the cost (no
 * `ReadableStream`, no reader, no promise per chunk). Past the listener's `maxBodyBytes` it fails as
 * the stream does (`state.tooLarge`, so the listener answers 413); past `limit` it answers
 * {@link TOO_LARGE} and drops the rest as it arrives, so the connection can carry the response; a
 * client that goes away fails it.
 */
export function readBodyUpTo(
  req: IncomingMessage,
  maxBodyBytes: number,
  state: { tooLarge: boolean },
  limit: number,
): Promise<Uint8Array | typeof TOO_LARGE> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    // Set once settled: node's later events (the dropped rest of a body) are ignored.
    let finished = false;
    req.on("data", (chunk: Buffer) => {
      if (finished) return;
      received += chunk.length;
      if (received > maxBodyBytes) {
        finished = true;
        state.tooLarge = true;
        req.pause();
        reject(new BodyTooLargeError());
      } else if (received > limit) {
        finished = true;
        resolve(TOO_LARGE);
      } else chunks.push(chunk);
    });
    req.once("end", () => {
      if (finished) return;
      finished = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    });
    req.once("error", (error) => {
      if (finished) return;
      finished = true;
      reject(error);
    });
    req.once("aborted", () => {
      if (finished) return;
      finished = true;
      reject(new Error("client aborted the request"));
    });
  });
}
