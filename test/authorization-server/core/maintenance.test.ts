import { afterEach, describe, expect, it, vi } from "vitest";
import { createAuthorizationServer } from "../../../src/authorization-server/index.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { ISSUER, memoryLogger, RESOURCE } from "../helpers.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("maintenance", () => {
  it("purges expired records on its interval and stops when the server is closed", async () => {
    vi.useFakeTimers();
    const store = createMemoryStore();
    const purge = vi.spyOn(store, "purgeExpired");
    const server = await createAuthorizationServer({
      issuer: ISSUER,
      store,
      resources: [{ uri: RESOURCE, scopes: ["a"] }],
      logger: memoryLogger(),
      maintenanceIntervalMs: 1000,
    });
    await vi.advanceTimersByTimeAsync(3000);
    expect(purge).toHaveBeenCalledTimes(3);
    await server.close();
    await vi.advanceTimersByTimeAsync(5000);
    expect(purge).toHaveBeenCalledTimes(3);
  });

  it("a failed purge is logged and does not throw", async () => {
    const store = createMemoryStore();
    const log = memoryLogger();
    const server = await createAuthorizationServer({
      issuer: ISSUER,
      store,
      resources: [{ uri: RESOURCE, scopes: ["a"] }],
      logger: log,
      maintenanceIntervalMs: 0,
    });
    vi.spyOn(store, "purgeExpired").mockRejectedValue(new Error("locked"));
    await server.purgeExpired();
    expect(log.lines.some((l) => l.event === "purge_failed")).toBe(true);
  });
});
