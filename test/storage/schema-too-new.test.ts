/**
 * Issue 26: an older binary started silently on a schema a newer version had migrated, and would
 * have misread it. `migrate()` now refuses a schema newer than the migrations it knows, with a
 * message saying so and what to do; nothing is changed. Real SQLite and PostgreSQL, in process
 * and through the built CLI.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { POSTGRES_MIGRATIONS } from "../../src/storage/postgres/schema.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { SQLITE_MIGRATIONS } from "../../src/storage/sqlite/schema.js";
import { ensureBuilt, runCli, tempDir } from "../cli/helpers.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "./postgres-support.js";

const FUTURE = 9999;
let dir: ReturnType<typeof tempDir>;
const schemas = schemaNamer("schema_too_new");

beforeAll(async () => {
  dir = tempDir("gatehouse-schema-too-new-");
  await requirePostgres();
});
afterAll(async () => {
  dir.remove();
  await schemas.dropSchemas();
});

async function failure(migrate: () => Promise<void>): Promise<Error & { code?: string }> {
  try {
    await migrate();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error("migrate() accepted a newer schema");
}

describe("a schema newer than this version knows", () => {
  it("SQLite: migrate() refuses, naming both versions and what to do; the CLI exits 1 with it", async () => {
    const path = join(dir.path, "gatehouse.sqlite");
    const first = createSqliteStore({ path });
    await first.migrate();
    await first.close();
    const db = new Database(path);
    db.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)").run(FUTURE, Date.now());
    db.close();

    const store = createSqliteStore({ path });
    const error = await failure(() => store.migrate());
    await store.close();
    expect(error.code).toBe("ERR_STORAGE_SCHEMA_TOO_NEW");
    const known = SQLITE_MIGRATIONS.at(-1)!.version;
    expect(error.message).toContain(`schema version ${FUTURE}`);
    expect(error.message).toContain(`knows up to ${known}`);
    expect(error.message).toContain("docs/deployment.md");

    ensureBuilt();
    const cli = await runCli(["users", "list", "--data", dir.path]);
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(`schema version ${FUTURE}`);
  });

  it("PostgreSQL: migrate() refuses the same way and applies nothing", async () => {
    const schema = schemas.next();
    const first = createPostgresStore({ connectionString: POSTGRES_URL, schema });
    await first.migrate();
    await first.close();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      await client.query(`INSERT INTO ${schema}.schema_migrations (version, applied_at) VALUES ($1, $2)`, [
        FUTURE,
        Date.now(),
      ]);
      const store = createPostgresStore({ connectionString: POSTGRES_URL, schema });
      const error = await failure(() => store.migrate());
      await store.close();
      expect(error.code).toBe("ERR_STORAGE_SCHEMA_TOO_NEW");
      expect(error.message).toContain(`schema version ${FUTURE}`);
      expect(error.message).toContain(`knows up to ${POSTGRES_MIGRATIONS.at(-1)!.version}`);
      const versions = await client.query(`SELECT count(*)::int AS n FROM ${schema}.schema_migrations`);
      expect(versions.rows[0].n).toBe(POSTGRES_MIGRATIONS.length + 1);
    } finally {
      await client.end();
    }
  });
});
