/**
 * Issue 26: every PostgreSQL failure read "PostgreSQL unavailable (no connection)": a missing
 * database, an unknown role and a refused connection looked the same, and none named where it
 * tried. The error now carries PostgreSQL's own reason (or the driver's, for the network) and the
 * target (host, port, database, user), never the password. Against the real server on
 * 127.0.0.1:5432, in process and through the built CLI.
 */
import { describe, expect, it } from "vitest";
import { StorageUnavailableError } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { ensureBuilt, runCli } from "../cli/helpers.js";
import { requirePostgres } from "./postgres-support.js";

const SECRET = "pw-that-must-not-show-4711";

async function migrateFailure(connectionString: string): Promise<Error> {
  const store = createPostgresStore({ connectionString, connectionTimeoutMs: 3000 });
  try {
    await store.migrate();
  } catch (error) {
    return error as Error;
  } finally {
    await store.close().catch(() => {});
  }
  throw new Error("migrate() succeeded");
}

describe("PostgreSQL failures name the reason and the target", () => {
  it("a database that does not exist", async () => {
    await requirePostgres();
    const error = await migrateFailure(`postgres://postgres:${SECRET}@127.0.0.1:5432/no_such_database_26`);
    expect(error).toBeInstanceOf(StorageUnavailableError);
    expect(error.message).toContain('database "no_such_database_26" does not exist');
    expect(error.message).toContain("127.0.0.1:5432/no_such_database_26");
    expect(error.message).toContain("3D000");
    expect(error.message).not.toContain(SECRET);
  });

  it("a role that does not exist", async () => {
    const error = await migrateFailure(`postgres://nobody_26:${SECRET}@127.0.0.1:5432/test`);
    expect(error).toBeInstanceOf(StorageUnavailableError);
    expect(error.message).toContain('role "nobody_26" does not exist');
    expect(error.message).toContain("user nobody_26");
    expect(error.message).not.toContain(SECRET);
  });

  it("a refused connection names host and port", async () => {
    const error = await migrateFailure(`postgres://postgres:${SECRET}@127.0.0.1:1/test`);
    expect(error).toBeInstanceOf(StorageUnavailableError);
    expect(error.message).toContain("127.0.0.1:1/test");
    expect(error.message).toContain("ECONNREFUSED");
    expect(error.message).not.toContain(SECRET);
  });

  it("the CLI prints the same reason (users list --database-url), exit status 1, no password", async () => {
    ensureBuilt();
    const r = await runCli([
      "users",
      "list",
      "--database-url",
      `postgres://postgres:${SECRET}@127.0.0.1:5432/no_such_database_26`,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('database "no_such_database_26" does not exist');
    expect(r.stderr).toContain("127.0.0.1:5432/no_such_database_26");
    expect(r.stderr + r.stdout).not.toContain(SECRET);
  });
});
