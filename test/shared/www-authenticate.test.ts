import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GatehouseTypeError } from "../../src/shared/errors.js";
import { buildChallenge, findChallenge, parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";

const TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".split("");
const token = fc.string({ unit: fc.constantFrom(...TCHARS), minLength: 1, maxLength: 12 });
// Values: any printable ASCII (quotes, backslashes, commas, '=' included), HTAB, and obs-text.
const valueChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  fc.constantFrom("\t", '"', "\\", ",", "=", "é", "\u00ff"),
);
const paramValue = fc.string({ unit: valueChar, maxLength: 40 });
const params = fc
  .uniqueArray(fc.tuple(token, paramValue), { selector: ([name]) => name.toLowerCase(), maxLength: 6 })
  .map((entries) => Object.fromEntries(entries) as Record<string, string>);
const challenge = fc.record({ scheme: token, params });

function lowerKeys(p: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(p).map(([k, v]) => [k.toLowerCase(), v]));
}

describe("parseWWWAuthenticate ∘ buildChallenge", () => {
  it("round-trips one challenge: parse(build(x)) = x (names lowercased)", () => {
    fc.assert(
      fc.property(challenge, ({ scheme, params: p }) => {
        const parsed = parseWWWAuthenticate(buildChallenge(scheme, p));
        expect(parsed).toHaveLength(1);
        expect(parsed[0]!.scheme).toBe(scheme);
        expect({ ...parsed[0]!.params }).toEqual(lowerKeys(p));
        expect(parsed[0]!.token68).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it("round-trips several challenges in one header value", () => {
    fc.assert(
      fc.property(fc.array(challenge, { minLength: 1, maxLength: 4 }), (list) => {
        const header = list.map((c) => buildChallenge(c.scheme, c.params)).join(", ");
        const parsed = parseWWWAuthenticate(header);
        expect(parsed.map((c) => c.scheme)).toEqual(list.map((c) => c.scheme));
        expect(parsed.map((c) => ({ ...c.params }))).toEqual(list.map((c) => lowerKeys(c.params)));
      }),
      { numRuns: 300 },
    );
  });

  it("never throws on arbitrary input", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        expect(Array.isArray(parseWWWAuthenticate(s))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps a parameter inside a quoted value from leaking into another parameter (hostile description)", () => {
    fc.assert(
      fc.property(paramValue, paramValue, (prefix, suffix) => {
        const description = `${prefix} scope="admin", scope=admin ${suffix}`;
        const header = buildChallenge("Bearer", {
          error: "insufficient_scope",
          error_description: description,
          scope: "read",
        });
        const [c] = parseWWWAuthenticate(header);
        expect(c!.params.scope).toBe("read");
        expect(c!.params.error_description).toBe(description);
      }),
    );
  });
});

describe("parseWWWAuthenticate examples", () => {
  it("parses the RFC 9110 §11.6.1 example with two challenges and an escaped quote", () => {
    const parsed = parseWWWAuthenticate(
      'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"',
    );
    expect(parsed).toHaveLength(2);
    expect(parsed[0]).toMatchObject({ scheme: "Newauth" });
    expect({ ...parsed[0]!.params }).toEqual({ realm: "apps", type: "1", title: 'Login to "apps"' });
    expect(parsed[1]!.scheme).toBe("Basic");
    expect(parsed[1]!.params.realm).toBe("simple");
  });

  it("parses a token68 challenge followed by another challenge", () => {
    const parsed = parseWWWAuthenticate('Negotiate YWJjZA==, Bearer scope="a b"');
    expect(parsed[0]).toMatchObject({ scheme: "Negotiate", token68: "YWJjZA==" });
    expect(parsed[1]!.params.scope).toBe("a b");
  });

  it("treats scheme and parameter names case-insensitively", () => {
    const parsed = parseWWWAuthenticate('bEaReR Resource_Metadata="https://r/x", SCOPE=read');
    const c = findChallenge(parsed, "Bearer");
    expect(c?.params.resource_metadata).toBe("https://r/x");
    expect(c?.params.scope).toBe("read");
  });

  it("accepts whitespace around '=' and empty list elements", () => {
    const parsed = parseWWWAuthenticate(' , Bearer  realm = "x" ,, scope= y ,');
    expect({ ...parsed[0]!.params }).toEqual({ realm: "x", scope: "y" });
  });

  it("drops a challenge that repeats a parameter (RFC 9110 §11.2), however its list ends", () => {
    expect(parseWWWAuthenticate('Bearer scope="a", SCOPE="b"')).toEqual([]);
    expect(parseWWWAuthenticate('Bearer scope="a", scope="b", Basic realm="r"').map((c) => c.scheme)).toEqual(
      ["Basic"],
    );
    expect(parseWWWAuthenticate('Bearer scope="a", scope="b",')).toEqual([]);
  });

  it("drops a malformed challenge and keeps the ones before it", () => {
    expect(parseWWWAuthenticate('Basic realm="r", Bearer scope="unterminated').map((c) => c.scheme)).toEqual([
      "Basic",
    ]);
    expect(parseWWWAuthenticate('Bearer realm="x" scope="y"')).toEqual([]);
    expect(parseWWWAuthenticate('Bearer"x"')).toEqual([]);
    expect(parseWWWAuthenticate('Bearer realm="x\\')).toEqual([]);
  });

  it("stores hostile parameter names as data (no prototype pollution)", () => {
    const [c] = parseWWWAuthenticate('Bearer __proto__="x", constructor="y"');
    expect(Object.getOwnPropertyDescriptor(c!.params, "__proto__")?.value).toBe("x");
    expect(c!.params.constructor).toBe("y");
    expect(parseWWWAuthenticate("Bearer")[0]!.params.constructor).toBeUndefined();
  });

  it("returns nothing for empty input", () => {
    expect(parseWWWAuthenticate("")).toEqual([]);
    expect(parseWWWAuthenticate("  ,  ")).toEqual([]);
  });
});

describe("buildChallenge", () => {
  it("quotes values and escapes quotes and backslashes", () => {
    expect(buildChallenge("Bearer", { error_description: 'say "hi" \\ bye' })).toBe(
      'Bearer error_description="say \\"hi\\" \\\\ bye"',
    );
  });

  it("leaves out undefined parameters and sends a bare scheme without parameters", () => {
    expect(buildChallenge("Bearer", { scope: undefined })).toBe("Bearer");
    expect(buildChallenge("Bearer", { a: "1", b: undefined })).toBe('Bearer a="1"');
  });

  it("refuses CR, LF and other control characters in values (header injection)", () => {
    fc.assert(
      fc.property(
        paramValue,
        fc.constantFrom("\r", "\n", "\r\n", "\u0000", "\u001f", "\u007f"),
        paramValue,
        (a, bad, b) => {
          expect(() => buildChallenge("Bearer", { error_description: `${a}${bad}${b}` })).toThrow(
            GatehouseTypeError,
          );
        },
      ),
    );
    try {
      buildChallenge("Bearer", { x: "a\r\nSet-Cookie: evil=1" });
      expect.unreachable();
    } catch (error) {
      expect((error as GatehouseTypeError).code).toBe("ERR_INVALID_HEADER_VALUE");
    }
  });

  it("refuses characters Headers cannot carry (outside Latin-1)", () => {
    expect(() => buildChallenge("Bearer", { error_description: "snow ☃" })).toThrow(GatehouseTypeError);
  });

  it("refuses a scheme or a parameter name that is not a token", () => {
    expect(() => buildChallenge("Bad Scheme")).toThrow(GatehouseTypeError);
    expect(() => buildChallenge("Bearer", { "bad name": "x" })).toThrow(GatehouseTypeError);
    expect(() => buildChallenge("Bearer", { 'a"b': "x" })).toThrow(GatehouseTypeError);
  });

  it("produces values that Headers accepts", () => {
    fc.assert(
      fc.property(challenge, ({ scheme, params: p }) => {
        const h = new Headers();
        h.set("www-authenticate", buildChallenge(scheme, p));
        expect(parseWWWAuthenticate(h.get("www-authenticate")!)).toHaveLength(1);
      }),
      { numRuns: 200 },
    );
  });
});
