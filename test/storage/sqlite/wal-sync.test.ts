/**
 * The SQLite store's durable commit off the event loop (src/storage/sqlite/wal-sync.ts): under
 * `synchronous = NORMAL` a COMMIT does not sync, so a result may be released only after an fsync of
 * the WAL that started after it. These cases pin the order on the real file; the power cut itself is
 * test/faults/power-loss.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { client, T0 } from "../../../src/storage/testing/fixtures.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-walsync-"));
let counter = 0;
const freshPath = () => join(root, `case-${++counter}`, "gatehouse.sqlite");

afterAll(() => rmSync(root, { recursive: true, force: true }));

const user = (n: number) => ({
  id: `user-${n}`,
  username: `user${n}`,
  passwordHash: "x",
  isAdmin: false,
  createdAt: T0,
});

/** Runs `fn` in the check phase right after the group commit's own (queued before it). */
const afterTheBatch = <T>(fn: () => T) => new Promise<T>((resolve) => setImmediate(() => resolve(fn())));

describe("SQLite store under synchronous = NORMAL", () => {
  it("settles a write only after an fsync of the WAL that began after its COMMIT", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    const before = store.writeStats().walSyncs;
    const written = store.createUser(user(1));
    // The batch has committed (its row is visible to the connection) but nothing was synced yet.
    const seenCommitted = await afterTheBatch(() => ({
      row: store.database.prepare("SELECT id FROM users WHERE id = ?").get("user-1"),
      syncs: store.writeStats().walSyncs,
    }));
    expect(seenCommitted.row).toBeDefined();
    expect(seenCommitted.syncs).toBe(before);
    await written;
    expect(store.writeStats().walSyncs).toBeGreaterThan(before);
    await store.close();
  });

  it("settles a read of a committed but not yet synced write only after that write's fsync", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    const write = store.createUser(user(2));
    // Issued after the COMMIT, before its fsync completed: it reads the new row.
    const { read, syncsWhenRead } = await afterTheBatch(() => ({
      read: store.getUser("user-2").then((found) => ({ found, syncs: store.writeStats().walSyncs })),
      syncsWhenRead: store.writeStats().walSyncs,
    }));
    const { found, syncs } = await read;
    expect(found?.username).toBe("user2");
    // Released only after an fsync that completed after the read began.
    expect(syncs).toBeGreaterThan(syncsWhenRead);
    await write;
    await store.close();
  });

  it("makes a read that sees another connection's commit wait for an fsync that began after it", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    await store.migrate();
    await store.createClient(client({ clientId: "before" }));
    // Another process's commit under NORMAL: on the WAL, maybe not on disk.
    const other = new Database(path);
    other.pragma("synchronous = NORMAL");
    other.prepare("UPDATE users SET username = 'other' WHERE 0").run();
    other
      .prepare("INSERT INTO users (id, username, password_hash, is_admin, created_at) VALUES (?, ?, ?, 0, ?)")
      .run("user-3", "user3", "x", T0);
    const syncsBefore = store.writeStats().walSyncs;
    const found = await store.getUser("user-3");
    expect(found?.username).toBe("user3");
    expect(store.writeStats().walSyncs).toBeGreaterThan(syncsBefore);
    // Nothing new committed: the next read needs no fsync.
    const syncsAfter = store.writeStats().walSyncs;
    await store.getUser("user-3");
    expect(store.writeStats().walSyncs).toBe(syncsAfter);
    other.close();
    await store.close();
  });

  it("writes called while an fsync runs wait for it and commit together, each released by a later fsync", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    const writes: Promise<void>[] = [];
    const start = store.writeStats();
    for (let i = 0; i < 20; i++) {
      writes.push(store.createUser(user(100 + i)));
      await afterTheBatch(() => undefined);
    }
    await Promise.all(writes);
    const stats = store.writeStats();
    // Twenty writes in twenty macrotasks; those called while an fsync ran shared a commit after it
    // (how many did depends on the disk's speed: ./group-commit.test.ts pins the rule), and every
    // commit was synced before its writes were released.
    expect(stats.operations - start.operations).toBe(20);
    expect(stats.transactions - start.transactions).toBeLessThanOrEqual(20);
    expect(stats.walSyncs - start.walSyncs).toBeGreaterThanOrEqual(stats.transactions - start.transactions);
    expect((await store.listUsers()).length).toBe(20);
    await store.close();
  });

  it("settles a read of tables no unsynced commit changed without waiting for the fsync under way", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    await store.createClient(client({ clientId: "settled" }));
    await store.createUser(user(4));
    const write = store.createUser(user(5));
    // The users table has a commit not yet synced; the clients table has none.
    const { read, syncsWhenRead } = await afterTheBatch(() => ({
      read: Promise.all([
        store.getClient("settled").then(() => store.writeStats().walSyncs),
        store.getUser("user-4").then(() => store.writeStats().walSyncs),
      ]),
      syncsWhenRead: store.writeStats().walSyncs,
    }));
    const [clientSyncs, userSyncs] = await read;
    expect(clientSyncs).toBe(syncsWhenRead);
    expect(userSyncs).toBeGreaterThan(syncsWhenRead);
    await write;
    await store.close();
  });

  it("a cached client record written by an unsynced commit is released only after that commit's fsync", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    const write = store.upsertClient(client({ clientId: "fresh" }));
    const { reads, syncsWhenRead } = await afterTheBatch(() => ({
      // The first read loads (and caches) the record, the second is answered from the cache.
      reads: Promise.all(
        [1, 2].map(() =>
          store.getClient("fresh").then((found) => ({ found, syncs: store.writeStats().walSyncs })),
        ),
      ),
      syncsWhenRead: store.writeStats().walSyncs,
    }));
    for (const { found, syncs } of await reads) {
      expect(found?.clientId).toBe("fresh");
      expect(syncs).toBeGreaterThan(syncsWhenRead);
    }
    await write;
    await store.close();
  });
});
