/**
 * requestPathname / requestQuery (src/authorization-server/core/request-url.ts) answer exactly
 * what `new URL(request.url)` answers (the router's path, the authorization request's parameters),
 * for hostile URLs a Request accepts, and fall back to URL parsing for anything whose `url` is
 * not the platform's serialization.
 */
import { describe, expect, it } from "vitest";
import { requestPathname, requestQuery } from "../../../src/authorization-server/core/request-url.js";

const INPUTS = [
  "http://127.0.0.1:9000/authorize?response_type=code&client_id=c&redirect_uri=https%3A%2F%2Fapp.example%2Fcb",
  "https://as.example/token",
  "http://as.example",
  "http://as.example?x=1",
  "http://as.example#frag",
  "http://as.example/a/b/../authorize?x=1",
  "http://as.example/./authorize",
  "http://as.example/%2e%2e/authorize",
  "http://as.example/%2E/authorize?x",
  "http://as.example\\authorize?x=1",
  "http://as.example/a\\b/authorize",
  "http://user:pa?ss@as.example/authorize?x=1",
  "http://us#er@as.example/authorize",
  "http://a/b@as.example/authorize?x=1",
  "http://[::1]:8080/authorize?x=1#y?z=2",
  "http://as.example/authorize??client_id=a&client_id=b",
  "http://as.example/authorize?#client_id=a",
  "http://as.example/authorize#?client_id=a",
  "http://as.example/authorize?a=1#b=2#c=3",
  "http://as.example/auth orize?a b=c d",
  "http://as.example/authorize?a=%zz&b=%41&c=+&d=%2B&e=é&f=%C3%A9&g=\u2028",
  "http://as.example/authorize?client_id=a&&client_id=&=x&y",
  "http://as.example/authorize?\tclient_id=a\n&state=b\r",
  "http://as.example/AUTHORIZE?x",
  "http://as.example//authorize",
  "http://as.example/authorize;x=1?y",
  "http://as.example/%61uthorize",
  "http://as.example/authorize/",
  " http://as.example/authorize?x=1 ",
  "HTTP://AS.EXAMPLE:80/authorize?x=1",
  "https://as.example:443/authorize?x=1",
  "http://as.example/\u00e9/\ud83d\ude00?q=\ud83d\ude00",
  "http://xn--nxasmq6b.example/authorize?x=1",
  `http://as.example/authorize?${"a=1&".repeat(500)}`,
];

function pairs(params: URLSearchParams): string[][] {
  return [...params];
}

class PlainSubclass extends Request {}
class LyingRequest extends Request {
  override get url(): string {
    return "http://as.example/x/../authorize?client_id=%41&client_id=b#frag";
  }
}

describe("requestPathname and requestQuery", () => {
  it("answer what new URL(request.url) answers, for hostile URLs", () => {
    let compared = 0;
    for (const input of INPUTS) {
      let requests: Request[];
      try {
        requests = [new Request(input), new PlainSubclass(input, { method: "POST", body: "x" })];
      } catch {
        // Fetch refuses some of these outright (a URL with credentials): nothing reaches the router.
        continue;
      }
      compared += 1;
      for (const request of requests) {
        const parsed = new URL(request.url);
        expect(requestPathname(request), input).toBe(parsed.pathname);
        expect(pairs(requestQuery(request)), input).toEqual(pairs(parsed.searchParams));
      }
    }
    expect(compared).toBeGreaterThanOrEqual(INPUTS.length - 3);
  });

  it("parse the string itself when url is not the platform's getter (a subclass or an own property)", () => {
    const lying = new LyingRequest("http://as.example/other");
    expect(requestPathname(lying)).toBe("/authorize");
    expect(pairs(requestQuery(lying))).toEqual([
      ["client_id", "A"],
      ["client_id", "b"],
    ]);
    const own = new Request("http://as.example/other");
    Object.defineProperty(own, "url", { value: "http://as.example\\authorize?%3Fa=1" });
    expect(requestPathname(own)).toBe("/authorize");
    expect(pairs(requestQuery(own))).toEqual([["?a", "1"]]);
    const invalid = new Request("http://as.example/");
    Object.defineProperty(invalid, "url", { value: "not a url" });
    expect(() => requestPathname(invalid)).toThrow(TypeError);
  });

  it("take other schemes through URL parsing", () => {
    for (const input of ["foo://as.example/authorize?x=1#y", "data:text/plain,a?b#c", "about:blank"]) {
      const request = new Request(input);
      const parsed = new URL(request.url);
      expect(requestPathname(request)).toBe(parsed.pathname);
      expect(pairs(requestQuery(request))).toEqual(pairs(parsed.searchParams));
    }
  });
});
