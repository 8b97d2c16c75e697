/**
 * The listener's request reads its body whole and bounded without a web stream when a reader with
 * its own cap asks first (shared/bounded-body.ts `readRequestUpTo`: the token endpoint's form, the
 * operation gate's JSON-RPC body). Hostile cases: the caller's cap and the listener's cap on a
 * chunked body with no Content-Length, a client that leaves mid-body, and a request whose body is
 * read that way and then used again (it must behave as a read stream does: used, never read twice).
 */
import { request as httpRequest } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { READ_BODY_UP_TO, readRequestUpTo, TOO_LARGE } from "../../src/shared/bounded-body.js";
import { postChunked } from "../support/chunked-body.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

type SelfReading = {
  [READ_BODY_UP_TO]?: (limit: number) => Promise<Uint8Array | typeof TOO_LARGE> | undefined;
};

/**
 * A POST's body read through the listener's direct path, never the stream: a case that went through
 * `request.body` instead would pass the same assertions without testing the direct read.
 */
function readDirectly(request: Request, limit: number): Promise<Uint8Array | typeof TOO_LARGE> {
  // A GET has no body to read (it reads as empty).
  if (request.method === "GET") return readRequestUpTo(request, limit);
  const direct = (request as unknown as SelfReading)[READ_BODY_UP_TO]?.(limit);
  if (direct === undefined) throw new Error("the listener's request did not read its body directly");
  return direct;
}

describe("the listener's request read whole without a stream", () => {
  it("reads the body once, directly; afterwards the body is used, as a read stream is", async () => {
    const seen: Record<string, unknown> = {};
    running = await listen(async (request) => {
      const direct = (request as unknown as SelfReading)[READ_BODY_UP_TO]?.(1024);
      seen.direct = direct !== undefined;
      const bytes = await direct!;
      seen.text = bytes === TOO_LARGE ? "too large" : new TextDecoder().decode(bytes);
      // A second direct read is refused: the body is gone.
      seen.again = (request as unknown as SelfReading)[READ_BODY_UP_TO]?.(1024) === undefined;
      seen.bodyUsed = request.bodyUsed;
      seen.textAfter = await request.text().then(
        () => "read twice",
        (error: unknown) => (error as Error).name,
      );
      // A new request with a body of its own can still be made from it (the operation gate does).
      const copy = new Request(request, { body: "replaced", duplex: "half" } as RequestInit);
      seen.copy = await copy.text();
      return new Response("ok");
    });
    const r = await fetch(running.url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=refresh_token&refresh_token=abc",
    });
    expect(r.status).toBe(200);
    expect(seen).toEqual({
      direct: true,
      text: "grant_type=refresh_token&refresh_token=abc",
      again: true,
      bodyUsed: true,
      textAfter: "TypeError",
      copy: "replaced",
    });
  });

  it("a body in many chunks arrives whole; a GET has none and reads as empty", async () => {
    const texts: string[] = [];
    running = await listen(async (request) => {
      const bytes = await readDirectly(request, 200_000);
      texts.push(bytes === TOO_LARGE ? "too large" : `${request.method} ${bytes.byteLength}`);
      return new Response("ok");
    });
    const big = await postChunked(running.url, ["a".repeat(30_000), "b".repeat(30_000), "c".repeat(30_000)]);
    expect(big.status).toBe(200);
    expect((await fetch(running.url)).status).toBe(200);
    expect(texts).toEqual(["POST 90000", "GET 0"]);
  });

  it("past the caller's cap: TOO_LARGE, the rest dropped, and the connection carries the answer and the next request", async () => {
    const outcomes: string[] = [];
    running = await listen(async (request) => {
      const bytes = await readDirectly(request, 1000);
      outcomes.push(bytes === TOO_LARGE ? "too large" : String(bytes.byteLength));
      return new Response(bytes === TOO_LARGE ? "refused" : "ok", {
        status: bytes === TOO_LARGE ? 413 : 200,
      });
    });
    for (let round = 0; round < 3; round++) {
      const r = await postChunked(running.url, ["x".repeat(600), "y".repeat(70_000), "z".repeat(70_000)]);
      expect(r.status).toBe(413);
      expect(await r.text()).toBe("refused");
      const small = await fetch(running.url, { method: "POST", body: "small" });
      expect(small.status).toBe(200);
    }
    expect(outcomes).toEqual(["too large", "5", "too large", "5", "too large", "5"]);
  });

  it("past the listener's maxBodyBytes: the read fails and the listener answers 413, whatever the handler says", async () => {
    const errors: string[] = [];
    running = await listen(
      async (request) => {
        try {
          await readDirectly(request, 1_000_000);
          return new Response("read");
        } catch (error) {
          errors.push((error as Error).name);
          return new Response("handler's own answer", { status: 400 });
        }
      },
      { maxBodyBytes: 2000 },
    );
    const r = await postChunked(running.url, ["x".repeat(1500), "y".repeat(1500)]);
    expect(r.status).toBe(413);
    expect(errors).toEqual(["BodyTooLargeError"]);
    expect((await fetch(running.url)).status).toBe(200);
  });

  it("a client that leaves mid-body fails the read; the server goes on", async () => {
    let failed: (reason: string) => void;
    const failure = new Promise<string>((resolve) => {
      failed = resolve;
    });
    running = await listen(async (request) => {
      try {
        await readDirectly(request, 1_000_000);
        failed("read completed");
      } catch (error) {
        failed((error as Error).message);
      }
      return new Response("ok");
    });
    const url = new URL(running.url);
    const req = httpRequest({ host: url.hostname, port: url.port, method: "POST", path: "/" });
    req.on("error", () => {});
    req.write("x".repeat(100));
    await new Promise((resolve) => setTimeout(resolve, 50));
    req.destroy();
    expect(await failure).toMatch(/aborted/);
    expect((await fetch(running.url)).status).toBe(200);
  });

  it("once the handler made the body stream, the reader takes the stream (no second read of the socket)", async () => {
    let direct: boolean | undefined;
    let text = "";
    running = await listen(async (request) => {
      const stream = request.body;
      direct = (request as unknown as SelfReading)[READ_BODY_UP_TO]?.(1024) !== undefined;
      const bytes = await readRequestUpTo(request, 1024);
      text = bytes === TOO_LARGE ? "too large" : new TextDecoder().decode(bytes);
      return new Response(String(stream !== null));
    });
    const r = await fetch(running.url, { method: "POST", body: "through the stream" });
    expect(await r.text()).toBe("true");
    expect(direct).toBe(false);
    expect(text).toBe("through the stream");
  });
});
