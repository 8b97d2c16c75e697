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

/** What {@link followBody} hands its one reader. */
interface BodyReader {
  /** The next chunk, within the listener's cap. */
  chunk(chunk: Buffer): void;
  /** The body ended. */
  end(): void;
  /** Past the listener's cap (`state.tooLarge` set), a failing connection, or a client gone. */
  fail(error: Error): void;
}

/**
 * Follows `req`'s body for `reader`, counting it against the listener's cap `maxBodyBytes`; past
 * it, `state.tooLarge` is set (the listener answers 413) and the reading paused. Answers `stop`:
 * from then on node's events are ignored. Each reader settles once: a web stream that is closed,
 * errored or cancelled throws on enqueue or close, and here that would be an uncaught exception (a
 * reader that stops at its own cap, as the authorization server's form reader does, stops while
 * the client is still sending).
 */
function followBody(
  req: IncomingMessage,
  maxBodyBytes: number,
  state: { tooLarge: boolean },
  reader: BodyReader,
): () => void {
  let received = 0;
  let finished = false;
  const settle = (then: () => void) => {
    if (finished) return;
    finished = true;
    then();
  };
  req.on("data", (chunk: Buffer) => {
    if (finished) return;
    received += chunk.length;
    if (received > maxBodyBytes) {
      finished = true;
      state.tooLarge = true;
      req.pause();
      reader.fail(new BodyTooLargeError());
      return;
    }
    reader.chunk(chunk);
  });
  req.once("end", () => settle(() => reader.end()));
  req.once("error", (error) => settle(() => reader.fail(error)));
  req.once("aborted", () => settle(() => reader.fail(new Error("client aborted the request"))));
  return () => {
    finished = true;
  };
}

export function bodyStream(
  req: IncomingMessage,
  limit: number,
  state: { tooLarge: boolean },
): ReadableStream<Uint8Array> {
  let stop = () => {};
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        stop = followBody(req, limit, state, {
          chunk(chunk) {
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            if ((controller.desiredSize ?? 1) <= 0) req.pause();
          },
          end: () => controller.close(),
          fail: (error) => controller.error(error),
        });
      },
      pull() {
        req.resume();
      },
      cancel() {
        // The rest of the body is read and dropped, so the connection can carry the response.
        stop();
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
    let size = 0;
    const stop = followBody(req, maxBodyBytes, state, {
      chunk(chunk) {
        size += chunk.length;
        if (size <= limit) chunks.push(chunk);
        else {
          stop();
          resolve(TOO_LARGE);
        }
      },
      end: () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
      fail: reject,
    });
  });
}
