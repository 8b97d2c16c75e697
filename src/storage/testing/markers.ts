/**
 * Contract: single-use markers (`useOnce`), the replay cache behind RFC 9449 §11.1 (DPoP proof
 * `jti`) and RFC 7523 §3 (assertion `jti`): a key is accepted once while its marker lives, and by
 * exactly one of any number of concurrent callers, across instances.
 */

import { describe, expect, it } from "vitest";
import { GatehouseTypeError } from "../../shared/errors.js";
import { MAX_MARKER_KEY_LENGTH } from "../contract.js";
import type { StoreContext } from "./context.js";
import { id, MINUTE, T0 } from "./fixtures.js";

/** A namespaced key as the token endpoint builds it. */
function markerKey(): string {
  return `dpop:as:${id("jkt")}:${id("jti")}`;
}

export function markerContract(ctx: StoreContext): void {
  describe("single-use markers", () => {
    it("accept a key once; a replay is refused and does not extend the marker", async () => {
      const store = ctx.store();
      const key = markerKey();
      expect(await store.useOnce(key, T0 + MINUTE, T0)).toBe(true);
      expect(await store.useOnce(key, T0 + MINUTE, T0 + 1)).toBe(false);
      // The replay asked for a longer life; the first marker's expiry still rules.
      expect(await store.useOnce(key, T0 + 10 * MINUTE, T0 + 2)).toBe(false);
      expect(await store.useOnce(key, T0 + 2 * MINUTE, T0 + MINUTE - 1)).toBe(false);
      expect(await store.useOnce(key, T0 + 2 * MINUTE, T0 + MINUTE)).toBe(true);
      // The renewed marker blocks until its own expiry.
      expect(await store.useOnce(key, T0 + 3 * MINUTE, T0 + 2 * MINUTE - 1)).toBe(false);
    });

    it("keys are compared exactly: case, prefix and namespace all count", async () => {
      const store = ctx.store();
      const key = markerKey();
      const others = [key.toUpperCase(), `${key} `, key.slice(0, -1), key.replace("dpop:as:", "jag:")];
      expect(await store.useOnce(key, T0 + MINUTE, T0)).toBe(true);
      for (const other of others) expect(await store.useOnce(other, T0 + MINUTE, T0)).toBe(true);
      for (const other of [key, ...others]) expect(await store.useOnce(other, T0 + MINUTE, T0)).toBe(false);
    });

    it(`a key of ${MAX_MARKER_KEY_LENGTH} characters is stored whole, also non-ASCII ones`, async () => {
      const store = ctx.store();
      const ascii = "a".repeat(MAX_MARKER_KEY_LENGTH - 1);
      for (const key of [
        `${ascii}x`,
        "é".repeat(MAX_MARKER_KEY_LENGTH),
        "😀".repeat(MAX_MARKER_KEY_LENGTH / 2),
      ]) {
        expect(await store.useOnce(key, T0 + MINUTE, T0)).toBe(true);
        expect(await store.useOnce(key, T0 + MINUTE, T0)).toBe(false);
      }
      // Differing only in the last character: not truncated to a common prefix.
      expect(await store.useOnce(`${ascii}y`, T0 + MINUTE, T0)).toBe(true);
    });

    it("refuses an empty key, a key over the bound and one with U+0000, recording nothing", async () => {
      const store = ctx.store();
      const tooLong = "k".repeat(MAX_MARKER_KEY_LENGTH + 1);
      for (const key of ["", tooLong, "😀".repeat(MAX_MARKER_KEY_LENGTH / 2 + 1), "dpop:as:jkt:a\u0000b"]) {
        const attempt = store.useOnce(key, T0 + MINUTE, T0);
        await expect(attempt).rejects.toBeInstanceOf(GatehouseTypeError);
        await expect(store.useOnce(key, T0 + MINUTE, T0)).rejects.toMatchObject({
          code: "ERR_INVALID_OPTION",
        });
      }
      // Nothing was recorded under the bounded prefix of the refused key either.
      expect(await store.useOnce(tooLong.slice(0, MAX_MARKER_KEY_LENGTH), T0 + MINUTE, T0)).toBe(true);
      expect(await store.useOnce("dpop:as:jkt:a", T0 + MINUTE, T0)).toBe(true);
    });

    it("of 40 concurrent uses of one key across instances exactly one is accepted", async () => {
      const stores = await ctx.peers(4);
      const key = markerKey();
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => stores[i % stores.length]!.useOnce(key, T0 + MINUTE, T0)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it("once a marker expired, of 40 concurrent uses exactly one renews it", async () => {
      const stores = await ctx.peers(4);
      const key = markerKey();
      expect(await ctx.store().useOnce(key, T0 + MINUTE, T0)).toBe(true);
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          stores[i % stores.length]!.useOnce(key, T0 + 2 * MINUTE, T0 + MINUTE),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await ctx.store().useOnce(key, T0 + 3 * MINUTE, T0 + 2 * MINUTE - 1)).toBe(false);
    });

    it("concurrent uses of different keys are each accepted", async () => {
      const stores = await ctx.peers(4);
      const keys = Array.from({ length: 40 }, markerKey);
      const results = await Promise.all(
        keys.map((key, i) => stores[i % stores.length]!.useOnce(key, T0 + MINUTE, T0)),
      );
      expect(results.every(Boolean)).toBe(true);
    });

    it("purgeExpired removes expired markers only; a purged key is accepted again", async () => {
      const store = ctx.store();
      const expired = [markerKey(), markerKey()];
      const live = markerKey();
      for (const key of expired) expect(await store.useOnce(key, T0 + MINUTE, T0)).toBe(true);
      expect(await store.useOnce(live, T0 + MINUTE + 1, T0)).toBe(true);
      expect((await store.purgeExpired(T0 + MINUTE)).markers).toBe(2);
      expect((await store.purgeExpired(T0 + MINUTE)).markers).toBe(0);
      expect(await store.useOnce(live, T0 + 2 * MINUTE, T0 + MINUTE)).toBe(false);
      expect(await store.useOnce(expired[0]!, T0 + 2 * MINUTE, T0 + MINUTE)).toBe(true);
    });
  });
}
