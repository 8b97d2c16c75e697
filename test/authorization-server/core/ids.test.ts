/**
 * Server-drawn record ids (src/authorization-server/core/ids.ts): unique, unguessable, sorted by the
 * time they were drawn (what keeps the stores' indexes on them append-only).
 */
import { describe, expect, it } from "vitest";
import { newSortableId, SORTABLE_ID } from "../../../src/authorization-server/core/ids.js";

describe("newSortableId", () => {
  it("is 9 base-36 time digits and 128 random bits, distinct on every draw", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const id = newSortableId(1_764_000_000_000);
      expect(id).toMatch(SORTABLE_ID);
      // base64url: 6 bits per character, 22 characters after the time.
      expect(id.slice(9).length * 6).toBeGreaterThanOrEqual(128);
      expect(seen.has(id)).toBe(false);
      seen.add(id);
    }
    // Drawn at one millisecond, the ids share only the time digits.
    expect(new Set([...seen].map((id) => id.slice(9))).size).toBe(1000);
  });

  it("sorts by the time it was drawn, as text (byte order, which the SQL indexes use)", () => {
    const times = [0, 1, 35, 36, 1_000, 1_764_000_000_000, 2_840_000_000_000, 36 ** 9 - 1];
    const ids = times.map((t) => newSortableId(t));
    expect([...ids].sort()).toEqual(ids);
    expect(ids.map((id) => Number.parseInt(id.slice(0, 9), 36))).toEqual(times);
  });

  it("keeps its fixed width for a clock before 1970 or with a fraction", () => {
    expect(newSortableId(-5).slice(0, 9)).toBe("000000000");
    expect(newSortableId(36.9).slice(0, 9)).toBe("000000010");
  });
});
