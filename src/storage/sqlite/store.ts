/**
 * SQLite {@link AuthorizationStore} on better-sqlite3: the default single-instance backend.
 *
 * better-sqlite3 is synchronous, so inside one process nothing interleaves within an operation;
 * across processes every write runs in `BEGIN IMMEDIATE`, which takes the write lock before the
 * first read, so two processes redeeming one code are serialised and the second sees it consumed
 * (SECURITY.md "Storage, faults and load"). Writes are group-committed (./group-commit.ts): the
 * writes of one macrotask share one transaction and one fsync, each in its own savepoint, and
 * none settles before the commit is durable. That fsync runs off the event loop (./wal-sync.ts,
 * `synchronous = NORMAL`), and reads too settle only once what they read is durable.
 */

import Database from "better-sqlite3";
import type { AuthorizationStore, PurgeResult } from "../contract.js";
import { assertMarkerKey, emptyPurgeResult, type StorageWrite, sameJsonValue } from "../rules.js";
import {
  clientColumns,
  fromJson,
  insertSql,
  type Row,
  type RowInsert,
  rowToClient,
  rowToSigningKey,
  rowToUser,
  signingKeyInsert,
  toJson,
} from "../sql/rows.js";
import { refuseNewerSchema } from "../sql/schema-version.js";
import { purgeStatements, type Statement, useOnceStatement } from "../sql/statements.js";
import { writeStatements } from "../sql/writes.js";
import { type CheckpointerStats, createCheckpointer } from "./checkpointer.js";
import { createClientCache } from "./client-cache.js";
import { sqliteCodeMethods } from "./code-methods.js";
import { sqliteDeviceMethods } from "./device-methods.js";
import { prepareFile, translate } from "./files.js";
import { sqliteGrantMethods } from "./grant-methods.js";
import { createGroupCommit, type GroupCommitStats } from "./group-commit.js";
import { revokeGrantChain } from "./revoke.js";
import { SQLITE_MIGRATIONS } from "./schema.js";
import { sqliteSessionMethods } from "./session-methods.js";
import type { RetireIo } from "./superseded.js";
import { ALL_TABLES, createTableMasks } from "./tables.js";
import { sqliteUpstreamMethods } from "./upstream-methods.js";
import { sqliteUserMethods } from "./user-methods.js";
import {
  createWalSync,
  type SqliteSynchronous,
  sqliteCheckpointerForTests,
  sqliteDurabilityForTests,
  type WalSync,
  type WalSyncStats,
} from "./wal-sync.js";

/** SQLite has no booleans: they are bound as 0/1. */
function sqliteValue(value: unknown): unknown {
  return typeof value === "boolean" ? (value ? 1 : 0) : value;
}

export interface SqliteStoreOptions {
  /** Database file. Its directory is created (mode 0700) and a new file gets mode 0600. */
  path: string;
  /** How long a write waits for another connection's lock before failing (default 5000 ms). */
  busyTimeoutMs?: number;
  /** Open without write access (inspection tools); every write fails with StorageUnavailableError. */
  readonly?: boolean;
  /**
   * How a commit becomes durable (./wal-sync.ts). `"normal"` (default): `synchronous = NORMAL` and
   * an fsync of the WAL off the event loop before any operation settles. `"full"`: `synchronous =
   * FULL`, each COMMIT syncs on the event loop (slower; the fallback). Both are equally durable.
   */
  synchronous?: SqliteSynchronous;
}

/** A SQLite store; `database` is the open handle, for backups and inspection. */
export interface SqliteStore extends AuthorizationStore {
  readonly database: Database.Database;
  /**
   * Write operations and the transactions (durable commits) they took, since opening, and the WAL
   * checkpoints run off the event loop (./checkpointer.ts) and the WAL fsyncs (./wal-sync.ts).
   */
  writeStats(): GroupCommitStats & CheckpointerStats & WalSyncStats;
}

/** Opens (creating if needed) a SQLite store. Call `migrate()` before first use. */
export function createSqliteStore(options: SqliteStoreOptions): SqliteStore {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const readonly = options.readonly ?? false;
  const mode = sqliteDurabilityForTests() ?? options.synchronous ?? "normal";
  let db: Database.Database;
  try {
    prepareFile(options.path, readonly);
    db = new Database(options.path, { readonly, fileMustExist: readonly, timeout: busyTimeoutMs });
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
    const inWal =
      !readonly && String(db.pragma("journal_mode = WAL", { simple: true })).toLowerCase() === "wal";
    // NORMAL only in WAL mode, where ./wal-sync.ts makes up for it (an in-memory database has no
    // WAL and nothing to lose to a power cut). A file SQLite kept in a rollback journal mode stays
    // on FULL: NORMAL there skips syncs a commit needs.
    const normal = mode === "unsafe-normal-without-fsync" || (mode === "normal" && (inWal || db.memory));
    db.pragma(`synchronous = ${normal ? "NORMAL" : "FULL"}`);
    db.pragma("foreign_keys = ON");
    // Every write runs in its own SAVEPOINT (group-commit.ts). SQLite keeps a savepoint's journal
    // in memory only up to a spill size and then writes it to a temporary file it creates, writes
    // and deletes within the operation (pager.c, SQLITE_STMTJRNL_SPILL): under load about 5% of
    // the server's CPU went to those files' open, pwrite, close and unlink. In memory they stay
    // (temp_store=MEMORY); a savepoint journal holds only pages one operation changed.
    db.pragma("temp_store = MEMORY");
  } catch (error) {
    throw translate(error);
  }

  const statements = new Map<string, { statement: Database.Statement; tables: number }>();
  // The tables each statement may read or change (./tables.ts), gathered while a read or a batch
  // runs: a read waits only for the commits that changed what it read (./wal-sync.ts).
  const tableMasks = createTableMasks(db);
  let touched = 0;
  const takeTouched = () => {
    const tables = touched;
    touched = 0;
    return tables;
  };
  /** Prepared statements are compiled once per SQL text and reused. */
  function sql(text: string): Database.Statement {
    let entry = statements.get(text);
    if (!entry) {
      entry = { statement: db.prepare(text), tables: tableMasks.of(text) };
      statements.set(text, entry);
    }
    touched |= entry.tables;
    return entry.statement;
  }
  const one = (text: string, ...params: unknown[]) => sql(text).get(...params) as Row | undefined;
  const all = (text: string, ...params: unknown[]) => sql(text).all(...params) as Row[];
  const run = (text: string, ...params: unknown[]) => sql(text).run(...params).changes;
  const exec = (statement: Statement) => run(statement.text, ...statement.values.map(sqliteValue));

  // Writes go through the group commit: one `BEGIN IMMEDIATE` transaction (one fsync) per batch of
  // operations, each in its own savepoint; a write settles only once its batch is durable.
  // WAL checkpoints run in a worker thread once the store commits a lot, so that no commit on the
  // request path copies the WAL into the database file (./checkpointer.ts).
  const wal =
    !readonly && !db.memory && String(db.pragma("journal_mode", { simple: true })).toLowerCase() === "wal";
  const checkpointer = wal
    ? createCheckpointer(db, options.path, busyTimeoutMs, sqliteCheckpointerForTests())
    : undefined;
  // NORMAL: the WAL is synced here, off the event loop; the checkpointer is asked for work after
  // each of these fsyncs (SQLite's checkpoint also syncs the WAL before copying any frame), and
  // stops for good at a failed one. Not for a read-only or in-memory database: nothing to sync.
  let walSync: WalSync | undefined;
  if (wal && mode === "normal") {
    try {
      // SQLite creates the -wal file when the connection first reads in WAL mode.
      db.prepare("SELECT 1 FROM sqlite_master LIMIT 1").get();
      walSync = createWalSync(options.path, {
        onSynced: checkpointer?.committed,
        onFailed: () => void checkpointer?.close(),
      });
    } catch (error) {
      db.close();
      throw translate(error);
    }
  }
  const group = createGroupCommit(db, walSync ? undefined : checkpointer?.committed, walSync, takeTouched);
  const write = <T>(fn: () => T): Promise<T> => group.write(fn);
  // Commits of other connections (another instance, the admin CLI) change data_version; a read
  // that may see them waits for an fsync that starts after it (./wal-sync.ts).
  const dataVersion = walSync ? db.prepare("PRAGMA data_version").pluck() : undefined;
  let seenDataVersion = dataVersion?.get();
  // Client records read before, kept while nothing can have changed them (./client-cache.ts).
  const clients = createClientCache(db);
  /** A write that may change the clients table: the cached records go as it runs. */
  const writeClients = <T>(fn: () => T): Promise<T> =>
    write(() => {
      clients.clear();
      return fn();
    });
  /**
   * Reads run at once, outside any batch: they see only committed data, and settle once that data
   * is durable (an fsync that started after the last commit they could see completed).
   */
  async function read<T>(fn: () => T): Promise<T> {
    let value: T;
    let seen = 0;
    try {
      const refused = walSync?.failure();
      if (refused) throw refused;
      touched = 0;
      value = fn();
      if (walSync) {
        const version = dataVersion!.get();
        if (version !== seenDataVersion) {
          // Another connection committed: what this read saw may not be on disk yet.
          seenDataVersion = version;
          walSync.committed();
        }
        seen = walSync.latest(takeTouched());
      }
    } catch (error) {
      throw translate(error);
    }
    if (walSync) await walSync.durable(seen);
    return value;
  }

  /** The grant, what was exchanged from it, and their tokens (./revoke.ts); true when it exists. */
  function revokeGrantRows(grantId: string, now: number): boolean {
    return revokeGrantChain({ all, run }, grantId, now);
  }

  const retireIo: RetireIo = { all, run, inTransaction: () => db.inTransaction, revokeGrantRows };

  function insert(row: RowInsert): number {
    return run(
      insertSql(row, () => "?"),
      ...row.values.map(sqliteValue),
    );
  }

  /**
   * Runs the writes of a verdict (../rules.ts `StorageWrite`), in order, inside the calling write's
   * savepoint: a throw (a conflicting insert) undoes them all. The one place this store enacts
   * what a code redemption, a refresh rotation or a device poll was judged to write.
   */
  function applyWrites(writes: readonly StorageWrite[]): void {
    for (const write of writes) {
      if (write.op === "revokeGrant") revokeGrantRows(write.grantId, write.now);
      else for (const statement of writeStatements("?", write)) exec(statement);
    }
  }

  const SELECT_CLIENT = "SELECT * FROM clients WHERE client_id = ?";
  const upsertClientSql = `INSERT INTO clients (client_id, data, created_at, last_used_at, expires_at)
    VALUES (?, ?, ?, ?, ?) ON CONFLICT (client_id) DO UPDATE SET data = excluded.data,
    created_at = excluded.created_at, last_used_at = excluded.last_used_at, expires_at = excluded.expires_at`;

  return {
    database: db,
    writeStats: () => ({
      ...group.stats(),
      ...(checkpointer?.stats() ?? { checkpoints: 0, running: false, onLoopMs: 0 }),
      ...(walSync?.stats() ?? { walSyncs: 0 }),
    }),
    contractVersion: 2,
    async migrate() {
      if (readonly) return;
      // Under the write lock like every write, so two processes cannot both apply a migration.
      await writeClients(() => {
        run(
          "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
        );
        const applied = Number(one("SELECT coalesce(max(version), 0) AS v FROM schema_migrations")?.v ?? 0);
        refuseNewerSchema(applied, SQLITE_MIGRATIONS);
        for (const migration of SQLITE_MIGRATIONS) {
          if (migration.version <= applied) continue;
          db.exec(migration.sql);
          run(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
            migration.version,
            Date.now(),
          );
        }
        // Whatever a migration did (db.exec is not traced) counts as a change of every table, and
        // the tables are learnt again (the statements' masks with them).
        touched = ALL_TABLES;
        tableMasks.reset();
        for (const [text, entry] of statements) entry.tables = tableMasks.of(text);
      });
    },
    async close() {
      if (!db.open) return;
      // Writes already called are committed (or rejected) before the connection goes, and settle
      // once synced.
      group.drain();
      await walSync?.close();
      if (!db.open) return;
      db.close();
      // The worker's connection is the last one: closing it checkpoints the WAL and removes it.
      await checkpointer?.close();
    },

    async createClient(client) {
      const c = clientColumns(client);
      await writeClients(() =>
        run(
          "INSERT INTO clients (client_id, data, created_at, last_used_at, expires_at) VALUES (?, ?, ?, ?, ?)",
          client.clientId,
          c.data,
          c.createdAt,
          c.lastUsedAt,
          c.expiresAt,
        ),
      );
    },
    async upsertClient(client) {
      const c = clientColumns(client);
      await writeClients(() =>
        run(upsertClientSql, client.clientId, c.data, c.createdAt, c.lastUsedAt, c.expiresAt),
      );
    },
    async getClient(clientId) {
      return read(() => {
        // A cached record is what the table holds: the read waits for the clients table's last
        // commit like the SELECT it stands for.
        touched |= tableMasks.of(SELECT_CLIENT);
        return clients.get(clientId, () => {
          const row = one(SELECT_CLIENT, clientId);
          return row && rowToClient(row);
        });
      });
    },
    async listClients() {
      return (await read(() => all("SELECT * FROM clients ORDER BY created_at, client_id"))).map(rowToClient);
    },
    async deleteClient(clientId) {
      return (await writeClients(() => run("DELETE FROM clients WHERE client_id = ?", clientId))) > 0;
    },
    async markClientUsed(clientId, now) {
      await writeClients(() =>
        run("UPDATE clients SET last_used_at = ?, expires_at = NULL WHERE client_id = ?", now, clientId),
      );
    },

    async createUser(user) {
      await write(() =>
        run(
          "INSERT INTO users (id, username, password_hash, is_admin, created_at) VALUES (?, ?, ?, ?, ?)",
          user.id,
          user.username,
          user.passwordHash,
          user.isAdmin ? 1 : 0,
          user.createdAt,
        ),
      );
    },
    async getUserByUsername(username) {
      const row = await read(() => one("SELECT * FROM users WHERE username = ?", username));
      return row && rowToUser(row);
    },
    async getUser(id) {
      const row = await read(() => one("SELECT * FROM users WHERE id = ?", id));
      return row && rowToUser(row);
    },
    async listUsers() {
      return (await read(() => all("SELECT * FROM users ORDER BY created_at, username"))).map(rowToUser);
    },
    async setUserPassword(id, passwordHash) {
      await write(() => run("UPDATE users SET password_hash = ? WHERE id = ?", passwordHash, id));
    },
    ...sqliteUserMethods({ all, exec, write, revokeGrantRows, sqliteValue }),

    ...sqliteSessionMethods({ one, all, run, exec, read, write }),

    ...sqliteGrantMethods({ one, all, exec, run, applyWrites, revokeGrantRows, read, write }),

    async listSigningKeys() {
      return (await read(() => all("SELECT * FROM signing_keys ORDER BY created_at, kid"))).map(
        rowToSigningKey,
      );
    },
    async addSigningKey(key, retireOthersAt) {
      await write(() => {
        if (retireOthersAt) {
          run(
            "UPDATE signing_keys SET retired_at = ?, expires_at = ? WHERE retired_at IS NULL",
            retireOthersAt.retiredAt,
            retireOthersAt.expiresAt,
          );
        }
        insert(signingKeyInsert(key));
      });
    },
    async replaceSigningKeyPrivateJwk(kid, expected, next) {
      // Read and write in one write transaction (BEGIN IMMEDIATE): no other connection can change
      // the row between the comparison and the update.
      return write(() => {
        const row = one("SELECT private_jwk FROM signing_keys WHERE kid = ?", kid);
        if (!row || !sameJsonValue(fromJson(row.private_jwk), expected)) return false;
        return run("UPDATE signing_keys SET private_jwk = ? WHERE kid = ?", toJson(next), kid) === 1;
      });
    },

    ...sqliteCodeMethods({ one, insert, applyWrites, retireIo, write }),
    ...sqliteDeviceMethods({ one, exec, insert, applyWrites, read, write }),

    async useOnce(key, expiresAt, now) {
      assertMarkerKey(key);
      return (await write(() => exec(useOnceStatement("?", key, expiresAt, now)))) === 1;
    },

    async hitRateLimit(key, windowStart, windowMs) {
      // A newer window restarts the count; a hit stamped with an older window (clock skew between
      // instances) counts in the current one.
      const row = await write(() =>
        one(
          `INSERT INTO rate_limits (key, window_start, expires_at, count) VALUES (?, ?, ?, 1)
           ON CONFLICT (key) DO UPDATE SET
             count = CASE WHEN excluded.window_start > window_start THEN 1 ELSE count + 1 END,
             expires_at = CASE WHEN excluded.window_start > window_start THEN excluded.expires_at ELSE expires_at END,
             window_start = max(window_start, excluded.window_start)
           RETURNING count`,
          key,
          windowStart,
          windowStart + windowMs,
        ),
      );
      return Number(row?.count);
    },

    ...sqliteUpstreamMethods({ one, exec, read, write, sqliteValue }),

    async getCachedDocument(url, now) {
      const row = await read(() =>
        one("SELECT body, expires_at FROM cached_documents WHERE url = ? AND expires_at > ?", url, now),
      );
      return row && { body: String(row.body), expiresAt: Number(row.expires_at) };
    },
    async putCachedDocument(url, body, expiresAt) {
      await write(() =>
        run(
          `INSERT INTO cached_documents (url, body, expires_at) VALUES (?, ?, ?)
           ON CONFLICT (url) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at`,
          url,
          body,
          expiresAt,
        ),
      );
    },

    async purgeExpired(now): Promise<PurgeResult> {
      // Unused dynamic registrations expire here.
      return writeClients((): PurgeResult => {
        const result = emptyPurgeResult();
        for (const { statement, counts } of purgeStatements("?", now)) {
          const changed = exec(statement);
          if (counts) result[counts] = changed;
        }
        return result;
      });
    },
  };
}
