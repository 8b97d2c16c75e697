/**
 * PostgreSQL down, locked and read-only during `/token` (issue 5 "Faults and durability"): a clean
 * 503 `temporarily_unavailable`, no token issued, the code not consumed, never a fallback to
 * memory, and the same code redeems once the database is back.
 *
 * The machine's PostgreSQL server is never stopped (other tests use it): "down" is a TCP relay in
 * front of it that this file closes and reopens; "locked" and "read-only" act on a database of this
 * file's own. Disk full cannot be made safely on a shared server and is left to the SQLite file.
 * Needs 127.0.0.1:5432; fails saying so when it is not there.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresStore, type PostgresStore } from "../../src/storage/postgres/index.js";
import {
  codeHash,
  expectIssued,
  expectUnavailable,
  type FaultServer,
  startFaultServer,
} from "../support/fault-server.js";
import { createTestDatabase, type TestDatabase } from "../support/instances.js";

/** A TCP relay to 127.0.0.1:5432 that can be taken down (connections cut, port refusing) and back up. */
class Relay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  async up(): Promise<void> {
    const server = createServer((inbound) => {
      const outbound = createConnectionTo5432();
      this.sockets.add(inbound).add(outbound);
      inbound.pipe(outbound).pipe(inbound);
      const drop = () => {
        inbound.destroy();
        outbound.destroy();
        this.sockets.delete(inbound);
        this.sockets.delete(outbound);
      };
      inbound.on("error", drop).on("close", drop);
      outbound.on("error", drop).on("close", drop);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function createConnectionTo5432(): Socket {
  return createConnection({ host: "127.0.0.1", port: 5432 });
}

let db: TestDatabase;
let relay: Relay;
let store: PostgresStore;
let server: FaultServer;
/** A direct connection to this file's database, for locks and checks. */
let direct: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase("unavail");
  relay = new Relay();
  await relay.up();
  const url = new URL(db.url);
  url.port = String(relay.port);
  store = createPostgresStore({
    connectionString: url.href,
    statementTimeoutMs: 1000,
    connectionTimeoutMs: 1000,
    max: 4,
  });
  server = await startFaultServer(store);
  direct = new pg.Client({ connectionString: db.url });
  await direct.connect();
}, 60_000);

afterAll(async () => {
  await server?.close();
  await store?.close();
  await direct?.end().catch(() => {});
  await relay?.down();
  await db?.drop();
});

async function consumedAt(code: string): Promise<unknown> {
  const rows = await direct.query(
    "SELECT consumed_at FROM gatehouse.authorization_codes WHERE code_hash = $1",
    [codeHash(code)],
  );
  expect(rows.rowCount).toBe(1);
  return rows.rows[0].consumed_at;
}
async function accessTokenCount(): Promise<number> {
  // Grants, not access-token rows: no row is written per access token (storage contract version 2).
  return Number((await direct.query("SELECT count(*) AS n FROM gatehouse.grants")).rows[0].n);
}
/** Ends every session on this file's database except `direct` (the pool's, mostly). */
async function terminateOthers(): Promise<void> {
  await db.admin.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> $2",
    [db.name, (direct as unknown as { processID: number }).processID],
  );
}

async function duringOutage(breakIt: () => Promise<void>, repair: () => Promise<void>): Promise<void> {
  const obtained = await server.newCode();
  const tokensBefore = await accessTokenCount();
  await breakIt();
  let repaired = false;
  try {
    await expectUnavailable(await server.redeem(obtained));
    await expectUnavailable(await server.redeem(obtained));
    await repair();
    repaired = true;
  } finally {
    if (!repaired) await repair();
  }
  expect(await accessTokenCount()).toBe(tokensBefore);
  expect(await consumedAt(obtained.code)).toBeNull();
  await expectIssued(await server.redeem(obtained));
  expect(await accessTokenCount()).toBe(tokensBefore + 1);
}

describe("PostgreSQL unavailable during /token", () => {
  it("down (connections cut, port refusing): 503, then the code redeems when it is back", async () => {
    await duringOutage(
      () => relay.down(),
      () => relay.up(),
    );
  });

  it("refusing connections (ALLOW_CONNECTIONS false, sessions ended, as during maintenance): 503, then the code redeems", async () => {
    await duringOutage(
      async () => {
        await db.admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS false`);
        await terminateOthers();
      },
      async () => {
        await db.admin.query(`ALTER DATABASE ${db.name} ALLOW_CONNECTIONS true`);
      },
    );
  });

  it("locked (a table lock held past the statement timeout): 503, then the code redeems", async () => {
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await duringOutage(
        async () => {
          await locker.query("BEGIN");
          await locker.query("LOCK TABLE gatehouse.authorization_codes IN ACCESS EXCLUSIVE MODE");
        },
        async () => {
          await locker.query("ROLLBACK");
        },
      );
    } finally {
      await locker.end();
    }
  });

  it("read-only (default_transaction_read_only for new sessions): 503, then the code redeems", async () => {
    await duringOutage(
      async () => {
        await db.admin.query(`ALTER DATABASE ${db.name} SET default_transaction_read_only = on`);
        await terminateOthers();
      },
      async () => {
        await db.admin.query(`ALTER DATABASE ${db.name} RESET default_transaction_read_only`);
        await terminateOthers();
      },
    );
  });
});
