import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatehouseTypeError } from "../../../src/shared/errors.js";
import { StorageUnavailableError } from "../../../src/storage/contract.js";
import { createPostgresStore, type PostgresStore } from "../../../src/storage/postgres/index.js";
import { POSTGRES_MIGRATIONS } from "../../../src/storage/postgres/schema.js";
import { insertSql } from "../../../src/storage/sql/rows.js";
import { code, T0, tokens } from "../../../src/storage/testing/fixtures.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../postgres-support.js";
import { expectVersion1RowsMigrated, version1Rows } from "../version-1-rows.js";

const schemas = schemaNamer("gh_pgstore");
const opened: PostgresStore[] = [];
let admin: pg.Client;

function open(schema: string, extra: { max?: number; statementTimeoutMs?: number } = {}): PostgresStore {
  const store = createPostgresStore({ connectionString: POSTGRES_URL, schema, max: 2, ...extra });
  opened.push(store);
  return store;
}

beforeAll(async () => {
  await requirePostgres();
  admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
});
afterAll(async () => {
  for (const store of opened) await store.close();
  await admin?.end();
  await schemas.dropSchemas();
});

/** Waits until some backend is blocked by `lockerPid`'s lock; returns that backend's pid. */
async function blockedBy(lockerPid: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await admin.query(
      "SELECT pid FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))",
      [lockerPid],
    );
    if (rows[0]) return Number(rows[0].pid);
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("no Gatehouse backend ever waited on the lock");
}

describe("PostgreSQL store", () => {
  it("several instances migrating one new schema at once apply each migration once", async () => {
    const schema = schemas.next();
    const stores = Array.from({ length: 5 }, () => open(schema));
    await Promise.all(stores.map((s) => s.migrate()));
    await stores[0]!.migrate();
    const { rows } = await admin.query(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`);
    expect(rows).toEqual(POSTGRES_MIGRATIONS.map((m) => ({ version: m.version })));
  });

  for (const legacyVersion of [1, 2]) {
    it(`upgrades a version-${legacyVersion} schema in place: stored codes and interactions read redirectUriSent=true, stored grants take step-up requests and stay unbound, markers and device authorizations work`, async () => {
      const schema = schemas.next();
      const legacy = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` });
      await legacy.connect();
      const rows = version1Rows((value) => value);
      try {
        await legacy.query(`CREATE SCHEMA ${schema}`);
        await legacy.query(
          "CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)",
        );
        for (const migration of POSTGRES_MIGRATIONS.filter((m) => m.version <= legacyVersion)) {
          await legacy.query(migration.sql);
          await legacy.query("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", [
            migration.version,
            T0,
          ]);
        }
        for (const row of rows.inserts)
          await legacy.query(
            insertSql(row, (n) => `$${n}`),
            row.values,
          );
      } finally {
        await legacy.end();
      }

      const store = open(schema);
      await store.migrate();
      await expectVersion1RowsMigrated(store, rows);
    });
  }

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() =>
      createPostgresStore({ connectionString: POSTGRES_URL, schema: 'x"; DROP SCHEMA public; --' }),
    ).toThrow(GatehouseTypeError);
  });

  it("PostgreSQL unreachable: StorageUnavailableError", async () => {
    const store = createPostgresStore({
      connectionString: "postgres://postgres@127.0.0.1:1/test",
      schema: "gh_none",
    });
    try {
      await expect(store.migrate()).rejects.toBeInstanceOf(StorageUnavailableError);
      await expect(store.getClient("c")).rejects.toBeInstanceOf(StorageUnavailableError);
    } finally {
      await store.close();
    }
  });

  it("a statement timeout mid-redeem rolls back: StorageUnavailableError and the code is not consumed", async () => {
    const schema = schemas.next();
    const store = open(schema, { statementTimeoutMs: 300 });
    await store.migrate();
    const record = code();
    await store.insertAuthorizationCode(record);
    const locker = new pg.Client({ connectionString: POSTGRES_URL });
    await locker.connect();
    try {
      // The claim of the code succeeds; writing the refresh token then waits past the timeout (no
      // access-token row is written: storage contract version 2).
      await locker.query("BEGIN");
      await locker.query(`LOCK TABLE ${schema}.refresh_tokens IN ACCESS EXCLUSIVE MODE`);
      const error = await store
        .redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageUnavailableError);
    } finally {
      await locker.query("ROLLBACK");
      await locker.end();
    }
    const { rows } = await admin.query(
      `SELECT consumed_at FROM ${schema}.authorization_codes WHERE code_hash = $1`,
      [record.codeHash],
    );
    expect(rows).toEqual([{ consumed_at: null }]);
    expect(await store.getGrant(record.grantId)).toBeUndefined();
    const result = await store.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
    expect(result.status).toBe("issued");
  });

  it("the connection killed mid-redeem (admin shutdown, 57P01): StorageUnavailableError, code not consumed", async () => {
    const schema = schemas.next();
    const store = open(schema);
    await store.migrate();
    const record = code();
    await store.insertAuthorizationCode(record);
    const locker = new pg.Client({ connectionString: POSTGRES_URL });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query(`LOCK TABLE ${schema}.grants IN ACCESS EXCLUSIVE MODE`);
      const lockerPid = Number((await locker.query("SELECT pg_backend_pid() AS pid")).rows[0].pid);
      const pending = store
        .redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0))
        .catch((e: unknown) => e);
      const pid = await blockedBy(lockerPid);
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      expect(await pending).toBeInstanceOf(StorageUnavailableError);
    } finally {
      await locker.query("ROLLBACK");
      await locker.end();
    }
    // The pool replaces the dead connection; the code is still there, unconsumed.
    const result = await store.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
    expect(result.status).toBe("issued");
  });

  it("stores timestamps beyond 32 bits and returns numbers", async () => {
    const store = open(schemas.next());
    await store.migrate();
    const record = code({ createdAt: 8_000_000_000_000, expiresAt: 8_000_000_060_000 });
    await store.insertAuthorizationCode(record);
    const result = await store.redeemAuthorizationCode(
      record.codeHash,
      8_000_000_000_001,
      () => undefined,
      tokens(T0),
    );
    expect(result.status === "issued" && result.code.createdAt).toBe(8_000_000_000_000);
    expect(result.status === "issued" && typeof result.grant.createdAt).toBe("number");
  });
});
