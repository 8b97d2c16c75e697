/**
 * Pooled random tokens (src/authorization-server/core/random.ts): every draw is fresh CSPRNG output,
 * never bytes handed out before (or the zeros a used slot is wiped to), across pool refills and for
 * sizes that do not divide the pool; odd sizes behave as the unpooled shared/crypto.ts function.
 */
import { describe, expect, it } from "vitest";
import { randomBytesFromPool, randomToken } from "../../../src/authorization-server/core/random.js";
import { randomToken as unpooledRandomToken } from "../../../src/shared/crypto.js";

const BASE64URL = /^[A-Za-z0-9_-]*$/;

describe("pooled randomToken", () => {
  it("never repeats a token or hands out wiped bytes across many pool refills", () => {
    const seen = new Set<string>();
    const bytes: number[] = new Array(256).fill(0);
    let total = 0;
    // 20 000 × 32 bytes is about 156 refills of a 4096-byte pool.
    for (let i = 0; i < 20_000; i++) {
      const token = randomToken();
      expect(token).toHaveLength(43);
      expect(token).toMatch(BASE64URL);
      expect(seen.has(token)).toBe(false);
      seen.add(token);
      for (const b of Buffer.from(token, "base64url")) {
        bytes[b]! += 1;
        total += 1;
      }
    }
    // Wiped (zero) bytes served again would show as a heavy excess of 0x00: expected 2500 each.
    expect(total).toBe(640_000);
    expect(bytes[0]).toBeLessThan(3000);
    expect(Math.min(...bytes)).toBeGreaterThan(2000);
    expect(Math.max(...bytes)).toBeLessThan(3000);
  });

  it("draws sizes that do not divide the pool without overlap, each with its full length", () => {
    const seen = new Set<string>();
    const sizes = [1, 7, 16, 30, 31, 63, 64];
    for (let i = 0; i < 5_000; i++) {
      const size = sizes[i % sizes.length]!;
      const token = randomToken(size);
      expect(Buffer.from(token, "base64url")).toHaveLength(size);
      expect(token).toBe(Buffer.from(token, "base64url").toString("base64url"));
      if (size >= 16) {
        // 128 bits or more: a repeat means reused bytes, never chance.
        expect(seen.has(token)).toBe(false);
        seen.add(token);
        expect(token).not.toBe("A".repeat(token.length));
      }
    }
  });

  it("answers larger and odd sizes as the unpooled function does", () => {
    for (const size of [65, 100, 4096, 5000]) {
      expect(Buffer.from(randomToken(size), "base64url")).toHaveLength(size);
    }
    expect(randomToken(0)).toBe(unpooledRandomToken(0));
    for (const size of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      let pooledError: unknown;
      let unpooledError: unknown;
      try {
        randomToken(size);
      } catch (error) {
        pooledError = error;
      }
      try {
        unpooledRandomToken(size);
      } catch (error) {
        unpooledError = error;
      }
      expect(pooledError === undefined).toBe(unpooledError === undefined);
    }
  });

  it("randomBytesFromPool: own buffers of fresh bytes, never shared with tokens or each other; 1 to 64 bytes", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      const nonce = randomBytesFromPool(12);
      expect(nonce).toHaveLength(12);
      const text = nonce.toString("hex");
      expect(seen.has(text)).toBe(false);
      seen.add(text);
      // A copy: a view of the pool would read as zeros, the pool being wiped right after the draw.
      expect(nonce.equals(Buffer.alloc(12))).toBe(false);
      const token = randomToken(16);
      expect(seen.has(Buffer.from(token, "base64url").subarray(0, 12).toString("hex"))).toBe(false);
    }
    for (const size of [0, 65, -1, 1.5]) expect(() => randomBytesFromPool(size)).toThrow(RangeError);
  });
});
