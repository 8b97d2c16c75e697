/**
 * withCors (endpoints/cors.ts): the CORS headers of the browser-callable endpoints, set in place on
 * the endpoints' own responses and on a copy when the headers cannot change.
 */
import { describe, expect, it } from "vitest";
import { withCors } from "../../../src/authorization-server/endpoints/cors.js";

describe("withCors", () => {
  it("adds the headers to the response itself, keeping status, headers and body", async () => {
    const response = new Response('{"ok":true}', {
      status: 400,
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    });
    const answered = withCors(response);
    expect(answered).toBe(response);
    expect(answered.status).toBe(400);
    expect(answered.headers.get("access-control-allow-origin")).toBe("*");
    expect(answered.headers.get("access-control-expose-headers")).toBe(
      "www-authenticate, retry-after, dpop-nonce",
    );
    expect(answered.headers.get("cache-control")).toBe("no-store");
    expect(await answered.text()).toBe('{"ok":true}');
  });

  it("copies a response whose headers are immutable, status and headers included", () => {
    const immutable = Response.redirect("https://elsewhere.example/", 307);
    expect(() => immutable.headers.set("x", "y")).toThrow(TypeError);
    const answered = withCors(immutable);
    expect(answered).not.toBe(immutable);
    expect(answered.status).toBe(307);
    expect(answered.headers.get("location")).toBe("https://elsewhere.example/");
    expect(answered.headers.get("access-control-allow-origin")).toBe("*");
  });
});
