import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GatehouseTypeError } from "../../src/shared/errors.js";
import { canonicalResourceUri, isLoopbackHost, isValidResourceUri } from "../../src/shared/resource-uri.js";

describe("canonicalResourceUri (spec: Canonical server URI; RFC 8707 §2)", () => {
  it("lowercases scheme and host, keeps path and query byte for byte", () => {
    expect(canonicalResourceUri("HTTPS://API.Example.COM:8443/MCP/Path?Q=A%2F")).toBe(
      "https://api.example.com:8443/MCP/Path?Q=A%2F",
    );
  });

  it("drops a trailing slash unless told it is meaningful", () => {
    expect(canonicalResourceUri("https://h.example/mcp/")).toBe("https://h.example/mcp");
    expect(canonicalResourceUri("https://h.example/")).toBe("https://h.example");
    expect(canonicalResourceUri("https://h.example/mcp/", { keepTrailingSlash: true })).toBe(
      "https://h.example/mcp/",
    );
  });

  it("keeps the slash of a root path followed by a query", () => {
    expect(canonicalResourceUri("https://h.example/?tenant=1")).toBe("https://h.example/?tenant=1");
  });

  it("refuses a fragment, a missing scheme, userinfo, whitespace and an empty host", () => {
    for (const bad of [
      "https://h.example/mcp#frag",
      "https://h.example/#",
      "h.example/mcp",
      "//h.example/mcp",
      "https://user:pw@h.example/",
      "https://h.example/a b",
      "https:///path",
      "https://h.example:99999/",
      " https://h.example",
    ]) {
      expect(() => canonicalResourceUri(bad), bad).toThrow(GatehouseTypeError);
      expect(isValidResourceUri(bad)).toBe(false);
    }
  });

  it("accepts URL objects", () => {
    expect(canonicalResourceUri(new URL("https://H.example/x"))).toBe("https://h.example/x");
  });

  it("is idempotent", () => {
    fc.assert(
      fc.property(fc.webUrl({ withQueryParameters: true }), (url) => {
        let once: string;
        try {
          once = canonicalResourceUri(url);
        } catch {
          return;
        }
        expect(canonicalResourceUri(once)).toBe(once);
      }),
    );
  });

  it("throws ERR_INVALID_RESOURCE_URI", () => {
    try {
      canonicalResourceUri("nope");
      expect.unreachable();
    } catch (error) {
      expect((error as GatehouseTypeError).code).toBe("ERR_INVALID_RESOURCE_URI");
    }
  });
});

describe("isLoopbackHost", () => {
  it("knows localhost, 127/8 and ::1", () => {
    for (const h of ["localhost", "LOCALHOST", "app.localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1"]) {
      expect(isLoopbackHost(h), h).toBe(true);
    }
    for (const h of ["example.com", "localhost.example.com", "10.0.0.1", "128.0.0.1", "[::2]"]) {
      expect(isLoopbackHost(h), h).toBe(false);
    }
  });
});
