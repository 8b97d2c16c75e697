/**
 * node:http adapter, the request body: an `IncomingMessage` as a web `ReadableStream`, with
 * backpressure and the `maxBodyBytes` cap. Split out of node-listener.ts, its only user.
 */
import type { IncomingMessage } from "node:http";
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
