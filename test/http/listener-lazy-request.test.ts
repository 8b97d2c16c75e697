/**
 * The node listener hands the handler a request built only as far as the handler looks
 * (src/http/lazy-request.ts). Every consumer must still see an ordinary `Request`: the body readable
 * once, fields read before and after it, clone(), the signal, repeated and odd-case fields as Fetch's
 * `Headers` combines them, mutations seen by `fetch`, `fetch(request)` and `new Request(request)`
 * carrying method, URL, fields and body (the caps on the body: listener-body-cancel.test.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import { lazyRequestsWork } from "../../src/http/lazy-request.js";
import { clientAddress, type ListeningServer, listen } from "../../src/http/node.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** Serves `handler`, whose result (or thrown error's class and message) is kept for the test. */
async function serve(handler: (request: Request) => Promise<unknown>) {
  const seen: { value?: unknown; error?: string; request?: Request } = {};
  running = await listen(async (request) => {
    seen.request = request;
    try {
      seen.value = await handler(request);
    } catch (error) {
      seen.error = `${(error as Error).name}: ${(error as Error).message}`;
    }
    return new Response("done");
  });
  return seen;
}

describe("the listener's request", () => {
  it("is lazy in this runtime (the cases below exercise the lazy request, not a built one)", async () => {
    expect(lazyRequestsWork()).toBe(true);
    const seen = await serve(async (request) => ({
      instance: request instanceof Request,
      tag: Object.prototype.toString.call(request),
      ownPrototype: Object.getPrototypeOf(request) === Request.prototype,
    }));
    await fetch(running!.url);
    // Not a Request built by the constructor (that is the point), yet a Request to every check.
    expect(seen.value).toEqual({ instance: true, tag: "[object Request]", ownPrototype: false });
  });

  it("a body read twice: the second read is refused as a Request refuses it, and bodyUsed says so", async () => {
    const seen = await serve(async (request) => {
      const before = request.bodyUsed;
      const first = await request.text();
      const used = request.bodyUsed;
      const second = await request.text().then(
        () => "read again",
        (error: Error) => error.name,
      );
      const clone = (() => {
        try {
          request.clone();
          return "cloned";
        } catch (error) {
          return (error as Error).name;
        }
      })();
      return { before, first, used, second, clone };
    });
    await fetch(running!.url, { method: "POST", body: "a=1&b=2" });
    expect(seen.value).toEqual({
      before: false,
      first: "a=1&b=2",
      used: true,
      second: "TypeError",
      clone: "TypeError",
    });
  });

  it("the body stream, then text(): the stream is the body, text() is refused once it is locked", async () => {
    const seen = await serve(async (request) => {
      const stream = request.body;
      const same = request.body === stream;
      const text = await new Response(stream).text();
      const again = await request.text().then(
        () => "read again",
        (error: Error) => error.name,
      );
      return { same, text, again, used: request.bodyUsed };
    });
    await fetch(running!.url, { method: "PUT", body: "payload" });
    expect(seen.value).toEqual({ same: true, text: "payload", again: "TypeError", used: true });
  });

  it("the body stream in use, then the request built (a field set): the built request refuses the body too", async () => {
    const seen = await serve(async (request) => {
      const reader = request.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      request.headers.set("x-after", "1");
      const refused = async (attempt: () => unknown) => {
        try {
          await attempt();
          return "accepted";
        } catch (error) {
          return (error as Error).name;
        }
      };
      return {
        first,
        field: request.headers.get("x-after"),
        locked: request.body?.locked,
        used: request.bodyUsed,
        text: await refused(() => request.text()),
        clone: await refused(() => request.clone()),
        copy: await refused(() => new Request(request)),
        fetch: await refused(() => fetch(request)),
      };
    });
    await fetch(running!.url, { method: "POST", body: "abc" });
    expect(seen.value).toEqual({
      first: "abc",
      field: "1",
      locked: true,
      used: true,
      text: "TypeError",
      clone: "TypeError",
      copy: "TypeError",
      fetch: "TypeError",
    });
  });

  it("the body stream looked at but not read, then the request built: the same stream is its body", async () => {
    const seen = await serve(async (request) => {
      const stream = request.body;
      request.headers.set("x-after", "1");
      return {
        same: request.body === stream,
        used: request.bodyUsed,
        text: await request.text(),
        after: request.bodyUsed,
      };
    });
    await fetch(running!.url, { method: "POST", body: "whole" });
    expect(seen.value).toEqual({ same: true, used: false, text: "whole", after: true });
  });

  it("fields read after the body give what they gave before it", async () => {
    const seen = await serve(async (request) => {
      const before = request.headers.get("x-note");
      const body = await request.json();
      return { before, body, after: request.headers.get("x-note"), has: request.headers.has("X-NOTE") };
    });
    await fetch(running!.url, { method: "POST", headers: { "x-note": "kept" }, body: '{"a":1}' });
    expect(seen.value).toEqual({ before: "kept", body: { a: 1 }, after: "kept", has: true });
  });

  it("clone(): a real Request with the same body, fields and client address; both bodies readable", async () => {
    const seen = await serve(async (request) => {
      const copy = request.clone();
      return {
        ownPrototype: Object.getPrototypeOf(copy) === Request.prototype,
        url: copy.url === request.url,
        method: copy.method,
        field: copy.headers.get("x-note"),
        address: clientAddress(copy),
        copyBody: await copy.text(),
        body: await request.text(),
      };
    });
    await fetch(`${running!.url}/p?q=1`, { method: "PATCH", headers: { "x-note": "n" }, body: "twice" });
    expect(seen.value).toEqual({
      ownPrototype: true,
      url: true,
      method: "PATCH",
      field: "n",
      address: "127.0.0.1",
      copyBody: "twice",
      body: "twice",
    });
  });

  it("clone() then the body stream (a logging middleware, then a form reader): the stream is the body", async () => {
    const seen = await serve(async (request) => {
      const logged = await request.clone().text();
      const before = request.bodyUsed;
      const body = await new Response(request.body).text();
      return { logged, before, body, after: request.bodyUsed };
    });
    await fetch(`${running!.url}/p`, { method: "POST", body: "grant_type=x" });
    expect(seen.value).toEqual({ logged: "grant_type=x", before: false, body: "grant_type=x", after: true });
  });

  it("signal: one AbortSignal, not aborted while the client waits, aborted when it leaves", async () => {
    let signal: AbortSignal | undefined;
    let release: () => void = () => {};
    const aborted = new Promise<string>((resolve) => {
      running = undefined;
      void listen(async (request) => {
        signal = request.signal;
        const same = request.signal === signal;
        const early = signal.aborted;
        signal.addEventListener("abort", () =>
          resolve(`same=${same} early=${early} aborted=${signal!.aborted}`),
        );
        await new Promise<void>((r) => {
          release = r;
        });
        return new Response("late");
      }).then((server) => {
        running = server;
        const controller = new AbortController();
        fetch(server.url, { signal: controller.signal }).catch(() => {});
        setTimeout(() => controller.abort(), 100);
      });
    });
    expect(await aborted).toBe("same=true early=false aborted=true");
    release();
  });

  it("repeated fields are joined as Fetch joins them (', ', Cookie with '; '), names in any case", async () => {
    const seen = await serve(async (request) => {
      const names = ["x-repeat", "X-REPEAT", "x-RePeAt", "cookie", "COOKIE", "x-absent"];
      const lazy = names.map((name) => request.headers.get(name));
      // The same fields through a Request built the ordinary way.
      const built = new Request(request.url, { headers: [...request.headers] });
      return {
        lazy,
        built: names.map((name) => built.headers.get(name)),
        spaced: request.headers.get("x-spaced"),
      };
    });
    const host = new URL(running!.url).host;
    const out = await rawRequest(
      running!.url,
      `GET / HTTP/1.1\r\nHost: ${host}\r\nX-Repeat: a\r\nx-repeat: b\r\nX-REPEAT: c\r\n` +
        `Cookie: s=1\r\ncookie: t=2\r\nX-Spaced:    padded\t \r\nConnection: close\r\n\r\n`,
    );
    expect(out.startsWith("HTTP/1.1 200")).toBe(true);
    const joined = ["a, b, c", "a, b, c", "a, b, c", "s=1; t=2", "s=1; t=2", null];
    expect(seen.value).toEqual({ lazy: joined, built: joined, spaced: "padded" });
  });

  it("a name that is not a token is refused with a TypeError, as Headers.get refuses it", async () => {
    const seen = await serve(async (request) => {
      const refusal = (name: string) => {
        try {
          return String(request.headers.get(name));
        } catch (error) {
          return (error as Error).name;
        }
      };
      return [refusal("bad name"), refusal("x:y"), refusal("")];
    });
    await fetch(running!.url);
    expect(seen.value).toEqual(["TypeError", "TypeError", "TypeError"]);
  });

  it("a field set by the handler is seen by every later reader, fetch included: fetch(request) carries it all", async () => {
    // The handler forwards the request to its own URL once (marking it), and echoes the forwarded one.
    running = await listen(async (request) => {
      if (request.headers.get("x-hop") === "1") {
        return Response.json({
          method: request.method,
          path: new URL(request.url).pathname,
          note: request.headers.get("x-note"),
          body: await request.text(),
        });
      }
      request.headers.set("x-hop", "1");
      const hop = request.headers.get("x-hop");
      const forwarded = (await (await fetch(request)).json()) as Record<string, unknown>;
      return Response.json({ hop, forwarded });
    });
    const res = await fetch(`${running.url}/echo`, {
      method: "POST",
      headers: { "x-note": "n" },
      body: "b=2",
    });
    expect(await res.json()).toEqual({
      hop: "1",
      forwarded: { method: "POST", path: "/echo", note: "n", body: "b=2" },
    });
  });

  it("new Request(request, init) and a Headers built from request.headers carry method, URL, fields and body", async () => {
    const seen = await serve(async (request) => {
      const copy = new Request(request, { headers: request.headers });
      const fields = new Headers(request.headers);
      return {
        method: copy.method,
        url: copy.url === request.url,
        note: copy.headers.get("x-note"),
        fields: fields.get("x-note"),
        body: await copy.text(),
        used: request.bodyUsed,
        members: [request.cache, request.mode, request.credentials, request.redirect, request.keepalive],
      };
    });
    await fetch(running!.url, { method: "DELETE", headers: { "x-note": "d" }, body: "gone" });
    const reference = new Request("http://x/");
    expect(seen.value).toEqual({
      method: "DELETE",
      url: true,
      note: "d",
      fields: "d",
      body: "gone",
      used: true,
      members: [
        reference.cache,
        reference.mode,
        reference.credentials,
        reference.redirect,
        reference.keepalive,
      ],
    });
  });

  it("a request the Request constructor refuses is 400 before the handler (TRACE, a forbidden method)", async () => {
    let called = false;
    running = await listen(async () => {
      called = true;
      return new Response("no");
    });
    const host = new URL(running.url).host;
    const out = await rawRequest(
      running.url,
      `TRACE / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    expect(out.startsWith("HTTP/1.1 400")).toBe(true);
    expect(called).toBe(false);
  });
});
