/**
 * Named prepared statements in the PostgreSQL pool (src/storage/postgres/pool.ts): statements with
 * parameters are parsed and planned once per connection, and a plan another instance's migration
 * made stale (a column added under a `SELECT *`) is prepared again instead of failing the request.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Db, openPool } from "../../../src/storage/postgres/pool.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../postgres-support.js";

const schemas = schemaNamer("gh_pgprep");
const pools: Db[] = [];
let other: pg.Client;

async function table(): Promise<string> {
  const schema = schemas.next();
  await other.query(`CREATE SCHEMA ${schema}`);
  await other.query(`CREATE TABLE ${schema}.t (id integer PRIMARY KEY, v integer NOT NULL)`);
  await other.query(`INSERT INTO ${schema}.t VALUES (1, 10)`);
  return schema;
}

/** One connection, so every statement runs where the last one was prepared. */
function open(schema: string, preparedStatements?: boolean): Db {
  const db = openPool({
    connectionString: POSTGRES_URL,
    schema,
    max: 1,
    ...(preparedStatements === undefined ? {} : { preparedStatements }),
  });
  pools.push(db);
  return db;
}

/** The statements the pool's connection holds prepared (read on that same connection). */
async function prepared(db: Db): Promise<string[]> {
  const rows = await db.query("SELECT statement FROM pg_prepared_statements WHERE name LIKE 'gh\\_%'");
  return rows.map((row) => String(row.statement));
}

beforeAll(async () => {
  await requirePostgres();
  other = new pg.Client({ connectionString: POSTGRES_URL });
  await other.connect();
});
afterAll(async () => {
  for (const db of pools) await db.pool.end();
  await other?.end();
  await schemas.dropSchemas();
});

describe("PostgreSQL prepared statements", () => {
  it("a statement with parameters is prepared once on its connection, in and out of transactions", async () => {
    const db = open(await table());
    for (let i = 0; i < 3; i++)
      expect(await db.query("SELECT v FROM t WHERE id = $1", [1])).toEqual([{ v: 10 }]);
    await db.transaction((tx) => tx.execute("UPDATE t SET v = $1 WHERE id = $2", [11, 1]));
    expect(await prepared(db)).toEqual(
      expect.arrayContaining(["SELECT v FROM t WHERE id = $1", "UPDATE t SET v = $1 WHERE id = $2"]),
    );
    expect(await prepared(db)).toHaveLength(2);
  });

  it("preparedStatements: false prepares nothing", async () => {
    const db = open(await table(), false);
    expect(await db.query("SELECT v FROM t WHERE id = $1", [1])).toEqual([{ v: 10 }]);
    expect(await prepared(db)).toEqual([]);
  });

  it("a plan made stale by a column another instance added runs again, prepared afresh", async () => {
    const schema = await table();
    const db = open(schema);
    expect(await db.query("SELECT * FROM t WHERE id = $1", [1])).toEqual([{ id: 1, v: 10 }]);
    await other.query(`ALTER TABLE ${schema}.t ADD COLUMN w integer NOT NULL DEFAULT 7`);
    // Without the retry: "cached plan must not change result type" (0A000).
    expect(await db.query("SELECT * FROM t WHERE id = $1", [1])).toEqual([{ id: 1, v: 10, w: 7 }]);
    await other.query(`ALTER TABLE ${schema}.t ADD COLUMN x integer NOT NULL DEFAULT 8`);
    const inTransaction = await db.transaction((tx) => tx.query("SELECT * FROM t WHERE id = $1", [1]));
    expect(inTransaction).toEqual([{ id: 1, v: 10, w: 7, x: 8 }]);
  });
});
