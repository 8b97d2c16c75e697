/**
 * The node listener's response writing, byte for byte: the head goes out in one `writeHead` with the
 * fields of the web `Headers`, Content-Length is added only where the body's length is known and
 * RFC 9110 allows one, and bodies built whole by `completeResponse` (jsonResponse) are written from
 * the text they were built with, unless the handler has already read or locked their stream.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { completeResponse, jsonResponse } from "../../src/shared/http.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** The raw response to `method /` over HTTP/1.1 with `Connection: close`, split into head and body. */
async function raw(handler: () => Response | Promise<Response>, method = "GET", version = "1.1") {
  running = await listen(async () => handler());
  const out = await rawRequest(
    running.url,
    `${method} / HTTP/${version}\r\nHost: ${new URL(running.url).host}\r\nConnection: close\r\n\r\n`,
  );
  const split = out.indexOf("\r\n\r\n");
  const head = out.slice(0, split);
  const lines = head.split("\r\n");
  const fields = lines.slice(1).map((line) => {
    const colon = line.indexOf(":");
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const;
  });
  const all = (name: string) => fields.filter(([n]) => n === name).map(([, v]) => v);
  return { status: lines[0], all, body: out.slice(split + 4) };
}

describe("response framing", () => {
  it("jsonResponse: Content-Length counts UTF-8 bytes, not characters", async () => {
    const out = await raw(() => jsonResponse({ name: "é✓" }));
    const text = JSON.stringify({ name: "é✓" });
    expect(out.all("content-length")).toEqual([String(Buffer.byteLength(text))]);
    expect(out.all("transfer-encoding")).toEqual([]);
    expect(out.body).toBe(text);
  });

  it("a body the handler already read is not sent again from the side channel", async () => {
    const out = await raw(async () => {
      const response = jsonResponse({ secret: "x" });
      await response.text();
      return response;
    });
    // A handler's mistake, answered as one: a 500 before anything was sent, never the text again.
    expect(out.status).toBe("HTTP/1.1 500 Internal Server Error");
    expect(out.body).not.toContain("secret");
  });

  it("a body whose stream the handler locked is read from the stream, not the side channel", async () => {
    const out = await raw(() => {
      const response = completeResponse("whole text");
      response.body?.getReader();
      return response;
    });
    // A locked stream cannot be read by the listener: the connection is dropped, never the text.
    expect(out.body).not.toContain("whole text");
  });

  it("a completeResponse cloned before it is returned still sends its whole body", async () => {
    let peeked = "";
    const out = await raw(async () => {
      const response = completeResponse("whole text", { headers: { "content-type": "text/plain" } });
      peeked = await response.clone().text();
      return response;
    });
    expect(peeked).toBe("whole text");
    expect(out.body).toBe("whole text");
    expect(out.all("content-length")).toEqual(["10"]);
  });

  it("a body re-wrapped in a new Response is streamed from the new one", async () => {
    const out = await raw(() => {
      const inner = jsonResponse({ a: 1 });
      return new Response(inner.body, { status: 201, headers: { "x-wrapped": "yes" } });
    });
    expect(out.status).toBe("HTTP/1.1 201 Created");
    expect(out.all("x-wrapped")).toEqual(["yes"]);
    expect(out.body).toBe('{"a":1}');
  });

  it("a handler's own Content-Length is sent once, not doubled", async () => {
    const out = await raw(() => completeResponse("abc", { headers: { "content-length": "3" } }));
    expect(out.all("content-length")).toEqual(["3"]);
    expect(out.body).toBe("abc");
  });

  it("an empty body and a null body are framed with Content-Length: 0", async () => {
    expect((await raw(() => new Response(""))).all("content-length")).toEqual(["0"]);
    const redirect = await raw(() => new Response(null, { status: 303, headers: { location: "/next" } }));
    expect(redirect.status).toBe("HTTP/1.1 303 See Other");
    expect(redirect.all("location")).toEqual(["/next"]);
    expect(redirect.all("content-length")).toEqual(["0"]);
  });

  it("no Content-Length on 204 and 304 (RFC 9110 §8.6, §15.4.5)", async () => {
    expect((await raw(() => new Response(null, { status: 204 }))).all("content-length")).toEqual([]);
    expect((await raw(() => new Response(null, { status: 304 }))).all("content-length")).toEqual([]);
  });

  it("HEAD: the fields without a body and without an invented Content-Length", async () => {
    const out = await raw(() => jsonResponse({ a: 1 }, { headers: { "x-a": "b" } }), "HEAD");
    expect(out.all("x-a")).toEqual(["b"]);
    expect(out.all("content-type")).toEqual(["application/json"]);
    expect(out.all("content-length")).toEqual([]);
    expect(out.body).toBe("");
  });

  it("the status text, each Set-Cookie on its own line, and a value with commas intact", async () => {
    const out = await raw(() => {
      const headers = new Headers({ "x-list": "a, b, c" });
      headers.append("set-cookie", "a=1; Path=/; Expires=Wed, 21 Oct 2015 07:28:00 GMT");
      headers.append("set-cookie", "b=2; Path=/; HttpOnly");
      return completeResponse("made", { status: 201, statusText: "Made It", headers });
    });
    expect(out.status).toBe("HTTP/1.1 201 Made It");
    expect(out.all("set-cookie")).toEqual([
      "a=1; Path=/; Expires=Wed, 21 Oct 2015 07:28:00 GMT",
      "b=2; Path=/; HttpOnly",
    ]);
    expect(out.all("x-list")).toEqual(["a, b, c"]);
    expect(out.body).toBe("made");
  });

  it("HTTP/1.0: a complete body with Content-Length, the connection closed", async () => {
    const out = await raw(() => jsonResponse({ a: 1 }), "GET", "1.0");
    expect(out.all("content-length")).toEqual(["7"]);
    expect(out.body).toBe('{"a":1}');
  });

  it("HTTP/1.0: a streamed body without chunked framing (delimited by the close)", async () => {
    const out = await raw(
      () => {
        const body = new ReadableStream<Uint8Array>({
          async start(c) {
            c.enqueue(new TextEncoder().encode("one "));
            await new Promise((r) => setTimeout(r, 10));
            c.enqueue(new TextEncoder().encode("two"));
            c.close();
          },
        });
        return new Response(body);
      },
      "GET",
      "1.0",
    );
    expect(out.all("transfer-encoding")).toEqual([]);
    expect(out.body).toBe("one two");
  });
});
