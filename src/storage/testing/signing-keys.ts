/** Contract: signing keys (adding with retirement, compare-and-swap of the private JWK). */

import { describe, expect, it } from "vitest";
import { StorageConflictError } from "../contract.js";
import type { StoreContext } from "./context.js";
import { DAY, id, signingKey, T0 } from "./fixtures.js";

/** A private JWK shaped like a sealed envelope, as `gatehouse keys rewrap` writes one. */
function envelope(kek: string): Record<string, unknown> {
  return { enc: "A256GCM", kek, iv: id("iv"), ct: id("ct"), tag: id("tag") };
}

export function signingKeyContract(ctx: StoreContext): void {
  describe("signing keys", () => {
    it("adds a key and retires the current signer atomically; older retired keys keep their dates", async () => {
      const store = ctx.store();
      const first = signingKey({ createdAt: T0 });
      await store.addSigningKey(first);
      expect(await store.listSigningKeys()).toEqual([first]);
      const second = signingKey({ createdAt: T0 + DAY, alg: "EdDSA" });
      await store.addSigningKey(second, { retiredAt: T0 + DAY, expiresAt: T0 + 2 * DAY });
      const third = signingKey({ createdAt: T0 + 3 * DAY });
      await store.addSigningKey(third, { retiredAt: T0 + 3 * DAY, expiresAt: T0 + 4 * DAY });
      expect(await store.listSigningKeys()).toEqual([
        { ...first, retiredAt: T0 + DAY, expiresAt: T0 + 2 * DAY },
        { ...second, retiredAt: T0 + 3 * DAY, expiresAt: T0 + 4 * DAY },
        third,
      ]);
      await expect(store.addSigningKey(third)).rejects.toBeInstanceOf(StorageConflictError);
    });
  });

  describe("replaceSigningKeyPrivateJwk", () => {
    it("replaces the private JWK when the stored one equals `expected`; kid, alg, public JWK and dates stay", async () => {
      const store = ctx.store();
      const retired = signingKey({ createdAt: T0 });
      await store.addSigningKey(retired);
      const current = signingKey({ createdAt: T0 + DAY });
      await store.addSigningKey(current, { retiredAt: T0 + DAY, expiresAt: T0 + 2 * DAY });
      const [stored] = await store.listSigningKeys();
      const next = envelope("kek-b");

      expect(await store.replaceSigningKeyPrivateJwk(retired.kid, stored!.privateJwk, next)).toBe(true);
      expect(await store.listSigningKeys()).toEqual([
        { ...retired, privateJwk: next, retiredAt: T0 + DAY, expiresAt: T0 + 2 * DAY },
        current,
      ]);
      // What was read before is stale now: the swap is refused and `next` stays.
      expect(
        await store.replaceSigningKeyPrivateJwk(retired.kid, stored!.privateJwk, envelope("kek-c")),
      ).toBe(false);
      expect((await store.listSigningKeys())[0]!.privateJwk).toEqual(next);
    });

    it("equal means the same JSON value: member order and undefined members do not matter", async () => {
      const store = ctx.store();
      const key = signingKey();
      await store.addSigningKey(key);
      const reordered = Object.fromEntries(Object.entries(key.privateJwk).reverse());
      expect(Object.keys(reordered)).not.toEqual(Object.keys(key.privateJwk));
      const next = envelope("kek-b");
      expect(
        await store.replaceSigningKeyPrivateJwk(key.kid, { ...reordered, absent: undefined }, next),
      ).toBe(true);
      expect(await store.listSigningKeys()).toEqual([{ ...key, privateJwk: next }]);
    });

    it("refuses and changes nothing when the stored JWK differs from `expected` in any member", async () => {
      const store = ctx.store();
      const key = signingKey();
      const other = signingKey({ createdAt: T0 + DAY });
      await store.addSigningKey(key);
      await store.addSigningKey(other);
      const before = await store.listSigningKeys();
      const { d, ...withoutD } = key.privateJwk;
      const differing: Record<string, unknown>[] = [
        { ...key.privateJwk, d: `${String(d)}x` },
        withoutD,
        { ...key.privateJwk, kek: "kek-a" },
        { ...key.privateJwk, d: null },
        { ...key.privateJwk, d: [d] },
        other.privateJwk,
        {},
      ];
      for (const expected of differing) {
        expect(await store.replaceSigningKeyPrivateJwk(key.kid, expected, envelope("kek-b"))).toBe(false);
      }
      // The other key's own JWK does not open this key's row either.
      expect(await store.replaceSigningKeyPrivateJwk(other.kid, key.privateJwk, envelope("kek-b"))).toBe(
        false,
      );
      expect(await store.listSigningKeys()).toEqual(before);
    });

    it("returns false for an unknown kid and creates nothing", async () => {
      const store = ctx.store();
      const key = signingKey();
      expect(await store.replaceSigningKeyPrivateJwk(key.kid, key.privateJwk, envelope("kek-b"))).toBe(false);
      expect(await store.listSigningKeys()).toEqual([]);
      await store.addSigningKey(key);
      expect(await store.replaceSigningKeyPrivateJwk(id("kid"), key.privateJwk, envelope("kek-b"))).toBe(
        false,
      );
      expect(await store.listSigningKeys()).toEqual([key]);
    });

    it("of 12 parallel swaps from the same `expected` on several instances, exactly one wins", async () => {
      const store = ctx.store();
      const key = signingKey();
      await store.addSigningKey(key);
      const stores = await ctx.peers(4);
      const nexts = Array.from({ length: 12 }, (_, i) => envelope(`kek-${i}`));
      const results = await Promise.all(
        nexts.map((next, i) =>
          stores[i % stores.length]!.replaceSigningKeyPrivateJwk(key.kid, key.privateJwk, next),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = nexts[results.indexOf(true)];
      expect(await store.listSigningKeys()).toEqual([{ ...key, privateJwk: winner }]);
    });
  });
}
