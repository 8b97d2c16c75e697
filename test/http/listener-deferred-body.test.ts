/**
 * Once the node listener is set up, `completeResponse` (and so `jsonResponse`) defers making the body
 * stream until some code asks for it. Every consumer other than the listener must still see an
 * ordinary `Response`: the body readable once, `bodyUsed`, `clone()`, the stream itself, the default
 * content type; and the listener must send the body whether or not the stream was made.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { completeResponse, deferCompleteBodies, jsonResponse } from "../../src/shared/http.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

beforeAll(() => {
  deferCompleteBodies();
});

describe("deferred complete bodies", () => {
  it("are deferred in this process (the tests below exercise the deferred class)", () => {
    expect(Object.getPrototypeOf(jsonResponse({})) === Response.prototype).toBe(false);
    expect(jsonResponse({})).toBeInstanceOf(Response);
  });

  it("read once: json(), then bodyUsed, then a second read is refused", async () => {
    const response = jsonResponse({ a: 1 }, { status: 201, headers: { "x-a": "b" } });
    expect(response.status).toBe(201);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(response.headers.get("x-a")).toBe("b");
    expect(response.bodyUsed).toBe(false);
    expect(await response.json()).toEqual({ a: 1 });
    expect(response.bodyUsed).toBe(true);
    await expect(response.text()).rejects.toThrow(TypeError);
    expect(() => response.clone()).toThrow(TypeError);
  });

  it("the body stream carries the UTF-8 bytes and can be re-wrapped", async () => {
    const response = completeResponse("é✓ text");
    expect(response.headers.get("content-type")).toBe("text/plain;charset=UTF-8");
    const body = response.body;
    expect(body).toBeInstanceOf(ReadableStream);
    expect(response.body).toBe(body);
    expect(await new Response(body).text()).toBe("é✓ text");
    expect(response.bodyUsed).toBe(true);
  });

  it("clone() gives two independent bodies; a locked body cannot be cloned", async () => {
    const response = completeResponse("twice", { headers: { "content-type": "text/x-test" } });
    const copy = response.clone();
    expect(await copy.text()).toBe("twice");
    expect(copy.headers.get("content-type")).toBe("text/x-test");
    expect(await response.arrayBuffer()).toEqual(new TextEncoder().encode("twice").buffer);
    const locked = completeResponse("locked");
    locked.body?.getReader();
    expect(() => locked.clone()).toThrow(TypeError);
  });

  it("bytes() gives the UTF-8 bytes (not the empty body the base class holds)", async () => {
    const response = completeResponse("é✓") as Response & { bytes(): Promise<Uint8Array> };
    expect(Array.from(await response.bytes())).toEqual(Array.from(new TextEncoder().encode("é✓")));
    expect(response.bodyUsed).toBe(true);
  });

  it("blob() keeps the content type", async () => {
    const blob = await jsonResponse({ a: 1 }).blob();
    expect(blob.type).toBe("application/json");
    expect(await blob.text()).toBe('{"a":1}');
  });

  it("a null-body status with text is refused as new Response refuses it", () => {
    expect(() => new Response("x", { status: 204 })).toThrow(TypeError);
    expect(() => completeResponse("x", { status: 204 })).toThrow(TypeError);
  });

  it("through the listener: sent whole whether or not the handler made the stream", async () => {
    let mode = "untouched";
    running = await listen(async () => {
      const response = jsonResponse({ mode });
      if (mode === "stream made") void response.body;
      if (mode === "cloned") await response.clone().text();
      return response;
    });
    for (mode of ["untouched", "stream made", "cloned"]) {
      const res = await fetch(running.url);
      expect(res.headers.get("content-length")).toBe(String(JSON.stringify({ mode }).length));
      expect(await res.json()).toEqual({ mode });
    }
  });
});
