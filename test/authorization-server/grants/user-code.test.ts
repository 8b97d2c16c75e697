/**
 * User codes of the device authorization grant (RFC 8628 §6.1): drawn from the base-20 consonant
 * alphabet, shown as XXXX-XXXX, recognised however a person types them, and nothing else.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  displayUserCode,
  newUserCode,
  normalizeUserCode,
  USER_CODE_ALPHABET,
  USER_CODE_LENGTH,
  userCodeHash,
} from "../../../src/authorization-server/grants/user-code.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";

describe("user codes", () => {
  it("are 8 letters of the alphabet, shown as XXXX-XXXX, with every letter drawn", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const code = newUserCode();
      expect(code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
      for (const c of code.replace("-", "")) seen.add(c);
    }
    expect([...seen].sort().join("")).toBe(USER_CODE_ALPHABET);
  });

  it("normalize however typed: case, dashes and spaces do not matter", () => {
    expect(normalizeUserCode("bcdf-ghjk")).toBe("BCDFGHJK");
    expect(normalizeUserCode(" BCDF GHJK ")).toBe("BCDFGHJK");
    expect(normalizeUserCode("b-c-d-f-g-h-j-k")).toBe("BCDFGHJK");
    expect(displayUserCode("BCDFGHJK")).toBe("BCDF-GHJK");
  });

  it("refuse anything that cannot be one: vowels, digits, other lengths, other characters", () => {
    for (const typed of [
      "BCDF-GHJ",
      "BCDF-GHJKL",
      "ACDF-GHJK",
      "BCDF-GHJ0",
      "BCDF_GHJK",
      "BCDF-GHJK;",
      "",
      undefined,
      null,
    ]) {
      expect(normalizeUserCode(typed), String(typed)).toBeUndefined();
    }
    expect(normalizeUserCode(`${"-".repeat(100)}BCDFGHJK`)).toBeUndefined();
  });

  it("property: whatever is typed, the result is undefined or 8 letters of the alphabet", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (typed) => {
        const code = normalizeUserCode(typed);
        return (
          code === undefined ||
          (code.length === USER_CODE_LENGTH && [...code].every((c) => USER_CODE_ALPHABET.includes(c)))
        );
      }),
    );
  });

  it("property: a displayed code, typed back in any case, normalizes to itself", () => {
    fc.assert(
      fc.property(
        fc.constant(null).map(() => newUserCode()),
        fc.boolean(),
        (code, lower) => {
          const typed = lower ? code.toLowerCase() : code;
          return normalizeUserCode(typed) === code.replace("-", "");
        },
      ),
    );
  });

  it("are stored as the SHA-256 of the normalized form", () => {
    expect(userCodeHash("BCDFGHJK")).toBe(sha256Base64url("BCDFGHJK"));
  });
});
