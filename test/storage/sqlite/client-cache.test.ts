/**
 * The SQLite store's client cache (src/storage/sqlite/client-cache.ts): a record is answered from
 * memory only while nothing can have changed it, so every change — by this store, by another
 * instance on the same file, by a purge — is seen by the very next lookup.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { MAX_CACHED_CLIENTS } from "../../../src/storage/client-records-kept.js";
import { createSqliteStore, type SqliteStore } from "../../../src/storage/sqlite/index.js";
import { client, T0 } from "../../../src/storage/testing/fixtures.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-client-cache-"));
let counter = 0;
const open: SqliteStore[] = [];
afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Two instances on one database file (as two `gatehouse serve` processes would be). */
async function twoInstances(): Promise<[SqliteStore, SqliteStore]> {
  const path = join(root, `case-${++counter}`, "gatehouse.sqlite");
  const first = createSqliteStore({ path });
  await first.migrate();
  const second = createSqliteStore({ path });
  await second.migrate();
  open.push(first, second);
  return [first, second];
}

/** Counts the client SELECTs a store prepares or runs (the cache answers without one). */
function countClientReads(store: SqliteStore): { reads: number } {
  const counted = { reads: 0 };
  const prepare = store.database.prepare.bind(store.database);
  store.database.prepare = ((text: string) => {
    const statement = prepare(text);
    if (!text.startsWith("SELECT * FROM clients WHERE")) return statement;
    const get = statement.get.bind(statement);
    statement.get = ((...params: unknown[]) => {
      counted.reads++;
      return get(...params);
    }) as typeof statement.get;
    return statement;
  }) as typeof store.database.prepare;
  return counted;
}

describe("SQLite client cache", () => {
  it("answers a repeated lookup without reading the table, with the same record", async () => {
    const [store] = await twoInstances();
    const counted = countClientReads(store);
    const record = client();
    await store.createClient(record);
    expect(await store.getClient(record.clientId)).toEqual(record);
    expect(await store.getClient(record.clientId)).toEqual(record);
    expect(await store.getClient(record.clientId)).toEqual(record);
    expect(counted.reads).toBe(1);
  });

  it("a client deleted by another instance is unknown to the next lookup here", async () => {
    const [here, there] = await twoInstances();
    const record = client({ source: "preregistered" });
    await here.createClient(record);
    expect(await here.getClient(record.clientId)).toBeDefined();
    expect(await there.deleteClient(record.clientId)).toBe(true);
    expect(await here.getClient(record.clientId)).toBeUndefined();
  });

  it("a client deleted by another connection in the same turn is unknown to the very next lookup", async () => {
    // Another connection in this process (a second instance, an admin tool) commits synchronously,
    // so its commit and the next request can fall in one macrotask with no I/O between them: the
    // cache must not skip the data_version check for lookups that follow one in the same turn.
    const [here] = await twoInstances();
    const record = client({ source: "preregistered" });
    await here.createClient(record);
    const other = new Database(here.database.name);
    try {
      expect(await here.getClient(record.clientId)).toBeDefined();
      expect(other.prepare("DELETE FROM clients WHERE client_id = ?").run(record.clientId).changes).toBe(1);
      expect(await here.getClient(record.clientId)).toBeUndefined();
      // Changed, then read again within one synchronous turn of the caller.
      await here.createClient(record);
      const first = here.getClient(record.clientId);
      other.prepare("UPDATE clients SET expires_at = ? WHERE client_id = ?").run(T0 + 7, record.clientId);
      const second = here.getClient(record.clientId);
      expect((await first)?.expiresAt).toBe(record.expiresAt);
      expect((await second)?.expiresAt).toBe(T0 + 7);
    } finally {
      other.close();
    }
  });

  it("a client changed by another instance is read again: new redirect URIs, lifted expiry", async () => {
    const [here, there] = await twoInstances();
    const record = client({ expiresAt: T0 + 1000 });
    await here.createClient(record);
    expect((await here.getClient(record.clientId))!.expiresAt).toBe(T0 + 1000);
    await there.upsertClient({ ...record, redirectUris: ["https://moved.example/cb"] });
    expect((await here.getClient(record.clientId))!.redirectUris).toEqual(["https://moved.example/cb"]);
    await there.markClientUsed(record.clientId, T0 + 5);
    const used = await here.getClient(record.clientId);
    expect(used!.expiresAt).toBeUndefined();
    expect(used!.lastUsedAt).toBe(T0 + 5);
  });

  it("this instance's own writes are seen at once: mark used, delete, purge of an unused registration", async () => {
    const [store] = await twoInstances();
    const used = client();
    const unused = client({ expiresAt: T0 + 10 });
    await store.createClient(used);
    await store.createClient(unused);
    expect(await store.getClient(used.clientId)).toBeDefined();
    expect(await store.getClient(unused.clientId)).toBeDefined();
    await store.markClientUsed(used.clientId, T0 + 1);
    expect((await store.getClient(used.clientId))!.lastUsedAt).toBe(T0 + 1);
    const purged = await store.purgeExpired(T0 + 10);
    expect(purged.clients).toBe(1);
    expect(await store.getClient(unused.clientId)).toBeUndefined();
    expect(await store.deleteClient(used.clientId)).toBe(true);
    expect(await store.getClient(used.clientId)).toBeUndefined();
  });

  it("an unknown id is not remembered: a client registered later (elsewhere) is found", async () => {
    const [here, there] = await twoInstances();
    const record = client();
    expect(await here.getClient(record.clientId)).toBeUndefined();
    await there.createClient(record);
    expect(await here.getClient(record.clientId)).toEqual(record);
  });

  it("a shared record cannot be changed by a caller", async () => {
    const [store] = await twoInstances();
    const record = client();
    await store.createClient(record);
    const first = await store.getClient(record.clientId);
    expect(() => {
      first!.redirectUris.push("https://attacker.example/cb");
    }).toThrow(TypeError);
    expect(() => {
      (first as { clientName?: string }).clientName = "changed";
    }).toThrow(TypeError);
    expect(await store.getClient(record.clientId)).toEqual(record);
  });

  it(`keeps at most ${MAX_CACHED_CLIENTS} records and still answers every client correctly`, async () => {
    const [store] = await twoInstances();
    const counted = countClientReads(store);
    const records = Array.from({ length: MAX_CACHED_CLIENTS + 5 }, () => client());
    for (const record of records) await store.createClient(record);
    for (const record of records) expect(await store.getClient(record.clientId)).toEqual(record);
    const readsAfterFilling = counted.reads;
    // The newest are still held; the first ones went first.
    expect(await store.getClient(records.at(-1)!.clientId)).toEqual(records.at(-1));
    expect(counted.reads).toBe(readsAfterFilling);
    expect(await store.getClient(records[0]!.clientId)).toEqual(records[0]);
    expect(counted.reads).toBe(readsAfterFilling + 1);
  });
});
