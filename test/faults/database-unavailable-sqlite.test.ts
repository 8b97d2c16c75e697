/**
 * SQLite locked, read-only and full during `/token` (issue 5 "Faults and durability"): a clean 503
 * `temporarily_unavailable`, no token issued, the code not consumed, never a fallback to memory,
 * and the same code redeems once the database is back.
 *
 * The database lives on a 2 MB tmpfs mounted for this file (needs root, as on the project's
 * machines), so "disk full" is a real ENOSPC; "locked" is a second connection's EXCLUSIVE
 * transaction held past the busy timeout; "read-only" is SQLITE_READONLY (see that test).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqliteStore, type SqliteStore } from "../../src/storage/sqlite/index.js";
import {
  codeHash,
  expectIssued,
  expectUnavailable,
  type FaultServer,
  startFaultServer,
} from "../support/fault-server.js";

const mountPoint = mkdtempSync(join(tmpdir(), "gatehouse-fault-fs-"));
const path = join(mountPoint, "gatehouse.sqlite");
let store: SqliteStore;
let server: FaultServer;

function mount(...options: string[]): void {
  execFileSync("mount", ["-t", "tmpfs", "-o", options.join(","), "tmpfs", mountPoint], { stdio: "pipe" });
}

beforeAll(async () => {
  try {
    mount("size=2m", "mode=0700");
  } catch (error) {
    throw new Error(
      `these tests mount a small tmpfs at ${mountPoint} to fill the disk, which needs root: ${(error as Error).message}`,
    );
  }
  store = createSqliteStore({ path, busyTimeoutMs: 300 });
  server = await startFaultServer(store);
});

afterAll(async () => {
  await server?.close();
  await store?.close();
  try {
    execFileSync("umount", [mountPoint], { stdio: "pipe" });
  } catch {}
  rmSync(mountPoint, { recursive: true, force: true });
});

function consumedAt(code: string): unknown {
  return (
    store.database
      .prepare("SELECT consumed_at FROM authorization_codes WHERE code_hash = ?")
      .get(codeHash(code)) as { consumed_at: unknown } | undefined
  )?.consumed_at;
}
function accessTokenCount(): number {
  // Grants, not access-token rows: no row is written per access token (storage contract version 2).
  return (store.database.prepare("SELECT count(*) AS n FROM grants").get() as { n: number }).n;
}

/** Breaks the database, asks for a token, repairs it and redeems the same code. */
async function duringOutage(breakIt: () => void, repair: () => void): Promise<void> {
  const obtained = await server.newCode();
  const tokensBefore = accessTokenCount();
  breakIt();
  let repaired = false;
  try {
    await expectUnavailable(await server.redeem(obtained));
    // A second try while still down: the same clean answer, nothing issued in the meantime.
    await expectUnavailable(await server.redeem(obtained));
    repair();
    repaired = true;
  } finally {
    if (!repaired) repair();
  }
  expect(accessTokenCount()).toBe(tokensBefore);
  expect(consumedAt(obtained.code)).toBeNull();
  await expectIssued(await server.redeem(obtained));
  expect(accessTokenCount()).toBe(tokensBefore + 1);
}

describe("SQLite unavailable during /token", () => {
  it("locked past the busy timeout by another connection's exclusive transaction: 503, then the code redeems", async () => {
    const other = new Database(path);
    try {
      await duringOutage(
        () => other.exec("BEGIN EXCLUSIVE"),
        () => other.exec("ROLLBACK"),
      );
    } finally {
      other.close();
    }
  });

  it("read-only database (SQLITE_READONLY on every write): 503, then the code redeems when writable again", async () => {
    // A read-only remount is refused while SQLite holds its files open for writing (EBUSY), and
    // root ignores file modes; `query_only` makes every write fail with SQLITE_READONLY, the error
    // a read-only file gives, on the very connection the server uses.
    await duringOutage(
      () => store.database.pragma("query_only = ON"),
      () => store.database.pragma("query_only = OFF"),
    );
  });

  it("disk full (ENOSPC on the tmpfs): 503, then the code redeems once space is freed", async () => {
    const filler = join(mountPoint, "filler");
    await duringOutage(
      () => {
        // An empty WAL, so the redemption must allocate new blocks; then take every free block.
        store.database.pragma("wal_checkpoint(TRUNCATE)");
        const chunk = Buffer.alloc(64 * 1024);
        let written = 0;
        try {
          for (;;) {
            writeFileSync(filler, chunk, { flag: "a" });
            written += chunk.length;
          }
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
        }
        // Smaller pieces fill the tail of the last block group.
        try {
          for (;;) writeFileSync(filler, Buffer.alloc(512), { flag: "a" });
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
        }
        expect(written).toBeGreaterThan(0);
      },
      () => rmSync(filler, { force: true }),
    );
  });
});
