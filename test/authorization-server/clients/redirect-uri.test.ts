/**
 * The loopback port rule of `matchRedirectUri` (RFC 8252 §7.3, OAuth 2.1 §8.4.2): the port of an
 * `http` redirect on `localhost`, a 127.x.x.x literal or `[::1]` may differ from the registered one,
 * because native clients (Claude Code among them) listen on an ephemeral port. Hostile twins: the
 * variance never reaches another host spelling, another scheme, a userinfo trick, another path or
 * query, or a trailing character. `/authorize` end to end is in test/interop/vendor-documents.test.ts
 * and endpoints/authorize-redirect-uri.test.ts.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { matchRedirectUri } from "../../../src/authorization-server/clients/redirect-uri.js";

/** What Claude Code publishes in its Client ID Metadata Document. */
const CLAUDE_CODE = ["http://localhost/callback", "http://127.0.0.1/callback"];

const port = fc.integer({ min: 1, max: 65535 });
const path = fc.constantFrom("/callback", "/", "/a/b", "/cb?x=1", "/oauth/callback?client=cli&v=2", "");

describe("the port of an http loopback redirect may vary", () => {
  it("Claude Code: http://localhost:<port>/callback and http://127.0.0.1:<port>/callback match", () => {
    expect(matchRedirectUri(CLAUDE_CODE, "http://localhost:53682/callback")).toBe(
      "http://localhost/callback",
    );
    expect(matchRedirectUri(CLAUDE_CODE, "http://127.0.0.1:53682/callback")).toBe(
      "http://127.0.0.1/callback",
    );
    expect(matchRedirectUri(CLAUDE_CODE, "http://localhost/callback")).toBe("http://localhost/callback");
  });

  it("property: localhost, 127.x.x.x and [::1] match themselves on any port, with or without a registered port", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("localhost", "127.0.0.1", "127.1.2.3", "[::1]"),
        path,
        port,
        fc.option(port, { nil: undefined }),
        (host, p, requestedPort, registeredPort) => {
          const registered = `http://${host}${registeredPort === undefined ? "" : `:${registeredPort}`}${p}`;
          expect(matchRedirectUri([registered], `http://${host}:${requestedPort}${p}`)).toBe(registered);
        },
      ),
      { numRuns: 400 },
    );
  });
});

describe("hostile twins: the port variance widens to nothing else", () => {
  it("property: no other host spelling gets the variance (case, trailing dot, suffixes, subdomains, encodings)", () => {
    const hostile = fc.constantFrom(
      "LOCALHOST",
      "Localhost",
      "localhosT",
      "localhost.",
      "localhostx",
      "xlocalhost",
      "localhost.evil.com",
      "localhost.localdomain",
      "sub.localhost",
      "evil.localhost",
      "localhost%2eevil.com",
      "127.0.0.1.evil.com",
      "127.000.000.001",
      "127.1",
      "2130706433",
      "0x7f.0.0.1",
      "[0:0:0:0:0:0:0:1]",
      "[::ffff:127.0.0.1]",
      "0.0.0.0",
      "evil.com",
    );
    fc.assert(
      fc.property(hostile, path, port, (host, p, requestedPort) => {
        for (const registered of [
          ...CLAUDE_CODE.map((u) => u.replace("/callback", p)),
          "http://[::1]/callback",
        ]) {
          expect(matchRedirectUri([registered], `http://${host}:${requestedPort}${p}`)).toBeUndefined();
        }
      }),
      { numRuns: 400 },
    );
  });

  it("userinfo tricks: the host after @ is another host, and userinfo is refused anyway", () => {
    for (const requested of [
      "http://localhost:1234@evil.com/callback",
      "http://localhost@evil.com/callback",
      "http://localhost:1234:@evil.com/callback",
      "http://user@localhost:1234/callback",
      "http://localhost:pass@127.0.0.1:1234/callback",
      "http://127.0.0.1:80@evil.com/callback",
      "http://localhost\\@evil.com/callback",
      "http://localhost:1234\\@evil.com/callback",
    ]) {
      expect(matchRedirectUri(CLAUDE_CODE, requested), requested).toBeUndefined();
    }
  });

  it("the scheme never changes: https on loopback is an exact match, and http never matches https", () => {
    expect(
      matchRedirectUri(["https://localhost/callback"], "https://localhost:8443/callback"),
    ).toBeUndefined();
    expect(
      matchRedirectUri(["https://127.0.0.1/callback"], "https://127.0.0.1:8443/callback"),
    ).toBeUndefined();
    expect(matchRedirectUri(["https://localhost:8443/callback"], "https://localhost:8443/callback")).toBe(
      "https://localhost:8443/callback",
    );
    expect(matchRedirectUri(CLAUDE_CODE, "https://localhost:1234/callback")).toBeUndefined();
    expect(
      matchRedirectUri(["https://localhost/callback"], "http://localhost:1234/callback"),
    ).toBeUndefined();
    expect(matchRedirectUri(CLAUDE_CODE, "HTTP://localhost:1234/callback")).toBeUndefined();
    expect(matchRedirectUri(CLAUDE_CODE, "ws://localhost:1234/callback")).toBeUndefined();
  });

  it("one loopback host never stands for another: localhost, 127.0.0.1 and [::1] are separate registrations", () => {
    expect(matchRedirectUri(["http://localhost/callback"], "http://127.0.0.1:1234/callback")).toBeUndefined();
    expect(matchRedirectUri(["http://127.0.0.1/callback"], "http://localhost:1234/callback")).toBeUndefined();
    expect(matchRedirectUri(["http://127.0.0.1/callback"], "http://127.0.0.2:1234/callback")).toBeUndefined();
    expect(matchRedirectUri(["http://localhost/callback"], "http://[::1]:1234/callback")).toBeUndefined();
  });

  it("malformed ports never match: empty, too large, signs, spaces", () => {
    for (const requested of [
      "http://localhost:/callback",
      "http://localhost:65536/callback",
      "http://localhost:123456/callback",
      "http://localhost:-1/callback",
      "http://localhost:+80/callback",
      "http://localhost: 80/callback",
      "http://localhost:8o/callback",
      "http://localhost::80/callback",
    ]) {
      expect(matchRedirectUri(CLAUDE_CODE, requested), requested).toBeUndefined();
    }
  });

  it("property: anything after the port must equal the registered path and query byte for byte", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("localhost", "127.0.0.1", "[::1]"),
        path,
        port,
        fc.string({ minLength: 1, maxLength: 4 }),
        fc.nat(),
        (host, p, requestedPort, junk, at) => {
          const registered = `http://${host}${p}`;
          const rest = p;
          const i = rest.length === 0 ? 0 : at % (rest.length + 1);
          // Insert junk anywhere in the path and query, or replace a character there.
          for (const mutated of [
            `${rest.slice(0, i)}${junk}${rest.slice(i)}`,
            `${rest.slice(0, i)}${junk}${rest.slice(i + 1)}`,
          ]) {
            if (mutated === rest) continue;
            // Digits right after the port only make it another port, which is the one allowed change.
            if (/^\d+(?=[/?]|$)/.test(mutated) && mutated.replace(/^\d+/, "") === rest) continue;
            const requested = `http://${host}:${requestedPort}${mutated}`;
            expect(matchRedirectUri([registered], requested), requested).toBeUndefined();
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("property: whatever string is requested, a match is the same scheme, host, path and query", () => {
    const alphabet = fc.constantFrom(..."aL/.:?#@%&=\\ \t\n1x[]:-_".split(""));
    fc.assert(
      fc.property(
        fc.constantFrom(
          "http://localhost",
          "http://127.0.0.1",
          "http://[::1]",
          "http://",
          "https://localhost",
        ),
        fc.array(alphabet, { maxLength: 24 }).map((a) => a.join("")),
        (prefix, tail) => {
          const requested = `${prefix}${tail}`;
          const matched = matchRedirectUri(CLAUDE_CODE, requested);
          if (matched === undefined) return;
          const req = new URL(requested);
          const reg = new URL(matched);
          expect(req.protocol).toBe("http:");
          expect(req.hostname).toBe(reg.hostname);
          expect(req.username).toBe("");
          expect(req.password).toBe("");
          expect(`${req.pathname}${req.search}${req.hash}`).toBe(`${reg.pathname}${reg.search}${reg.hash}`);
          expect(requested.replace(/:\d{1,5}(?=\/)/, "")).toBe(matched);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
