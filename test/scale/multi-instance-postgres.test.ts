/**
 * Two `gatehouse serve` processes on one PostgreSQL database (issue 5 "Several instances"). Needs
 * the local PostgreSQL (127.0.0.1:5432, database `test`); fails saying so when it is not there.
 */
import { createTestDatabase } from "../support/instances.js";
import { multiInstanceSuite } from "./multi-instance.js";

multiInstanceSuite("PostgreSQL", async () => {
  const db = await createTestDatabase("multi");
  return { database: { kind: "postgres", url: db.url }, cleanup: () => db.drop() };
});
