/**
 * The node listener reads the request head from `rawHeaders` (not node's `req.headers` copy): the
 * declared Content-Length is found whatever the case of its name, so the body cap still answers 413
 * before the handler runs, and the handler sees every field in order.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

describe("request head", () => {
  it("rule: a declared Content-Length over maxBodyBytes is 413 before the handler, whatever its case", async () => {
    let called = false;
    running = await listen(
      async () => {
        called = true;
        return new Response("no");
      },
      { maxBodyBytes: 10 },
    );
    const host = new URL(running.url).host;
    for (const name of ["content-length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh"]) {
      const out = await rawRequest(
        running.url,
        `POST / HTTP/1.1\r\nHost: ${host}\r\n${name}: 11\r\nConnection: close\r\n\r\n${"x".repeat(11)}`,
      );
      expect(out.startsWith("HTTP/1.1 413")).toBe(true);
    }
    expect(called).toBe(false);
  });

  it("a body within the cap reaches the handler with its fields, repeated ones joined", async () => {
    let seen: { body: string; cookie: string | null; type: string | null } | undefined;
    running = await listen(async (request) => {
      seen = {
        body: await request.text(),
        cookie: request.headers.get("x-repeat"),
        type: request.headers.get("content-type"),
      };
      return new Response(null, { status: 204 });
    });
    const host = new URL(running.url).host;
    const out = await rawRequest(
      running.url,
      `POST / HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
        `X-Repeat: a\r\nX-Repeat: b\r\nContent-Length: 7\r\nConnection: close\r\n\r\na=1&b=2`,
    );
    expect(out.startsWith("HTTP/1.1 204")).toBe(true);
    expect(seen).toEqual({ body: "a=1&b=2", cookie: "a, b", type: "application/x-www-form-urlencoded" });
  });

  it("conflicting Content-Length fields are refused by the parser, never reach the handler", async () => {
    let called = false;
    running = await listen(async () => {
      called = true;
      return new Response("no");
    });
    const host = new URL(running.url).host;
    const out = await rawRequest(
      running.url,
      `POST / HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 3\r\nContent-Length: 30\r\nConnection: close\r\n\r\nabc`,
    );
    expect(out.startsWith("HTTP/1.1 400")).toBe(true);
    expect(called).toBe(false);
  });
});
