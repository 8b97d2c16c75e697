/**
 * WAL checkpoints in a worker thread (src/storage/sqlite/checkpointer.ts): they run while the
 * connection goes on committing, leave SQLite's own automatic checkpoint as a backstop only, hand
 * it back when the worker cannot run, and a SIGKILL in the middle loses no commit that returned.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import {
  BACKSTOP_PAGES,
  createCheckpointer,
  DEFAULT_AUTOCHECKPOINT_PAGES,
} from "../../../src/storage/sqlite/checkpointer.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-checkpointer-"));
let counter = 0;
afterAll(() => rmSync(root, { recursive: true, force: true }));

function openWal(): { db: Database.Database; path: string } {
  const path = join(root, `case-${++counter}.sqlite`);
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE rows (n INTEGER PRIMARY KEY, filler BLOB NOT NULL)");
  return { db, path };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const autocheckpointPages = (db: Database.Database) => db.pragma("wal_autocheckpoint", { simple: true });

describe("SQLite WAL checkpointer", () => {
  it("checkpoints in its worker while the connection commits, with the automatic checkpoint as a backstop only", async () => {
    const { db, path } = openWal();
    const checkpointer = createCheckpointer(db, path, 5000, { startAfterCommits: 3, intervalMs: 0 });
    const insert = db.prepare("INSERT INTO rows (n, filler) VALUES (?, randomblob(3000))");
    let n = 0;
    const commit = () => {
      insert.run(++n);
      checkpointer.committed();
    };
    commit();
    commit();
    // Fewer commits than startAfterCommits: no worker, SQLite's own checkpoint as before.
    expect(checkpointer.stats()).toMatchObject({ checkpoints: 0, running: false });
    expect(autocheckpointPages(db)).toBe(DEFAULT_AUTOCHECKPOINT_PAGES);
    await until(() => {
      commit();
      return checkpointer.stats().checkpoints >= 3;
    }, "three checkpoints");
    expect(checkpointer.stats().running).toBe(true);
    expect(autocheckpointPages(db)).toBe(BACKSTOP_PAGES);
    // What the worker copied is in the database file: a checkpoint of what is left finds the
    // frames it copied already (checkpointed counts every frame the WAL holds that is backfilled).
    const [left] = db.pragma("wal_checkpoint(PASSIVE)") as { log: number; checkpointed: number }[];
    expect(left!.checkpointed).toBe(left!.log);
    db.close();
    await checkpointer.close();
    // The worker's connection was the last: closing it checkpointed and removed the WAL.
    expect(existsSync(`${path}-wal`)).toBe(false);
    const reopened = new Database(path, { readonly: true });
    expect(reopened.prepare("SELECT count(*) AS c FROM rows").get()).toEqual({ c: n });
    expect(reopened.pragma("integrity_check", { simple: true })).toBe("ok");
    reopened.close();
  });

  it("under steady commits the WAL starts over after each round instead of growing to the backstop", async () => {
    const { db, path } = openWal();
    const checkpointer = createCheckpointer(db, path, 5000, { startAfterCommits: 1, intervalMs: 0 });
    const insert = db.prepare("INSERT INTO rows (n, filler) VALUES (?, randomblob(3000))");
    const commits = 6000;
    for (let n = 1; n <= commits; n++) {
      insert.run(n);
      checkpointer.committed();
      // A macrotask now and then, as between request batches, for the worker's answers.
      if (n % 8 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    expect(checkpointer.stats().checkpoints).toBeGreaterThan(0);
    // Every commit wrote at least one 4 KiB frame: a WAL that never started over would hold them
    // all (and the backstop would start copying on the commits at 10 000 pages).
    const pageSize = Number(db.pragma("page_size", { simple: true }));
    expect(statSync(`${path}-wal`).size).toBeLessThan((commits / 2) * pageSize);
    db.close();
    await checkpointer.close();
  }, 60_000);

  it("hands checkpoints back to SQLite when its worker cannot open the database", async () => {
    const { db } = openWal();
    // A file the worker must find and does not: its start fails.
    const checkpointer = createCheckpointer(db, join(root, "missing", "gone.sqlite"), 50, {
      startAfterCommits: 1,
      intervalMs: 0,
    });
    const insert = db.prepare("INSERT INTO rows (n, filler) VALUES (?, zeroblob(10))");
    insert.run(1);
    checkpointer.committed();
    await until(() => {
      insert.run(null);
      checkpointer.committed();
      return (
        checkpointer.stats().running === false && autocheckpointPages(db) === DEFAULT_AUTOCHECKPOINT_PAGES
      );
    }, "the worker's failure");
    // Later commits ask nothing of it and still work.
    for (let i = 0; i < 5; i++) {
      insert.run(null);
      checkpointer.committed();
    }
    expect(checkpointer.stats()).toMatchObject({ checkpoints: 0, running: false });
    db.close();
    await checkpointer.close();
  });

  it("a store that commits little never starts the worker; its counters say so", async () => {
    const store = createSqliteStore({ path: join(root, `case-${++counter}.sqlite`) });
    await store.migrate();
    for (let i = 0; i < 5; i++) await store.useOnce(`marker-${i}`, Date.now() + 60_000, Date.now());
    expect(store.writeStats()).toMatchObject({ transactions: 6, checkpoints: 0, running: false });
    await store.close();
  });

  it("SIGKILL while the worker checkpoints: integrity ok, and every commit that returned is there", async () => {
    const path = join(root, `case-${++counter}.sqlite`);
    const child = spawn(process.execPath, [join(import.meta.dirname, "checkpointer-child.mjs"), path], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let acked = 0;
    let checkpoints = 0;
    let stderr = "";
    let buffered = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        const [kind, value] = line.split(" ");
        if (kind === "n") acked = Number(value);
        if (kind === "c") checkpoints = Number(value);
      }
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once("exit", (_code, signal) => resolve(signal)),
    );
    await until(() => checkpoints >= 3 || child.exitCode !== null, `checkpoints in the child (${stderr})`);
    expect(child.exitCode, stderr).toBeNull();
    child.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");
    expect(acked).toBeGreaterThan(0);

    const db = new Database(path);
    try {
      expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      const { c, top } = db.prepare("SELECT count(*) AS c, max(n) AS top FROM acked").get() as {
        c: number;
        top: number;
      };
      // Every row whose commit returned, with no gap; at most the one in flight beyond.
      expect(top).toBeGreaterThanOrEqual(acked);
      expect(c).toBe(top);
    } finally {
      db.close();
    }
  }, 60_000);
});
