/**
 * Group commit of the SQLite store (src/storage/sqlite/group-commit.ts): the writes called in one
 * macrotask share one transaction and one durable commit, each in its own savepoint, and none
 * settles before that commit. Batches are formed here by calling several operations without
 * awaiting in between, as concurrent requests do.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { OAuthError } from "../../../src/shared/errors.js";
import { StorageConflictError, StorageUnavailableError } from "../../../src/storage/contract.js";
import { createGroupCommit, MAX_BATCH } from "../../../src/storage/sqlite/group-commit.js";
import { createSqliteStore, type SqliteStore } from "../../../src/storage/sqlite/index.js";
import type { WalSync } from "../../../src/storage/sqlite/wal-sync.js";
import {
  client,
  code,
  id,
  session,
  signingKey,
  T0,
  tally,
  tokens,
} from "../../../src/storage/testing/fixtures.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-sqlite-group-"));
let counter = 0;
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function openStore(): Promise<{ store: SqliteStore; path: string }> {
  const path = join(root, `case-${++counter}.sqlite`);
  const store = createSqliteStore({ path });
  await store.migrate();
  return { store, path };
}

/** Reads through a separate connection, which sees only what is committed. */
function committed<T>(path: string, sql: string, ...params: unknown[]): T | undefined {
  const peer = new Database(path, { readonly: true });
  try {
    return peer.prepare(sql).get(...params) as T | undefined;
  } finally {
    peer.close();
  }
}

const codeRow = (path: string, hash: string) =>
  committed<{ consumed_at: number | null }>(
    path,
    "SELECT consumed_at FROM authorization_codes WHERE code_hash = ?",
    hash,
  );

const pass = () => undefined;

describe("SQLite group commit", () => {
  it("writes called together share one commit; a refusal keeps its consume, a failing redemption undoes only its own writes", async () => {
    const { store, path } = await openStore();
    const [ok1, refused, crashing, clashing, ok2] = [code(), code(), code(), code(), code()];
    for (const record of [ok1, refused, crashing, clashing, ok2]) await store.insertAuthorizationCode(record);
    // A refresh token hash already taken: that redemption fails after it has consumed its code.
    const taken = tokens(T0);
    await store.redeemAuthorizationCode(ok1.codeHash, T0, pass, taken);
    const ok1Again = code();
    await store.insertAuthorizationCode(ok1Again);
    const before = store.writeStats();
    const refusal = new OAuthError("invalid_grant", { description: "PKCE verification failed" });
    const results = await Promise.allSettled([
      store.redeemAuthorizationCode(ok1Again.codeHash, T0, pass, tokens(T0)),
      store.redeemAuthorizationCode(refused.codeHash, T0, () => refusal, tokens(T0)),
      store.redeemAuthorizationCode(
        crashing.codeHash,
        T0,
        () => {
          throw new Error("check crashed");
        },
        tokens(T0),
      ),
      store.redeemAuthorizationCode(clashing.codeHash, T0, pass, {
        ...tokens(T0),
        refreshToken: taken.refreshToken!,
      }),
      store.redeemAuthorizationCode(ok2.codeHash, T0, pass, tokens(T0)),
    ]);
    const after = store.writeStats();
    expect(after.transactions - before.transactions).toBe(1);
    expect(after.operations - before.operations).toBe(5);

    expect(results.map((r) => (r.status === "fulfilled" ? r.value.status : "rejected"))).toEqual([
      "issued",
      "refused",
      "rejected",
      "rejected",
      "issued",
    ]);
    expect((results[2] as PromiseRejectedResult).reason).toEqual(new Error("check crashed"));
    expect((results[3] as PromiseRejectedResult).reason).toBeInstanceOf(StorageConflictError);
    // OAuth 2.1 §4.1.3 single use: the refused attempt consumed its code in the same commit.
    expect(codeRow(path, refused.codeHash)?.consumed_at).toBe(T0);
    expect(codeRow(path, ok1Again.codeHash)?.consumed_at).toBe(T0);
    expect(codeRow(path, ok2.codeHash)?.consumed_at).toBe(T0);
    expect(await store.getGrant(ok1Again.grantId)).toBeDefined();
    expect(await store.getGrant(ok2.grantId)).toBeDefined();
    expect(await store.getGrant(refused.grantId)).toBeUndefined();
    // The crashed redemption's savepoint was rolled back: its code is still unused.
    expect(codeRow(path, crashing.codeHash)?.consumed_at).toBeNull();
    expect(await store.getGrant(crashing.grantId)).toBeUndefined();
    // The clashing one consumed its code and inserted its grant before failing; both were undone.
    expect(codeRow(path, clashing.codeHash)?.consumed_at).toBeNull();
    expect(await store.getGrant(clashing.grantId)).toBeUndefined();
    for (const record of [crashing, clashing]) {
      const retry = await store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1));
      expect(retry.status).toBe("issued");
    }
    await store.close();
  });

  it("no write settles before it is committed: another connection sees each one when its promise resolves", async () => {
    const { store, path } = await openStore();
    const records = Array.from({ length: 10 }, () => code());
    const visibleAtResolve = await Promise.all(
      records.map((record) =>
        store.insertAuthorizationCode(record).then(() => codeRow(path, record.codeHash) !== undefined),
      ),
    );
    expect(visibleAtResolve).toEqual(records.map(() => true));
    await store.close();
  });

  it("signing-key swaps join the batch like any write, and each is committed when it resolves", async () => {
    const { store, path } = await openStore();
    const [swapped, kept] = [signingKey(), signingKey()];
    for (const key of [swapped, kept]) await store.addSigningKey(key);
    const next = { enc: "A256GCM", kek: id("kek"), iv: id("iv"), ct: id("ct"), tag: id("tag") };
    const storedJwk = (kid: string) =>
      JSON.parse(
        committed<{ private_jwk: string }>(path, "SELECT private_jwk FROM signing_keys WHERE kid = ?", kid)!
          .private_jwk,
      ) as unknown;
    const before = store.writeStats();
    const results = await Promise.all([
      store.replaceSigningKeyPrivateJwk(swapped.kid, swapped.privateJwk, next).then((replaced) => ({
        replaced,
        visible: storedJwk(swapped.kid),
      })),
      store.replaceSigningKeyPrivateJwk(kept.kid, swapped.privateJwk, next),
      store.createSession(session()),
    ]);
    const after = store.writeStats();
    expect(after.transactions - before.transactions).toBe(1);
    expect(after.operations - before.operations).toBe(3);
    expect(results.slice(0, 2)).toEqual([{ replaced: true, visible: next }, false]);
    expect(storedJwk(kept.kid)).toEqual(kept.privateJwk);
    await store.close();
  });

  it("a failed COMMIT rejects every write of the batch with StorageUnavailableError and changes nothing", async () => {
    const { store, path } = await openStore();
    const redeemable = code();
    await store.insertAuthorizationCode(redeemable);
    // A deferred foreign key is checked only at COMMIT: inserting a code of client "poison" makes
    // the statement succeed and the whole transaction's COMMIT fail.
    store.database.exec(`
      CREATE TABLE poison (grant_id TEXT REFERENCES grants (grant_id) DEFERRABLE INITIALLY DEFERRED);
      CREATE TRIGGER poison_commit AFTER INSERT ON authorization_codes WHEN NEW.client_id = 'poison'
      BEGIN INSERT INTO poison VALUES ('no such grant'); END;`);
    const fresh = code();
    const browser = session();
    const before = store.writeStats();
    const results = await Promise.allSettled([
      store.insertAuthorizationCode(fresh),
      store.redeemAuthorizationCode(redeemable.codeHash, T0, pass, tokens(T0)),
      store.createSession(browser),
      store.insertAuthorizationCode(code({ clientId: "poison" })),
    ]);
    expect(store.writeStats().transactions - before.transactions).toBe(1);
    for (const result of results) {
      expect(result.status).toBe("rejected");
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageUnavailableError);
    }
    expect(store.database.inTransaction).toBe(false);
    expect(codeRow(path, fresh.codeHash)).toBeUndefined();
    expect(codeRow(path, redeemable.codeHash)?.consumed_at).toBeNull();
    expect(await store.getSession(browser.idHash, T0)).toBeUndefined();
    expect(await store.getGrant(redeemable.grantId)).toBeUndefined();

    // The store goes on: the next batch without the poison commits.
    const [redeemed] = await Promise.all([
      store.redeemAuthorizationCode(redeemable.codeHash, T0 + 1, pass, tokens(T0 + 1)),
      store.insertAuthorizationCode(fresh),
    ]);
    expect(redeemed.status).toBe("issued");
    expect(codeRow(path, fresh.codeHash)).toBeDefined();
    await store.close();
  });

  it("a write that makes SQLite roll back the whole transaction (database full) fails the writes before it; later ones run in the next batch", async () => {
    const { store, path } = await openStore();
    const earlier = code();
    const later = code();
    // SQLITE_FULL at the page limit rolls the transaction back, as a full disk does.
    const pages = Number(store.database.pragma("page_count", { simple: true }));
    store.database.pragma(`max_page_count = ${pages}`);
    const huge = client({ metadata: { padding: "x".repeat(1 << 20) } });
    const results = await Promise.allSettled([
      store.insertAuthorizationCode(earlier),
      store.createClient(huge),
      store.insertAuthorizationCode(later),
    ]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected", "fulfilled"]);
    for (const result of results.slice(0, 2)) {
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageUnavailableError);
    }
    expect(codeRow(path, earlier.codeHash)).toBeUndefined();
    expect(await store.getClient(huge.clientId)).toBeUndefined();
    expect(codeRow(path, later.codeHash)).toBeDefined();
    await store.close();
  });

  it("the connection closing in the middle of a batch fails every write of it and commits none", async () => {
    const { store, path } = await openStore();
    const [first, second, third] = [code(), code(), code()];
    for (const record of [first, second, third]) await store.insertAuthorizationCode(record);
    const results = await Promise.allSettled([
      store.redeemAuthorizationCode(first.codeHash, T0, pass, tokens(T0)),
      store.redeemAuthorizationCode(
        second.codeHash,
        T0,
        () => {
          store.database.close();
          return undefined;
        },
        tokens(T0),
      ),
      store.redeemAuthorizationCode(third.codeHash, T0, pass, tokens(T0)),
    ]);
    for (const result of results) {
      expect(result.status).toBe("rejected");
      expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageUnavailableError);
    }
    for (const record of [first, second, third]) {
      expect(codeRow(path, record.codeHash)?.consumed_at).toBeNull();
    }
    await store.close();
  });

  it(`exactly one of ${2 * MAX_BATCH + 8} parallel redemptions of one code is issued across several batches`, async () => {
    const { store } = await openStore();
    const record = code();
    await store.insertAuthorizationCode(record);
    const attempts = 2 * MAX_BATCH + 8;
    const before = store.writeStats();
    const results = await Promise.all(
      Array.from({ length: attempts }, () =>
        store.redeemAuthorizationCode(record.codeHash, T0 + 1, pass, tokens(T0 + 1)),
      ),
    );
    expect(tally(results)).toEqual({ issued: 1, replayed: attempts - 1 });
    // The batch size is capped: three transactions, not one.
    expect(store.writeStats().transactions - before.transactions).toBe(3);
    expect((await store.getGrant(record.grantId))?.revokedAt).toBe(T0 + 1);
    await store.close();
  });

  it("an operation that changed more pages than a savepoint journal holds before spilling is undone alone", async () => {
    // SQLite spills a savepoint's journal past 64 KiB (16 pages of 4 KiB); the store keeps it in
    // memory (temp_store=MEMORY). A failing operation that rewrote far more than that must still be
    // rolled back to its savepoint while the batch's other operations commit.
    const { store, path } = await openStore();
    const db = store.database;
    db.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, body BLOB NOT NULL)");
    const fill = db.prepare("INSERT INTO filler (id, body) VALUES (?, ?)");
    for (let i = 0; i < 200; i++) fill.run(i, Buffer.alloc(3000, 1));
    const group = createGroupCommit(db);
    const rewrite = db.prepare("UPDATE filler SET body = ? WHERE id = ?");
    const kept = code();
    const results = await Promise.allSettled([
      group.write(() => {
        for (let i = 0; i < 200; i++) rewrite.run(Buffer.alloc(3000, 2), i);
        throw new Error("failed after rewriting ~600 KiB");
      }),
      group.write(
        () => db.prepare("UPDATE filler SET body = ? WHERE id = 7").run(Buffer.alloc(3000, 3)).changes,
      ),
    ]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "fulfilled"]);
    expect(group.stats().transactions).toBe(1);
    const bodies = new Database(path, { readonly: true });
    try {
      const rows = bodies.prepare("SELECT id, body FROM filler ORDER BY id").all() as {
        id: number;
        body: Buffer;
      }[];
      expect(rows).toHaveLength(200);
      for (const row of rows) expect(row.body[0]).toBe(row.id === 7 ? 3 : 1);
    } finally {
      bodies.close();
    }
    await store.insertAuthorizationCode(kept);
    expect(codeRow(path, kept.codeHash)).toBeDefined();
    await store.close();
  });

  it("close commits the writes already called", async () => {
    const { store, path } = await openStore();
    const record = code({ clientId: id("client") });
    const pending = store.insertAuthorizationCode(record);
    await store.close();
    await pending;
    expect(codeRow(path, record.codeHash)).toBeDefined();
    await expect(store.insertAuthorizationCode(code())).rejects.toBeInstanceOf(StorageUnavailableError);
  });
});

/**
 * A WAL fsync the test runs by hand (the real one is ./wal-sync.ts): `begin` starts an fsync that
 * covers the commits so far, `end` completes it (or fails it) and then runs what waited for it, as
 * the real one does before it starts the next.
 */
function handSync() {
  let seq = 0;
  let synced = 0;
  let covering: number | undefined;
  let failed: StorageUnavailableError | undefined;
  const waiters: { seq: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  let after: (() => void)[] = [];
  const sync: WalSync = {
    committed: () => ++seq,
    latest: () => seq,
    durable(target) {
      if (failed) return Promise.reject(failed);
      if (target <= synced) return Promise.resolve();
      return new Promise((resolve, reject) => waiters.push({ seq: target, resolve, reject }));
    },
    syncing: () => covering !== undefined,
    afterSync(next) {
      after.push(next);
    },
    failure: () => failed,
    close: async () => undefined,
    stats: () => ({ walSyncs: 0 }),
  };
  return {
    sync,
    begin() {
      covering = seq;
    },
    end(error?: StorageUnavailableError) {
      if (error) failed = error;
      else synced = covering!;
      for (const waiter of waiters.filter((w) => failed || w.seq <= synced)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        if (failed) waiter.reject(failed);
        else waiter.resolve();
      }
      const next = after;
      after = [];
      for (const run of next) run();
      covering = undefined;
    },
  };
}

/** The next macrotask (after the group commit's own, queued before it). */
const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("SQLite group commit while an fsync runs", () => {
  function table() {
    const db = new Database(":memory:");
    db.exec("CREATE TABLE t (n INTEGER PRIMARY KEY)");
    const insert = db.prepare("INSERT INTO t (n) VALUES (?)");
    const rows = () => (db.prepare("SELECT count(*) AS c FROM t").get() as { c: number }).c;
    return { db, insert, rows };
  }

  it("writes called while an fsync runs commit together after it, and settle after the next one", async () => {
    const { db, insert, rows } = table();
    const hand = handSync();
    const group = createGroupCommit(db, undefined, hand.sync);
    const settled: number[] = [];
    const first = group.write(() => insert.run(1)).then(() => settled.push(1));
    await nextTask();
    expect(group.stats()).toEqual({ operations: 1, transactions: 1 });
    hand.begin();
    // Three writes in three macrotasks while that fsync runs: none begins a transaction.
    const later = [2, 3, 4].map(async (n) => {
      for (let i = 1; i < n; i++) await nextTask();
      await group.write(() => insert.run(n));
      settled.push(n);
    });
    for (let i = 0; i < 5; i++) await nextTask();
    expect(group.stats()).toEqual({ operations: 1, transactions: 1 });
    expect(rows()).toBe(1);
    // The fsync completes: the first write settles, the three commit in one transaction, unsettled.
    hand.end();
    await first;
    expect(group.stats()).toEqual({ operations: 4, transactions: 2 });
    expect(rows()).toBe(4);
    await nextTask();
    expect(settled).toEqual([1]);
    // The fsync that began after their COMMIT releases them.
    hand.begin();
    hand.end();
    await Promise.all(later);
    expect(settled.sort()).toEqual([1, 2, 3, 4]);
    db.close();
  });

  it("a failed fsync rejects the writes that waited for it and commits none of them", async () => {
    const { db, insert, rows } = table();
    const hand = handSync();
    const group = createGroupCommit(db, undefined, hand.sync);
    const first = group.write(() => insert.run(1));
    await nextTask();
    hand.begin();
    const waiting = group.write(() => insert.run(2));
    await nextTask();
    const failure = new StorageUnavailableError("fsync of the SQLite WAL failed (EIO)");
    hand.end(failure);
    await expect(first).rejects.toBe(failure);
    await expect(waiting).rejects.toBe(failure);
    expect(rows()).toBe(1);
    expect(group.stats().transactions).toBe(1);
    // And the store refuses writes from then on.
    await expect(group.write(() => insert.run(3))).rejects.toBe(failure);
    db.close();
  });
});
