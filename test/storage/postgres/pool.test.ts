import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StorageConflictError, StorageUnavailableError } from "../../../src/storage/contract.js";
import { type Db, openPool, translate } from "../../../src/storage/postgres/pool.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../postgres-support.js";

const schemas = schemaNamer("gh_pgpool");
let schema: string;
let db: Db;
let other: pg.Client;

beforeAll(async () => {
  await requirePostgres();
  schema = schemas.next();
  other = new pg.Client({ connectionString: POSTGRES_URL });
  await other.connect();
  await other.query(`CREATE SCHEMA ${schema}`);
  await other.query(`CREATE TABLE ${schema}.t (id integer PRIMARY KEY, v integer NOT NULL)`);
  await other.query(`INSERT INTO ${schema}.t VALUES (1, 0), (2, 0)`);
  db = openPool({ connectionString: POSTGRES_URL, schema, max: 2 });
});
afterAll(async () => {
  await db?.pool.end();
  await other?.end();
  await schemas.dropSchemas();
});

describe("PostgreSQL transactions", () => {
  it("a transaction chosen as deadlock victim (40P01) is run again and commits", async () => {
    await other.query("BEGIN");
    // The other session waits long before looking for deadlocks, so ours is the one aborted.
    await other.query("SET LOCAL deadlock_timeout = '20s'");
    await other.query(`UPDATE ${schema}.t SET v = v + 1 WHERE id = 2`);
    let attempts = 0;
    let otherDone: Promise<unknown> | undefined;
    const result = await db.transaction(async (tx) => {
      attempts++;
      await tx.execute("UPDATE t SET v = v + 10 WHERE id = 1");
      if (attempts === 1) {
        // The other session now wants row 1 (ours) while we want row 2 (theirs): a deadlock,
        // whichever request reaches the server first.
        otherDone = other
          .query(`UPDATE ${schema}.t SET v = v + 1 WHERE id = 1`)
          .then(() => other.query("COMMIT"));
      }
      await tx.execute("UPDATE t SET v = v + 10 WHERE id = 2");
      return attempts;
    });
    await otherDone;
    // At least one retry. Under load there may be two: when our aborted attempt releases row 1,
    // the other backend may not have run yet, so our next attempt can take row 1 first and be
    // the deadlock victim again (PostgreSQL wakes tuple-lock waiters without reserving the row).
    expect(result).toBeGreaterThanOrEqual(2);
    expect(result).toBeLessThanOrEqual(5);
    const { rows } = await other.query(`SELECT id, v FROM ${schema}.t ORDER BY id`);
    // Each session's increments applied exactly once.
    expect(rows).toEqual([
      { id: 1, v: 11 },
      { id: 2, v: 11 },
    ]);
  });

  it("errors thrown by the caller roll back and are not retried", async () => {
    let attempts = 0;
    await expect(
      db.transaction(async (tx) => {
        attempts++;
        await tx.execute("UPDATE t SET v = 100 WHERE id = 1");
        throw new Error("caller failure");
      }),
    ).rejects.toThrow("caller failure");
    expect(attempts).toBe(1);
    const { rows } = await other.query(`SELECT v FROM ${schema}.t WHERE id = 1`);
    expect(rows[0].v).not.toBe(100);
  });

  it("maps driver errors to the contract's error types", () => {
    const withCode = (code: string) => Object.assign(new Error("driver"), { code });
    expect(translate(withCode("23505"))).toBeInstanceOf(StorageConflictError);
    for (const code of ["ECONNREFUSED", "57P01", "08006", "53100", "57014", "40001", "40P01"]) {
      expect(translate(withCode(code)), code).toBeInstanceOf(StorageUnavailableError);
    }
    expect(translate(new Error("Connection terminated unexpectedly"))).toBeInstanceOf(
      StorageUnavailableError,
    );
    const plain = withCode("22P02");
    expect(translate(plain)).toBe(plain);
  });
});
