/**
 * Table masks of the SQLite store (src/storage/sqlite/tables.ts): a read waits only for the commits
 * that changed a table it read, so a mask must cover every table a statement can read or change,
 * the tables a foreign-key action reaches included, and fall back to every table when unsure.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SQLITE_MIGRATIONS } from "../../../src/storage/sqlite/schema.js";
import { ALL_TABLES, createTableMasks } from "../../../src/storage/sqlite/tables.js";

function migrated(): Database.Database {
  const db = new Database(":memory:");
  for (const migration of SQLITE_MIGRATIONS) db.exec(migration.sql);
  return db;
}

describe("SQLite table masks", () => {
  it("a statement covers the tables it names, and only those", () => {
    const db = migrated();
    const masks = createTableMasks(db);
    const clients = masks.of("SELECT * FROM clients WHERE client_id = ?");
    const users = masks.of("SELECT * FROM users WHERE id = ?");
    expect(clients).not.toBe(ALL_TABLES);
    expect(clients & users).toBe(0);
    // Column names that contain a table's name (client_id, user_id, grant_id) are not tables.
    const sessions = masks.of("SELECT * FROM sessions WHERE id_hash = ? AND user_id = ?");
    expect(sessions & users).toBe(0);
    expect(masks.of("UPDATE refresh_tokens SET rotated_at = ? WHERE token_hash = ? AND grant_id = ?")).toBe(
      masks.of("SELECT * FROM refresh_tokens"),
    );
    // A statement naming two tables covers both.
    const both = masks.of("DELETE FROM upstream_token_sets WHERE holder IN (SELECT grant_id FROM grants)");
    expect(both & masks.of("SELECT * FROM upstream_token_sets")).not.toBe(0);
    expect(both & masks.of("SELECT * FROM grants")).not.toBe(0);
    db.close();
  });

  it("a change to a parent table covers the children its foreign keys reach (ON DELETE CASCADE)", () => {
    const db = migrated();
    const masks = createTableMasks(db);
    const deleteGrant = masks.of("DELETE FROM grants WHERE grant_id = ?");
    expect(deleteGrant & masks.of("SELECT * FROM refresh_tokens WHERE token_hash = ?")).not.toBe(0);
    expect(deleteGrant & masks.of("SELECT * FROM access_tokens WHERE jti = ?")).not.toBe(0);
    expect(deleteGrant & masks.of("SELECT * FROM clients WHERE client_id = ?")).toBe(0);
    db.close();
  });

  it("every table when a statement names none it knows, when the schema has a trigger or a view, or before the tables exist", () => {
    const db = migrated();
    const masks = createTableMasks(db);
    expect(masks.of("SELECT 1")).toBe(ALL_TABLES);
    expect(masks.of("SELECT * FROM not_a_table")).toBe(ALL_TABLES);
    db.exec(
      "CREATE TRIGGER audit AFTER INSERT ON users BEGIN UPDATE clients SET last_used_at = 0 WHERE 0; END",
    );
    masks.reset();
    expect(masks.of("INSERT INTO users (id) VALUES (?)")).toBe(ALL_TABLES);
    db.exec("DROP TRIGGER audit; CREATE VIEW names AS SELECT username FROM users");
    masks.reset();
    expect(masks.of("SELECT * FROM users")).toBe(ALL_TABLES);
    db.close();
    const empty = new Database(":memory:");
    expect(createTableMasks(empty).of("SELECT * FROM clients")).toBe(ALL_TABLES);
    empty.close();
  });
});
