/**
 * `textResponse` (gatehouse-auth/node): the node listener writes it from its own status, fields and
 * text, byte for byte what `new Response(text, init)` would have sent; everywhere else it is an
 * ordinary `Response` (every member, clone, the body read once, `new Response(body, response)`), an
 * init the standard refuses is refused the same way, and a change to its `headers` or body made by
 * the handler before returning is what goes out.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen, textResponse } from "../../src/http/node.js";
import { wholeTextResponse } from "../../src/http/text-response.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** The raw response to `method /` over HTTP/1.1 with `Connection: close`, split into head and body. */
async function raw(handler: () => Response | Promise<Response>, method = "GET") {
  running = await listen(async () => handler());
  const out = await rawRequest(
    running.url,
    `${method} / HTTP/1.1\r\nHost: ${new URL(running.url).host}\r\nConnection: close\r\n\r\n`,
  );
  await running.close();
  running = undefined;
  const split = out.indexOf("\r\n\r\n");
  const lines = out.slice(0, split).split("\r\n");
  const fields = lines
    .slice(1)
    .map((line) => {
      const colon = line.indexOf(":");
      return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()] as const;
    })
    // node's own fields, the same for any response.
    .filter(([name]) => name !== "date" && name !== "connection");
  const all = (name: string) => fields.filter(([n]) => n === name).map(([, v]) => v);
  return { status: lines[0], fields, all, body: out.slice(split + 4) };
}

/** The fields a `Headers` gives, as name/value pairs (sorted and combined by Fetch). */
const headerList = (response: Response) => [...response.headers];

describe("textResponse through the listener", () => {
  it("is not built by the Response constructor, yet is a Response", () => {
    const response = textResponse("x");
    expect(response instanceof Response).toBe(true);
    expect(Object.prototype.toString.call(response)).toBe("[object Response]");
    // The point: not an undici Response until something asks for more than its status.
    expect(Object.getPrototypeOf(response) === Response.prototype).toBe(false);
  });

  it("sends what new Response(text, init) sends, for each form of init", async () => {
    const inits: ResponseInit[] = [
      {},
      {
        status: 201,
        statusText: "Made It",
        headers: { "Content-Type": "application/json", "X-Count": 3 as never },
      },
      {
        headers: [
          ["x-list", "a, b"],
          ["Set-Cookie", "a=1; Path=/"],
          ["set-cookie", "b=2; HttpOnly"],
        ],
      },
      {
        status: 404,
        headers: (() => {
          const h = new Headers({ "cache-control": "no-store" });
          h.append("set-cookie", "c=3");
          h.append("set-cookie", "d=4");
          return h;
        })(),
      },
    ];
    for (const init of inits) {
      const text = "é✓ whole text";
      // Each form takes the fast path (the listener writes it from its own parts).
      expect(wholeTextResponse(textResponse(text, init))).toBeDefined();
      const fast = await raw(() => textResponse(text, init));
      const standard = await raw(() => new Response(text, init));
      expect(fast.status).toBe(standard.status);
      expect(fast.body).toBe(text);
      expect(fast.all("content-length")).toEqual([String(Buffer.byteLength(text))]);
      const sorted = (f: typeof fast.fields) => [...f].sort((a, b) => `${a}`.localeCompare(`${b}`));
      expect(sorted(fast.fields)).toEqual(sorted(standard.fields));
    }
  });

  it("HEAD: the fields without a body and without an invented Content-Length", async () => {
    const out = await raw(() => textResponse("body", { headers: { "x-a": "b" } }), "HEAD");
    expect(out.all("x-a")).toEqual(["b"]);
    expect(out.all("content-type")).toEqual(["text/plain;charset=UTF-8"]);
    expect(out.all("content-length")).toEqual([]);
    expect(out.body).toBe("");
  });

  it("a handler's own Content-Length is sent once, not doubled", async () => {
    const out = await raw(() => textResponse("abc", { headers: { "content-length": "3" } }));
    expect(out.all("content-length")).toEqual(["3"]);
    expect(out.body).toBe("abc");
  });

  it("fields the handler changed after building it are the ones sent", async () => {
    const out = await raw(() => {
      const response = textResponse("text", { headers: { "x-gone": "1", "content-type": "text/plain" } });
      response.headers.set("x-added", "yes");
      response.headers.delete("x-gone");
      response.headers.append("set-cookie", "s=1");
      return response;
    });
    expect(out.all("x-added")).toEqual(["yes"]);
    expect(out.all("x-gone")).toEqual([]);
    expect(out.all("set-cookie")).toEqual(["s=1"]);
    expect(out.all("content-length")).toEqual(["4"]);
    expect(out.body).toBe("text");
  });

  it("a body the handler already read is not sent again", async () => {
    const out = await raw(async () => {
      const response = textResponse("secret text");
      await response.text();
      return response;
    });
    // A handler's mistake, answered as one: a 500 before anything was sent, never the text again.
    expect(out.status).toBe("HTTP/1.1 500 Internal Server Error");
    expect(out.body).not.toContain("secret");
  });

  it("a body whose stream the handler locked is not sent from the text", async () => {
    const out = await raw(() => {
      const response = textResponse("whole text");
      response.body?.getReader();
      return response;
    });
    expect(out.body).not.toContain("whole text");
  });

  it("cloned before it is returned, both the clone and the response carry the text", async () => {
    let peeked = "";
    const out = await raw(async () => {
      const response = textResponse("whole text");
      peeked = await response.clone().text();
      return response;
    });
    expect(peeked).toBe("whole text");
    expect(out.body).toBe("whole text");
  });

  it("re-wrapped by a consumer (new Response(body, response)), the new one is what goes out", async () => {
    const out = await raw(() => {
      const inner = textResponse('{"a":1}', { status: 201, headers: { "content-type": "application/json" } });
      return new Response(inner.body, inner);
    });
    expect(out.status).toBe("HTTP/1.1 201 Created");
    expect(out.all("content-type")).toEqual(["application/json"]);
    expect(out.body).toBe('{"a":1}');
  });
});

describe("textResponse as a Response", () => {
  it("every member answers as new Response's does", async () => {
    const init = { status: 202, statusText: "Later", headers: { "content-type": "application/json" } };
    const text = '{"n":1}';
    const fast = textResponse(text, init);
    const standard = new Response(text, init);
    for (const member of ["status", "statusText", "ok", "type", "url", "redirected", "bodyUsed"] as const)
      expect(fast[member]).toEqual(standard[member]);
    expect(headerList(fast)).toEqual(headerList(standard));
    expect(await fast.json()).toEqual({ n: 1 });
    expect(fast.bodyUsed).toBe(true);
    // Fetch: a body is read once.
    await expect(fast.text()).rejects.toThrow(TypeError);
    expect(() => fast.clone()).toThrow(TypeError);
    expect(await textResponse("abc").arrayBuffer()).toEqual(new TextEncoder().encode("abc").buffer);
    expect(await (await textResponse("abc").blob()).text()).toBe("abc");
    expect(textResponse("abc", { status: 500 }).ok).toBe(false);
  });

  it("the standard's own getters and clone, called on it, reach the same state", () => {
    const fast = textResponse("x", { status: 203, headers: { "x-a": "1" } });
    const status = Object.getOwnPropertyDescriptor(Response.prototype, "status")!.get!;
    const headers = Object.getOwnPropertyDescriptor(Response.prototype, "headers")!.get!;
    expect(status.call(fast)).toBe(203);
    expect((headers.call(fast) as Headers).get("x-a")).toBe("1");
    expect(Response.prototype.clone.call(fast).status).toBe(203);
  });

  it("an init the standard refuses is refused the same way", () => {
    const refused = (build: (text: string, init: ResponseInit) => Response, init: ResponseInit) => {
      try {
        build("body", init);
        return "accepted";
      } catch (error) {
        return (error as Error).name;
      }
    };
    const standard = (text: string, init: ResponseInit) => new Response(text, init);
    const cases: ResponseInit[] = [
      { status: 204 },
      { status: 304 },
      { status: 99 },
      { status: 600 },
      { statusText: "bad\nreason" },
      { headers: { "bad name": "x" } },
      { headers: { "x-a": "line\r\nbreak" } },
      { headers: { "x-a": "✓" } },
      { headers: [["x-a"]] as never },
    ];
    for (const init of cases) {
      expect(refused(textResponse, init)).toBe(refused(standard, init));
      expect(refused(textResponse, init)).not.toBe("accepted");
    }
  });

  it("a value Fetch normalises comes out normalised, as from new Response", () => {
    const init = { headers: { "x-a": "  padded\t", "X-Mixed-Case": "v" } };
    expect(headerList(textResponse("t", init))).toEqual(headerList(new Response("t", init)));
  });
});
