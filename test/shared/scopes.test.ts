import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { GatehouseTypeError } from "../../src/shared/errors.js";
import {
  difference,
  formatScope,
  intersection,
  isScopeToken,
  parseScope,
  ScopeHierarchy,
  union,
} from "../../src/shared/scopes.js";

const scopeToken = fc.string({
  unit: fc
    .integer({ min: 0x21, max: 0x7e })
    .filter((c) => c !== 0x22 && c !== 0x5c)
    .map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 10,
});

describe("scope strings (RFC 6749 §3.3)", () => {
  it("parse(format(x)) = x for any list of scope tokens (order kept, duplicates dropped)", () => {
    fc.assert(
      fc.property(fc.array(scopeToken, { maxLength: 8 }), (list) => {
        expect([...parseScope(formatScope(list))]).toEqual([...new Set(list)]);
      }),
    );
  });

  it("tolerates runs of spaces and empty input", () => {
    expect([...parseScope("  a   b ")]).toEqual(["a", "b"]);
    expect(parseScope(undefined).size).toBe(0);
    expect(parseScope("").size).toBe(0);
  });

  it("refuses quotes, backslashes, control characters and non-ASCII", () => {
    for (const bad of ['a"b', "a\\b", "a\tb", "a\nb", "é"]) {
      expect(isScopeToken(bad)).toBe(false);
      expect(() => parseScope(`ok ${bad}`)).toThrow(GatehouseTypeError);
    }
  });

  it("set helpers", () => {
    expect([...union(["a"], ["b", "a"])]).toEqual(["a", "b"]);
    expect([...difference(["a", "b", "c"], ["b"])]).toEqual(["a", "c"]);
    expect([...intersection(["a", "b", "c"], ["c", "a"])]).toEqual(["a", "c"]);
  });
});

describe("ScopeHierarchy (2026-07-28: broader scopes imply narrower ones)", () => {
  const h = new ScopeHierarchy({ "notes:admin": ["notes:write"], "notes:write": ["notes:read"] });

  it("expands transitively", () => {
    expect([...h.expand(["notes:admin"])].sort()).toEqual(["notes:admin", "notes:read", "notes:write"]);
  });

  it("judges sufficiency through the hierarchy, never the other way round", () => {
    expect(h.satisfies(["notes:write"], ["notes:read"])).toBe(true);
    expect(h.satisfies(["notes:admin"], ["notes:read", "notes:write"])).toBe(true);
    expect(h.satisfies(["notes:read"], ["notes:write"])).toBe(false);
    expect([...h.missing(["notes:read"], ["notes:read", "notes:write", "other"])]).toEqual([
      "notes:write",
      "other",
    ]);
  });

  it("survives cycles", () => {
    const cyclic = new ScopeHierarchy({ a: ["b"], b: ["a"] });
    expect([...cyclic.expand(["a"])].sort()).toEqual(["a", "b"]);
  });

  it("knows which scopes it mentions", () => {
    expect(h.knows("notes:read")).toBe(true);
    expect(h.knows("notes:admin")).toBe(true);
    expect(h.knows("other")).toBe(false);
  });

  it("without a hierarchy, sufficiency is plain set inclusion", () => {
    fc.assert(
      fc.property(fc.array(scopeToken), fc.array(scopeToken), (granted, required) => {
        const flat = new ScopeHierarchy();
        expect(flat.satisfies(granted, required)).toBe(required.every((s) => granted.includes(s)));
      }),
    );
  });

  it("granting more never loses sufficiency (monotone)", () => {
    fc.assert(
      fc.property(
        fc.array(scopeToken),
        fc.array(scopeToken),
        fc.array(scopeToken),
        (granted, extra, required) => {
          if (h.satisfies(granted, required))
            expect(h.satisfies([...granted, ...extra], required)).toBe(true);
        },
      ),
    );
  });

  it("refuses invalid scope tokens at construction", () => {
    expect(() => new ScopeHierarchy({ "bad scope": ["x"] })).toThrow(GatehouseTypeError);
    expect(() => new ScopeHierarchy({ ok: ['b"ad'] })).toThrow(GatehouseTypeError);
  });
});
