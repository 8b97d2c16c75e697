import { defineConfig } from "vitest/config";

// Two cores on the project's machines: keep the pool small so loopback servers, SQLite and
// Chromium in different files do not starve each other.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
