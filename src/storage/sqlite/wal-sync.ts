/**
 * The durable commit off the event loop (DESIGN.md "Decisions for the third wave"): the store runs
 * `synchronous = NORMAL` in WAL mode, so a COMMIT only writes its frames to the WAL (no fsync), and
 * this module syncs the WAL file itself with `fdatasync` on libuv's thread pool. Every store
 * operation settles only after an fsync that started after the last commit it wrote or read (for
 * a read: the last commit that changed a table it read, ./tables.ts), so whatever a client is
 * answered is as durable as under `synchronous = FULL`, while the event loop never waits on the
 * disk. One fsync runs at a time; the writes called meanwhile commit when it finishes, together,
 * right before the next one starts (./group-commit.ts), so that each fsync covers as many as can
 * wait for it.
 *
 * Why this is enough:
 * - A WAL commit is its frames (the last one marked as a commit frame) appended to the `-wal` file;
 *   SQLite's recovery replays exactly the frames up to the last valid commit frame (SQLite "WAL-mode
 *   file format", section 4.3). An fdatasync of the WAL file that starts after COMMIT returned makes
 *   those frames, and the file size that reaches them, stable (fdatasync(2)).
 * - Checkpoints keep their order by SQLite's own rule, also under NORMAL: `walCheckpoint` syncs the
 *   WAL before it copies any frame into the database file and syncs the database file before the
 *   WAL may start over (wal.c, `CKPT_SYNC_FLAGS`); a WAL restart syncs the new header first. The
 *   checkpointer is asked for work only after one of our fsyncs completed (store.ts).
 * - Commits made by another process on the same file (another instance, the admin CLI) are seen by
 *   a read through `PRAGMA data_version`; such a read waits for an fsync that starts after it, which
 *   syncs the shared WAL file and so their frames too (they count as changing every table).
 * - A read waits for the last commit that changed a table it read: that commit's fsync covers
 *   every commit before it, so every change the read could see is on disk when it settles; a table
 *   no commit changed since the last fsync began was synced by it.
 *
 * A failed fsync (EIO, ENOSPC, a vanished device) is final: Linux may already have dropped the
 * dirty pages it could not write and marked them clean, so a later fsync can succeed without the
 * data ever reaching the disk (the 2018 PostgreSQL "fsyncgate"). Every operation waiting for that
 * fsync or a later one fails with {@link StorageUnavailableError}, and the store refuses every
 * operation after it until it is reopened (SQLite's recovery then rebuilds from what is on disk).
 */

import { closeSync, fdatasync, fsyncSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { StorageUnavailableError } from "../contract.js";
import { ALL_TABLES } from "./tables.js";

export interface WalSyncStats {
  /** fsyncs of the WAL file run off the event loop (each covered every commit before it began). */
  walSyncs: number;
}

export interface WalSync {
  /**
   * A COMMIT that may have changed `tables` (./tables.ts masks; by default all) just returned: its
   * sequence number, to wait for with {@link durable}.
   */
  committed(tables?: number): number;
  /**
   * The sequence number of the last commit this connection knows of that may have changed one of
   * `tables` (by default any): what a read of those tables waits for.
   */
  latest(tables?: number): number;
  /** Resolves once an fsync that started after commit `seq` completed; rejects once one failed. */
  durable(seq: number): Promise<void>;
  /** Whether an fsync is under way. */
  syncing(): boolean;
  /**
   * Runs `next` once the fsync under way has completed (or failed), before the next one starts, so
   * that the next one covers whatever `next` commits (the group commit's deferred batch). Only
   * while {@link syncing}.
   */
  afterSync(next: () => void): void;
  /** The failure that made the store unusable, if an fsync failed. */
  failure(): StorageUnavailableError | undefined;
  /** Waits for every commit so far to be synced (or failed), then closes the file. */
  close(): Promise<void>;
  stats(): WalSyncStats;
}

interface Waiter {
  seq: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Syncs the WAL of the database at `path` (`<path>-wal`, which SQLite keeps while a connection is
 * open). `onSynced` runs after each successful fsync (the checkpointer's cue); `onFailed` once, at
 * the first failed one.
 */
export function createWalSync(
  path: string,
  hooks: { onSynced?: () => void; onFailed?: (error: StorageUnavailableError) => void } = {},
): WalSync {
  // Read-only: fdatasync needs no write access, and nothing here may ever write to the WAL.
  const fd = openSync(`${path}-wal`, "r");
  // The WAL file may be new: its directory entry must be stable too, or a power cut could lose the
  // whole file with every commit in it (fsync(2): "also needs an explicit fsync() on a file
  // descriptor for the directory"). Once, at open.
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }

  let committedSeq = 0;
  /** Per table bit (./tables.ts): the last commit that may have changed that table. */
  const lastChange = new Array<number>(32).fill(0);
  let syncedSeq = 0;
  let inFlight = false;
  let closed = false;
  let failed: StorageUnavailableError | undefined;
  let walSyncs = 0;
  // Ascending by seq: commits and reads take the latest seq at the time they wait.
  const waiters: Waiter[] = [];
  const idle: Array<() => void> = [];
  /** What waits for the fsync under way to finish ({@link WalSync.afterSync}). */
  let afterThisSync: Array<() => void> = [];

  function settleIdle(): void {
    if (inFlight) return;
    for (const done of idle.splice(0)) done();
  }

  function fail(error: NodeJS.ErrnoException): void {
    failed = new StorageUnavailableError(`fsync of the SQLite WAL failed (${error.code ?? "error"})`, {
      cause: error,
    });
    for (const waiter of waiters.splice(0)) waiter.reject(failed);
    hooks.onFailed?.(failed);
  }

  function kick(): void {
    if (inFlight || failed || closed || waiters.length === 0) return;
    inFlight = true;
    // Every commit up to here returned before this fsync starts, so it covers them all.
    const target = committedSeq;
    fdatasync(fd, (error) => {
      walSyncs++;
      if (error) fail(error);
      else {
        syncedSeq = target;
        let n = 0;
        while (n < waiters.length && waiters[n]!.seq <= target) n++;
        for (const waiter of waiters.splice(0, n)) waiter.resolve();
        hooks.onSynced?.();
      }
      // Still in flight for these: what they commit waits for the fsync kicked below, which starts
      // after their COMMITs returned (and after a failure they commit nothing).
      const next = afterThisSync;
      afterThisSync = [];
      try {
        for (const run of next) run();
      } finally {
        inFlight = false;
        kick();
        settleIdle();
      }
    });
  }

  return {
    committed(tables = ALL_TABLES) {
      const seq = ++committedSeq;
      for (let mask = tables; mask !== 0; mask &= mask - 1) lastChange[31 - Math.clz32(mask & -mask)] = seq;
      return seq;
    },
    latest(tables = ALL_TABLES) {
      if (tables === ALL_TABLES) return committedSeq;
      let seq = 0;
      for (let mask = tables; mask !== 0; mask &= mask - 1) {
        seq = Math.max(seq, lastChange[31 - Math.clz32(mask & -mask)]!);
      }
      return seq;
    },
    durable(seq) {
      if (failed) return Promise.reject(failed);
      if (seq <= syncedSeq) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        waiters.push({ seq, resolve, reject });
        kick();
      });
    },
    syncing: () => inFlight,
    afterSync(next) {
      if (!inFlight) throw new Error("afterSync needs an fsync under way");
      afterThisSync.push(next);
    },
    failure: () => failed,
    async close() {
      if (closed) return;
      while (!failed && waiters.length > 0) {
        kick();
        await new Promise<void>((resolve) => idle.push(resolve));
      }
      if (inFlight) await new Promise<void>((resolve) => idle.push(resolve));
      closed = true;
      closeSync(fd);
    },
    stats: () => ({ walSyncs }),
  };
}

/**
 * How the SQLite store makes a commit durable: `"normal"` (the default) is `synchronous = NORMAL`
 * with this module's fsync before anything settles; `"full"` is `synchronous = FULL`, every COMMIT
 * syncing on the event loop (the fallback, as before).
 */
export type SqliteSynchronous = "normal" | "full";

/**
 * TEST ONLY (test/faults/power-loss.test.ts, through test/faults/power-cut/serve.mjs): a mode for
 * the stores opened from now on, whatever their options say. `"unsafe-normal-without-fsync"` is
 * `synchronous = NORMAL` WITHOUT this module's fsync, which loses answered commits at a power cut:
 * the broken build the power-loss test must catch, so that it can show it does. Not exported by
 * the package; nothing in src/ sets it.
 */
export type SqliteDurabilityForTests = SqliteSynchronous | "unsafe-normal-without-fsync";
let overrideForTests: SqliteDurabilityForTests | undefined;

/**
 * Sets the TEST ONLY mode above (the harness imports it from dist/, which knip cannot follow).
 *
 * @public
 */
export function setSqliteDurabilityForTests(
  mode: SqliteDurabilityForTests | undefined,
  checkpointer?: { startAfterCommits: number; intervalMs: number },
): void {
  overrideForTests = mode;
  checkpointerForTests = checkpointer;
}
let checkpointerForTests: { startAfterCommits: number; intervalMs: number } | undefined;

/** TEST ONLY: checkpointer options a test set (the power-loss test checkpoints often, under load). */
export function sqliteCheckpointerForTests(): { startAfterCommits: number; intervalMs: number } | undefined {
  return checkpointerForTests;
}

/** The TEST ONLY mode, when a test set one. */
export function sqliteDurabilityForTests(): SqliteDurabilityForTests | undefined {
  return overrideForTests;
}
