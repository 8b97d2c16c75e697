/**
 * SIGKILL at chosen points of /token with PostgreSQL: the killed connection's transaction is rolled
 * back by the server; a restarted instance finds all-old or all-new. Needs 127.0.0.1:5432.
 */
import pg from "pg";
import { expect } from "vitest";
import { createTestDatabase } from "../support/instances.js";
import { crashSuite } from "./crash.js";

crashSuite("PostgreSQL", async () => {
  const db = await createTestDatabase("crash");
  const client = new pg.Client({ connectionString: db.url, options: "-c search_path=gatehouse" });
  await client.connect();
  return {
    database: { kind: "postgres", url: db.url },
    async sql(text, params = []) {
      return (await client.query(text, params)).rows as Record<string, unknown>[];
    },
    async integrity() {
      // The server rolls back the dead client's transaction when it sees the socket close: soon no
      // session of this database but ours may hold a transaction (and with it row locks) open.
      const openTransactions = async () =>
        Number(
          (
            await client.query(
              "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
              [db.name],
            )
          ).rows[0].n,
        );
      const deadline = Date.now() + 10_000;
      let open = await openTransactions();
      while (open > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        open = await openTransactions();
      }
      expect(open, "a transaction of the killed process is still open").toBe(0);
    },
    async cleanup() {
      await client.end();
      await db.drop();
    },
  };
});
