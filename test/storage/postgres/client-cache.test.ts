/**
 * The PostgreSQL store's client cache (src/storage/postgres/client-cache.ts): a client changed or
 * deleted through this store is never answered from the cache, and one changed or deleted on
 * another instance is seen within the documented bound.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ClientRecord } from "../../../src/storage/contract.js";
import { CLIENT_CACHE_TTL_MS, createClientCache } from "../../../src/storage/postgres/client-cache.js";
import { createPostgresStore, type PostgresStore } from "../../../src/storage/postgres/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../postgres-support.js";

const schemas = schemaNamer("gh_pgclients");
const opened: PostgresStore[] = [];

function open(schema: string): PostgresStore {
  const store = createPostgresStore({ connectionString: POSTGRES_URL, schema, max: 2 });
  opened.push(store);
  return store;
}

beforeAll(requirePostgres);
afterAll(async () => {
  for (const store of opened) await store.close();
  await schemas.dropSchemas();
});

function client(clientId: string, clientName = "Cached"): ClientRecord {
  return {
    clientId,
    source: "preregistered",
    clientName,
    redirectUris: ["https://app.example/callback"],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: 1_767_225_600_000,
  };
}

describe("PostgreSQL client cache", () => {
  it("this instance's own writes are seen at once: upsert, mark used, delete", async () => {
    const store = open(schemas.next());
    await store.migrate();
    await store.createClient(client("own"));
    expect((await store.getClient("own"))?.clientName).toBe("Cached");
    await store.upsertClient(client("own", "Renamed"));
    expect((await store.getClient("own"))?.clientName).toBe("Renamed");
    await store.markClientUsed("own", 1_767_225_700_000);
    expect((await store.getClient("own"))?.lastUsedAt).toBe(1_767_225_700_000);
    expect(await store.deleteClient("own")).toBe(true);
    expect(await store.getClient("own")).toBeUndefined();
  });

  it("a client deleted on another instance stops being answered within the bound", async () => {
    const schema = schemas.next();
    const here = open(schema);
    const there = open(schema);
    await here.migrate();
    await here.createClient(client("elsewhere"));
    expect(await here.getClient("elsewhere")).toBeDefined();
    expect(await there.deleteClient("elsewhere")).toBe(true);
    // Past the bound, the next read goes to the database.
    await new Promise((r) => setTimeout(r, CLIENT_CACHE_TTL_MS + 50));
    expect(await here.getClient("elsewhere")).toBeUndefined();
  });

  it("an unknown id is read each time: a client created later is found at once", async () => {
    const schema = schemas.next();
    const here = open(schema);
    const there = open(schema);
    await here.migrate();
    expect(await here.getClient("later")).toBeUndefined();
    await there.createClient(client("later"));
    expect((await here.getClient("later"))?.clientId).toBe("later");
  });

  it("answers a record for at most the bound, counted from before the read; records are frozen", async () => {
    let now = 0;
    const cache = createClientCache(() => now);
    let reads = 0;
    const load = async () => {
      reads++;
      now += 10; // the read itself takes time
      return client("timed");
    };
    const first = await cache.get("timed", load);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first?.redirectUris)).toBe(true);
    now = CLIENT_CACHE_TTL_MS - 1;
    expect(await cache.get("timed", load)).toBe(first);
    expect(reads).toBe(1);
    now = CLIENT_CACHE_TTL_MS;
    await cache.get("timed", load);
    expect(reads).toBe(2);
  });

  it("a read that overlapped a write of the client is not kept", async () => {
    const cache = createClientCache(() => 0);
    let release!: () => void;
    const slow = cache.get("raced", async () => {
      await new Promise<void>((r) => {
        release = r;
      });
      return client("raced", "Before the write");
    });
    cache.forget("raced");
    release();
    expect((await slow)?.clientName).toBe("Before the write");
    let reads = 0;
    await cache.get("raced", async () => {
      reads++;
      return client("raced", "After the write");
    });
    expect(reads).toBe(1);
  });
});
