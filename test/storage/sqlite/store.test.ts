import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { StorageUnavailableError } from "../../../src/storage/contract.js";
import { insertSql } from "../../../src/storage/sql/rows.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { SQLITE_MIGRATIONS } from "../../../src/storage/sqlite/schema.js";
import { code, interaction, T0, tokens } from "../../../src/storage/testing/fixtures.js";
import { expectVersion1RowsMigrated, version1Rows } from "../version-1-rows.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-sqlite-"));
let counter = 0;
const freshPath = () => join(root, `case-${++counter}`, "nested", "gatehouse.sqlite");

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("SQLite store", () => {
  it("creates a private directory (0700) and file (0600)", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    await store.migrate();
    await store.close();
    expect(statSync(join(path, "..")).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it("runs in WAL mode with synchronous=NORMAL and its own WAL fsync (FULL on request), foreign keys on, a busy timeout and temporary storage in memory", async () => {
    const path = freshPath();
    const full = createSqliteStore({ path: freshPath(), synchronous: "full" });
    await full.migrate();
    // synchronous: 2 = FULL (each COMMIT syncs the WAL), no fsync of ours.
    expect(full.database.pragma("synchronous", { simple: true })).toBe(2);
    expect(full.writeStats().walSyncs).toBe(0);
    await full.close();
    const store = createSqliteStore({ path, busyTimeoutMs: 1234 });
    await store.migrate();
    expect(store.database.pragma("journal_mode", { simple: true })).toBe("wal");
    // synchronous: 1 = NORMAL; the migration settled only after an fsync of the WAL (wal-sync.ts),
    // so a committed grant survives power loss (test/faults/power-loss.test.ts).
    expect(store.database.pragma("synchronous", { simple: true })).toBe(1);
    expect(store.writeStats().walSyncs).toBeGreaterThan(0);
    expect(store.database.pragma("foreign_keys", { simple: true })).toBe(1);
    expect(store.database.pragma("busy_timeout", { simple: true })).toBe(1234);
    // 2 = MEMORY: savepoint journals never spill to temporary files (group-commit.test.ts).
    expect(store.database.pragma("temp_store", { simple: true })).toBe(2);
    await store.close();
  });

  it("records applied migrations once, even when several instances migrate the same file", async () => {
    const path = freshPath();
    const stores = [createSqliteStore({ path }), createSqliteStore({ path }), createSqliteStore({ path })];
    await Promise.all(stores.map((s) => s.migrate()));
    await stores[0]!.migrate();
    const db = new Database(path, { readonly: true });
    const versions = db.prepare("SELECT version FROM schema_migrations ORDER BY version").all();
    db.close();
    expect(versions).toEqual(SQLITE_MIGRATIONS.map((m) => ({ version: m.version })));
    for (const s of stores) await s.close();
  });

  for (const legacyVersion of [1, 2]) {
    it(`upgrades a version-${legacyVersion} file in place: stored codes and interactions read redirectUriSent=true, stored grants take step-up requests and stay unbound, markers and device authorizations work`, async () => {
      const path = freshPath();
      mkdirSync(dirname(path), { recursive: true });
      const legacy = new Database(path);
      legacy.exec(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
      );
      for (const migration of SQLITE_MIGRATIONS.filter((m) => m.version <= legacyVersion)) {
        legacy.exec(migration.sql);
        legacy
          .prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)")
          .run(migration.version, T0);
      }
      const rows = version1Rows((value) => (value ? 1 : 0));
      for (const row of rows.inserts) legacy.prepare(insertSql(row, () => "?")).run(...row.values);
      legacy.close();

      const store = createSqliteStore({ path });
      await store.migrate();
      await expectVersion1RowsMigrated(store, rows);
      await store.close();
    });
  }

  it("keeps data across reopen", async () => {
    const path = freshPath();
    const first = createSqliteStore({ path });
    await first.migrate();
    const record = code();
    await first.insertAuthorizationCode(record);
    await first.close();
    const second = createSqliteStore({ path });
    await second.migrate();
    const result = await second.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
    expect(result.status).toBe("issued");
    await second.close();
  });

  it("locked by another connection beyond the busy timeout: StorageUnavailableError, code not consumed", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, busyTimeoutMs: 50 });
    await store.migrate();
    const record = code();
    await store.insertAuthorizationCode(record);
    const other = new Database(path);
    other.exec("BEGIN IMMEDIATE");
    try {
      const error = await store
        .redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageUnavailableError);
      await expect(store.createInteraction(interaction())).rejects.toBeInstanceOf(StorageUnavailableError);
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }
    const result = await store.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
    expect(result.status).toBe("issued");
    await store.close();
  });

  it("read-only database: reads work, writes fail with StorageUnavailableError and change nothing", async () => {
    const path = freshPath();
    const writer = createSqliteStore({ path });
    await writer.migrate();
    const record = code();
    await writer.insertAuthorizationCode(record);
    const reader = createSqliteStore({ path, readonly: true });
    await expect(reader.getGrant(record.grantId)).resolves.toBeUndefined();
    await expect(
      reader.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0)),
    ).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(reader.hitRateLimit("k", T0, 1000)).rejects.toBeInstanceOf(StorageUnavailableError);
    await reader.close();
    const result = await writer.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
    expect(result.status).toBe("issued");
    await writer.close();
  });

  it("a path that cannot be opened fails with StorageUnavailableError", () => {
    const file = join(root, `plain-file-${++counter}`);
    writeFileSync(file, "not a directory");
    chmodSync(file, 0o600);
    expect(() => createSqliteStore({ path: join(file, "gatehouse.sqlite") })).toThrow(
      StorageUnavailableError,
    );
    const notDb = join(root, `garbage-${++counter}.sqlite`);
    writeFileSync(notDb, "x".repeat(4096));
    expect(() => {
      const store = createSqliteStore({ path: notDb });
      return store;
    }).toThrow(StorageUnavailableError);
  });

  it("finds a sign-in's active grants through the index of active grants, not every grant of the user", async () => {
    // The read superseded grants make after every approved flow (grants/superseded-grants.ts).
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    const prepare = store.database.prepare.bind(store.database);
    const texts: string[] = [];
    store.database.prepare = ((text: string) => {
      texts.push(text);
      return prepare(text);
    }) as typeof store.database.prepare;
    await store.listGrants({ userId: "u", clientId: "c", resource: "r", sessionHash: "s", active: true });
    store.database.prepare = prepare;
    const [text] = texts.filter((t) => t.includes("FROM grants"));
    const plan = store.database
      .prepare(`EXPLAIN QUERY PLAN ${text}`)
      .all({ userId: "u", clientId: "c", resource: "r", sessionHash: "s" }) as { detail: string }[];
    expect(plan.map((row) => row.detail).join("\n")).toMatch(
      /USING INDEX grants_active_by_session \(user_id=\? AND session_hash=\?\)/,
    );
    await store.close();
  });

  it("a closed store fails with StorageUnavailableError", async () => {
    const store = createSqliteStore({ path: freshPath() });
    await store.migrate();
    await store.close();
    await expect(store.getClient("x")).rejects.toBeInstanceOf(StorageUnavailableError);
  });
});
