/**
 * TEST-ONLY child for test/storage/sqlite/checkpointer.test.ts: commits one row per transaction
 * (BEGIN IMMEDIATE ... COMMIT, synchronous = FULL) with the WAL checkpointer's worker running, and
 * writes each row's number to stdout once its COMMIT returned ("n <number>"), and the checkpoints
 * the worker completed ("c <count>"). The test SIGKILLs it in the middle.
 * Usage: node test/storage/sqlite/checkpointer-child.mjs <database file>
 */
import { register } from "node:module";
import Database from "better-sqlite3";

register("../../support/typescript-hooks.mjs", import.meta.url);
const { createCheckpointer } = await import("../../../src/storage/sqlite/checkpointer.ts");

const path = process.argv[2];
const db = new Database(path);
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.exec("CREATE TABLE IF NOT EXISTS acked (n INTEGER PRIMARY KEY, filler BLOB NOT NULL)");
const checkpointer = createCheckpointer(db, path, 5000, { startAfterCommits: 1, intervalMs: 0 });
const insert = db.prepare("INSERT INTO acked (n, filler) VALUES (?, randomblob(3000))");
let n = 0;
let reported = 0;
function commitSome() {
  for (let i = 0; i < 4; i++) {
    db.exec("BEGIN IMMEDIATE");
    insert.run(++n);
    db.exec("COMMIT");
    checkpointer.committed();
    // Pipes are written synchronously on Linux: the test sees the number only after the commit.
    process.stdout.write(`n ${n}\n`);
  }
  const { checkpoints } = checkpointer.stats();
  if (checkpoints !== reported) {
    reported = checkpoints;
    process.stdout.write(`c ${checkpoints}\n`);
  }
  // A macrotask in between, so the worker's answers arrive.
  setImmediate(commitSome);
}
commitSome();
