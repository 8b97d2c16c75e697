/**
 * The test-only crash switch (test/faults/fault-injection.ts) is inert unless armed and refuses a
 * name it does not know, so a typo can never make a crash test pass by testing nothing.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { FAULT_POINTS, withFaultInjection } from "./fault-injection.js";

describe("withFaultInjection", () => {
  it("returns the very same store when no point is armed", () => {
    const store = createMemoryStore();
    expect(withFaultInjection(store, undefined)).toBe(store);
    expect(withFaultInjection(store, "")).toBe(store);
  });

  it("refuses an unknown fault point, naming the known ones", () => {
    expect(() => withFaultInjection(createMemoryStore(), "redeem:after-consumed")).toThrow(
      FAULT_POINTS.join(", "),
    );
  });

  it("an armed store still answers every other operation from the real store", async () => {
    const store = createMemoryStore();
    const stderr = process.stderr.write;
    process.stderr.write = () => true;
    let armed: ReturnType<typeof createMemoryStore>;
    try {
      armed = withFaultInjection(store, "rotate:after-commit");
    } finally {
      process.stderr.write = stderr;
    }
    expect(armed).not.toBe(store);
    await armed.createUser({ id: "u1", username: "ann", passwordHash: "x", isAdmin: false, createdAt: 1 });
    expect((await store.getUser("u1"))?.username).toBe("ann");
    // Nothing to rotate: the wrapped operation runs and reports not_found without crashing.
    const result = await armed.rotateRefreshToken("nope", 1, () => ({}), {
      accessToken: { jti: "j", createdAt: 1, expiresAt: 2 },
    });
    expect(result.status).toBe("not_found");
  });

  it("the shipped code knows nothing of the crash switch (it lives under test/ only)", () => {
    const src = join(import.meta.dirname, "../../src");
    const mentions = readdirSync(src, { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts"))
      .filter((file) =>
        /GATEHOUSE_TEST_FAULT|withFaultInjection/.test(readFileSync(join(src, file), "utf8")),
      );
    expect(mentions).toEqual([]);
  });
});
