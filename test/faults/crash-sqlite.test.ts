/**
 * SIGKILL at chosen points of /token with SQLite: consistent state after restart and
 * `PRAGMA integrity_check` = ok (WAL recovery discards the uncommitted frames).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { expect } from "vitest";
import { crashSuite } from "./crash.js";

crashSuite("SQLite", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "gatehouse-crash-"));
  const file = join(dataDir, "gatehouse.sqlite");
  const open = () => new Database(file, { timeout: 5000 });
  return {
    database: { kind: "sqlite", dataDir },
    async sql(text, params = []) {
      const db = open();
      try {
        return db.prepare(text.replace(/\$\d+/g, "?")).all(...params) as Record<string, unknown>[];
      } finally {
        db.close();
      }
    },
    async integrity() {
      const db = open();
      try {
        expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      } finally {
        db.close();
      }
    },
    cleanup: () => rm(dataDir, { recursive: true, force: true }),
  };
});
