/**
 * Two `gatehouse serve` processes on one SQLite file: the same suite as PostgreSQL, showing that
 * BEGIN IMMEDIATE keeps single-use operations single across processes on one machine.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { multiInstanceSuite } from "./multi-instance.js";

multiInstanceSuite("SQLite", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "gatehouse-multi-"));
  return {
    database: { kind: "sqlite", dataDir },
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
  };
});
