/** PostgreSQL for storage tests: a unique schema per store, dropped at the end of the file. */

import pg from "pg";
import { randomToken } from "../../src/shared/crypto.js";

export const POSTGRES_URL = process.env.GATEHOUSE_TEST_POSTGRES ?? "postgres://postgres@127.0.0.1:5432/test";

/** Fails with a message naming what could not be reached (the suite needs a real server). */
export async function requirePostgres(): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `PostgreSQL is not reachable at 127.0.0.1:5432 (database "test", user "postgres"): ${reason}. ` +
        "Start it (scripts/ensure-test-services.sh) before running the storage tests.",
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/** A fresh schema name for one test; remembered so {@link dropSchemas} can remove it. */
export function schemaNamer(prefix: string): { next(): string; dropSchemas(): Promise<void> } {
  const created: string[] = [];
  return {
    next() {
      const name = `${prefix}_${randomToken(6)
        .toLowerCase()
        .replace(/[^a-z0-9]/g, "x")}`;
      created.push(name);
      return name;
    },
    async dropSchemas() {
      if (created.length === 0) return;
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      try {
        for (const name of created) await client.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}
