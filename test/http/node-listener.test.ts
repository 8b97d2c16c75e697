import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { clientAddress, type ListeningServer, listen } from "../../src/http/node.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

describe("toNodeListener", () => {
  it("builds an absolute URL from Host and exposes the client address without a header", async () => {
    let seen: { url: string; address: string | undefined; xff: string | null } | undefined;
    running = await listen(async (request) => {
      seen = {
        url: request.url,
        address: clientAddress(request),
        xff: request.headers.get("x-forwarded-for"),
      };
      return new Response("ok");
    });
    const res = await fetch(`${running.url}/a/b?c=d`, { headers: { "x-forwarded-for": "203.0.113.9" } });
    expect(await res.text()).toBe("ok");
    expect(seen?.url).toBe(`${running.url}/a/b?c=d`);
    // Without trustProxy the forwarded header is not believed.
    expect(seen?.address).toBe("127.0.0.1");
  });

  it("keeps the client address on request.clone()", async () => {
    let seen: { address: string | undefined; body: string; original: string } | undefined;
    running = await listen(async (request) => {
      const copy = request.clone();
      seen = { address: clientAddress(copy), body: await copy.text(), original: await request.text() };
      return new Response("ok");
    });
    await fetch(running.url, { method: "POST", body: "peek" });
    expect(seen).toEqual({ address: "127.0.0.1", body: "peek", original: "peek" });
  });

  it("honours X-Forwarded-* only with trustProxy", async () => {
    let seen: { url: string; address: string | undefined } | undefined;
    running = await listen(
      async (request) => {
        seen = { url: request.url, address: clientAddress(request) };
        return new Response(null, { status: 204 });
      },
      { trustProxy: true },
    );
    await fetch(`${running.url}/x`, {
      headers: {
        "x-forwarded-for": "203.0.113.9, 10.0.0.1",
        "x-forwarded-proto": "https",
        "x-forwarded-host": "api.example.com",
      },
    });
    // One trusted hop: the address that proxy appended (the rightmost), see client-address.test.ts.
    expect(seen).toEqual({ url: "https://api.example.com/x", address: "10.0.0.1" });
  });

  it("answers 400 to a request without a valid Host header (RFC 9112 §3.2)", async () => {
    let called = false;
    running = await listen(async () => {
      called = true;
      return new Response("no");
    });
    const out = await rawRequest(running.url, "GET / HTTP/1.0\r\nHost: bad host/\r\n\r\n");
    expect(out.startsWith("HTTP/1.1 400")).toBe(true);
    expect(called).toBe(false);
  });

  it("streams the request body to the handler", async () => {
    running = await listen(async (request) => new Response(`${request.method}:${await request.text()}`));
    const res = await fetch(running.url, { method: "POST", body: "hello body" });
    expect(await res.text()).toBe("POST:hello body");
  });

  it("refuses a declared body over maxBodyBytes with 413 before the handler runs", async () => {
    let called = false;
    running = await listen(
      async () => {
        called = true;
        return new Response("no");
      },
      { maxBodyBytes: 10 },
    );
    const res = await fetch(running.url, { method: "POST", body: "x".repeat(11) });
    expect(res.status).toBe(413);
    expect(called).toBe(false);
  });

  it("answers 413 when a streamed (chunked) body grows past maxBodyBytes", async () => {
    running = await listen(async (request) => new Response(await request.text()), { maxBodyBytes: 1000 });
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 10; i++) c.enqueue(new Uint8Array(500));
        c.close();
      },
    });
    const res = await fetch(running.url, { method: "POST", body: chunks, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
  });

  it("writes the status, every header and each Set-Cookie separately", async () => {
    running = await listen(async () => {
      const headers = new Headers({ "x-one": "1", "content-type": "text/plain" });
      headers.append("set-cookie", "a=1; Path=/");
      headers.append("set-cookie", "b=2; Path=/; HttpOnly");
      return new Response("created", { status: 201, headers });
    });
    const res = await fetch(running.url);
    expect(res.status).toBe(201);
    expect(res.headers.get("x-one")).toBe("1");
    expect(res.headers.getSetCookie()).toEqual(["a=1; Path=/", "b=2; Path=/; HttpOnly"]);
    expect(await res.text()).toBe("created");
  });

  it("sends no body for HEAD", async () => {
    running = await listen(async () => new Response("body text", { headers: { "x-a": "b" } }));
    const res = await fetch(running.url, { method: "HEAD" });
    expect(res.headers.get("x-a")).toBe("b");
    expect(await res.text()).toBe("");
  });

  it("streams a large response body", async () => {
    const size = 4 * 1024 * 1024;
    running = await listen(async () => {
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(c) {
          if (sent >= size) return c.close();
          c.enqueue(new Uint8Array(64 * 1024).fill(97));
          sent += 64 * 1024;
        },
      });
      return new Response(body);
    });
    const res = await fetch(running.url);
    expect((await res.arrayBuffer()).byteLength).toBe(size);
  });

  it("answers a bare 500 without detail when the handler throws", async () => {
    const errors: unknown[] = [];
    running = await listen(
      async () => {
        throw new Error("secret internal detail");
      },
      { onError: (e) => errors.push(e) },
    );
    const res = await fetch(running.url);
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain("secret");
    expect(errors).toHaveLength(1);
  });

  it("survives a client that disconnects mid-response and aborts request.signal", async () => {
    let aborted!: Promise<void>;
    running = await listen(async (request) => {
      aborted = new Promise((resolve) => request.signal.addEventListener("abort", () => resolve()));
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          await new Promise((r) => setTimeout(r, 5));
          c.enqueue(new Uint8Array(16 * 1024));
        },
      });
      return new Response(body);
    });
    const { hostname, port } = new URL(running.url);
    await new Promise<void>((resolve) => {
      const socket = connect(Number(port), hostname, () =>
        socket.write(`GET / HTTP/1.1\r\nHost: ${hostname}:${port}\r\n\r\n`),
      );
      socket.once("data", () => {
        socket.destroy();
        resolve();
      });
    });
    await aborted;
    // The server still serves.
    running.server.closeIdleConnections();
    const res = await fetch(running.url, { method: "HEAD" });
    expect(res.status).toBe(200);
  });

  it("sends a complete body in one piece with Content-Length (no chunked framing)", async () => {
    running = await listen(async () => Response.json({ a: 1 }));
    const out = await rawRequest(running.url, `GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(out).toMatch(/content-length: 7\r\n/i);
    expect(out).not.toMatch(/transfer-encoding/i);
    expect(out.endsWith('{"a":1}')).toBe(true);
  });

  it("rule: a streamed body's first chunk is sent before the next one exists (SSE is not buffered)", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    running = await listen(async () => {
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode("data: first\n\n"));
          await released;
          c.enqueue(new TextEncoder().encode("data: second\n\n"));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const res = await fetch(running.url);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("data: first\n\n");
    release();
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toBe("data: second\n\n");
  }, 10_000);

  it("listen reports the real port for port 0", async () => {
    running = await listen(async () => new Response("x"), { port: 0 });
    expect(running.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(running.url.endsWith(":0")).toBe(false);
  });
});
