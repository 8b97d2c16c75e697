/**
 * Group commit for the SQLite store: every write operation that arrives within one macrotask (or,
 * under `synchronous = NORMAL`, while the previous batch's fsync runs) joins one `BEGIN IMMEDIATE`
 * transaction, each inside its own SAVEPOINT, and the batch commits once.
 *
 * Why: with `synchronous = FULL` every COMMIT waits for an fsync (milliseconds on a real disk) and
 * better-sqlite3 blocks the event loop while it waits. One commit per operation made the fsync the
 * ceiling of the whole server; one commit per batch pays it once for every request that arrived
 * meanwhile (requests keep queueing in the kernel while the loop is blocked, so batches grow with
 * load).
 *
 * What does not change (SECURITY.md "Storage, faults and load"):
 *
 * - Durability: no operation's promise settles before the COMMIT that contains it is durable, so a
 *   caller never acts on (or answers a client with) a result that a power cut could undo. Under
 *   `synchronous = FULL` that is when COMMIT returns; under NORMAL (the default) it is when an
 *   fsync of the WAL that started after the COMMIT completed (./wal-sync.ts). Writes called while
 *   that fsync runs wait for it to finish, then commit as one batch covered by the next fsync.
 * - Atomicity per operation: an operation that throws (a failing statement, a throwing `check`)
 *   rolls back to its own savepoint; the other operations of the batch keep their effects. A
 *   result such as a refused code redemption is a normal return, so its consume is kept.
 * - Isolation across processes: the batch holds SQLite's write lock from `BEGIN IMMEDIATE` on,
 *   so every read-then-write operation still reads and writes under the lock.
 * - Order: operations run in the order they were called.
 *
 * A failed COMMIT (disk full, I/O error, a deferred constraint) rolls the whole batch back and
 * rejects every operation of it with {@link StorageUnavailableError}: none of them happened.
 * A failed fsync rejects every batch it covered the same way (their effects may or may not be on
 * disk; no caller learns a result), and from then on no batch begins: the store refuses writes.
 */

import type Database from "better-sqlite3";
import { StorageUnavailableError } from "../contract.js";
import { translate } from "./files.js";
import { ALL_TABLES } from "./tables.js";
import type { WalSync } from "./wal-sync.js";

/** Upper bound on operations per transaction, so one commit never holds the lock for long. */
export const MAX_BATCH = 64;

/** Counters of the group commit (for benchmarks and monitoring). */
export interface GroupCommitStats {
  /** Write operations that ran (whatever their outcome). */
  operations: number;
  /** Transactions begun for them; each committed one cost one durable commit (one fsync). */
  transactions: number;
}

interface Pending {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** What one operation did inside the batch (a plain shape: it also compiles without strict mode). */
interface Outcome {
  ok: boolean;
  value?: unknown;
  error?: unknown;
}

export interface GroupCommit {
  /** Queues `run` for the next batch; settles after that batch's COMMIT. */
  write<T>(run: () => T): Promise<T>;
  /** Runs every queued operation now (before closing the connection). */
  drain(): void;
  stats(): GroupCommitStats;
}

function unavailable(error: unknown, message: string): unknown {
  const translated = translate(error);
  return translated instanceof StorageUnavailableError
    ? translated
    : new StorageUnavailableError(message, { cause: error });
}

/**
 * `afterCommit` runs after each COMMIT, before the batch's operations learn their results (the WAL
 * checkpointer counts commits there under FULL; it must not throw). With `walSync` (synchronous =
 * NORMAL) the batch's operations settle only once its fsync completed. `touched` returns (and
 * forgets) the tables the statements run since its last call may have changed (./tables.ts masks):
 * what the batch's commit tells `walSync`; without it, a commit counts as changing every table.
 */
export function createGroupCommit(
  db: Database.Database,
  afterCommit?: () => void,
  walSync?: WalSync,
  touched: () => number = () => ALL_TABLES,
): GroupCommit {
  const queue: Pending[] = [];
  let scheduled = false;
  /** The queue runs after the fsync under way (./wal-sync.ts `afterSync`). */
  let waitingForSync = false;
  const stats: GroupCommitStats = { operations: 0, transactions: 0 };

  // Transaction control statements, compiled on first use (the connection may be read-only or
  // closed; preparing is what would fail then, and that failure belongs to the batch).
  let control:
    | {
        begin: Database.Statement;
        commit: Database.Statement;
        rollback: Database.Statement;
        savepoint: Database.Statement;
        release: Database.Statement;
        rollbackTo: Database.Statement;
      }
    | undefined;
  function statements() {
    control ??= {
      begin: db.prepare("BEGIN IMMEDIATE"),
      commit: db.prepare("COMMIT"),
      rollback: db.prepare("ROLLBACK"),
      savepoint: db.prepare("SAVEPOINT operation"),
      release: db.prepare("RELEASE operation"),
      rollbackTo: db.prepare("ROLLBACK TO operation"),
    };
    return control;
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    // A macrotask: every operation started by the current I/O callbacks (and their microtasks)
    // joins the batch.
    setImmediate(flush);
  }

  function flush(): void {
    scheduled = false;
    if (queue.length === 0) return;
    if (walSync?.syncing()) {
      // An fsync is under way: what is queued now cannot settle before the fsync after it anyway
      // (one that starts after its COMMIT). So it waits for this one to finish and then commits
      // together with every write queued meanwhile, right before that next fsync starts: one
      // transaction and one fsync for all of them, however slow the disk (issue 25: under a 2 ms
      // fsync, commits had 3 operations each). Latency is the same: the next fsync starts when it
      // would have.
      if (!waitingForSync) {
        waitingForSync = true;
        walSync.afterSync(runQueued);
      }
      return;
    }
    runBatch(queue.splice(0, MAX_BATCH));
    if (queue.length > 0) schedule();
  }

  /** After the fsync that was under way: every queued write, in batches of at most MAX_BATCH. */
  function runQueued(): void {
    waitingForSync = false;
    while (queue.length > 0) runBatch(queue.splice(0, MAX_BATCH));
  }

  function rollbackQuietly(): void {
    try {
      if (db.open && db.inTransaction) statements().rollback.run();
    } catch {
      // The connection is unusable; SQLite discards the uncommitted transaction on close.
    }
  }

  function runBatch(batch: Pending[]): void {
    if (batch.length === 0) return;
    // After a failed fsync the page cache cannot be trusted: nothing more is written.
    const refused = walSync?.failure();
    if (refused) {
      for (const op of batch) op.reject(refused);
      return;
    }
    const outcomes: Outcome[] = [];
    let sql: ReturnType<typeof statements>;
    try {
      sql = statements();
      sql.begin.run();
    } catch (error) {
      const reason = unavailable(error, "SQLite could not begin a transaction");
      for (const op of batch) op.reject(reason);
      return;
    }
    stats.transactions++;
    touched();
    let changed = 0;
    try {
      for (let i = 0; i < batch.length; i++) {
        const op = batch[i]!;
        stats.operations++;
        sql.savepoint.run();
        try {
          const value = op.run();
          sql.release.run();
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (!db.inTransaction) {
            // SQLite itself rolled the whole transaction back (I/O error, disk full): the earlier
            // operations of the batch are undone too; the later ones have not run and wait for
            // the next batch.
            op.reject(translate(error));
            const undone = unavailable(error, "SQLite rolled the transaction back");
            for (let j = 0; j < i; j++) batch[j]!.reject(undone);
            queue.unshift(...batch.slice(i + 1));
            if (queue.length > 0) schedule();
            return;
          }
          // Only this operation is undone; the batch goes on.
          sql.rollbackTo.run();
          sql.release.run();
          outcomes.push({ ok: false, error: translate(error) });
        }
      }
      changed = touched();
      sql.commit.run();
    } catch (error) {
      // COMMIT (or savepoint bookkeeping) failed: nothing of the batch may look done.
      rollbackQuietly();
      const reason = unavailable(error, "SQLite could not commit");
      for (const op of batch) op.reject(reason);
      return;
    }
    afterCommit?.();
    const settle = () =>
      batch.forEach((op, i) => {
        const outcome = outcomes[i]!;
        if (outcome.ok) op.resolve(outcome.value);
        else op.reject(outcome.error);
      });
    if (!walSync) {
      // FULL: durable now, COMMIT synced the WAL. Only at this point does anyone learn a result.
      settle();
      return;
    }
    // NORMAL: durable once an fsync that started after this COMMIT completed; the loop goes on.
    walSync.durable(walSync.committed(changed)).then(settle, (error: unknown) => {
      for (const op of batch) op.reject(error);
    });
  }

  return {
    write<T>(run: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
        schedule();
      });
    },
    drain() {
      while (queue.length > 0) runBatch(queue.splice(0, MAX_BATCH));
    },
    stats: () => ({ ...stats }),
  };
}
