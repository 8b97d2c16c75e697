/**
 * WAL checkpoints off the request path for the SQLite store: a worker thread with its own
 * connection copies the WAL into the database file while the event loop goes on committing.
 *
 * Why: SQLite's automatic checkpoint (`wal_autocheckpoint`, 1000 pages by default) runs inside the
 * COMMIT that crosses the threshold. That commit then copies every page of the WAL into the
 * database file and waits for two more fsyncs (the WAL, then the database file: synchronous =
 * FULL), on the event loop, and every request waits behind it (issue 11: single commits of 5 to
 * 70 ms, 20 to 130 µs per code flow on average). A PASSIVE checkpoint from another connection
 * does the same copy without blocking the writer (SQLite "Write-Ahead Logging", section 6
 * "Checkpointing"); once it has copied everything, the next write transaction starts the WAL over
 * from its beginning, so it stays small.
 *
 * What does not change:
 * - Durability: a commit is durable when its COMMIT returns (synchronous = FULL) or when the
 *   store's own fsync of the WAL that began after it completed (NORMAL, ./wal-sync.ts). A
 *   checkpoint only copies committed pages into the database file, and keeps the order a power cut
 *   needs under either setting: SQLite syncs the WAL before it copies the first frame and syncs the
 *   database file before the WAL may start over (wal.c `walCheckpoint`, `CKPT_SYNC_FLAGS`, which
 *   NORMAL keeps). Under NORMAL the worker is asked only after one of the store's fsyncs completed
 *   ({@link Checkpointer.committed} is called there), and never after a failed one (the store then
 *   closes it). A crash in the middle of a checkpoint is recovered from the WAL when the database is
 *   next opened; test/faults/power-loss.test.ts cuts power under load with the worker running.
 * - The WAL stays bounded: the store's connection keeps an automatic checkpoint as a backstop at
 *   {@link BACKSTOP_PAGES}, reached only when the worker falls behind (a slow disk, a reader on an
 *   old snapshot); if the worker cannot run, the default {@link DEFAULT_AUTOCHECKPOINT_PAGES}
 *   comes back.
 * - A store that commits little starts nothing: the worker comes after
 *   {@link CheckpointerOptions.startAfterCommits} commits, and until then SQLite's automatic
 *   checkpoint applies as before.
 */

import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";

/** SQLite's own `wal_autocheckpoint` default (pages), in force until the worker runs. */
export const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;
/** The automatic checkpoint left on the store's connection while the worker runs (pages). */
export const BACKSTOP_PAGES = 10_000;

export interface CheckpointerOptions {
  /** Commits before the worker starts (a store that commits less never starts it). */
  startAfterCommits: number;
  /**
   * Time between two checkpoints asked of the worker, while commits happen, at first. It then
   * adapts (between {@link MIN_INTERVAL_MS} and {@link MAX_INTERVAL_MS}) so that each checkpoint
   * copies about {@link DEFAULT_AUTOCHECKPOINT_PAGES} frames, as SQLite's own would: many small
   * checkpoints would copy the pages every commit rewrites (the right-most leaves) over and over,
   * each with its two fsyncs.
   */
  intervalMs: number;
}

/** Bounds of the adapted interval between checkpoints. */
export const MIN_INTERVAL_MS = 10;
export const MAX_INTERVAL_MS = 1000;

export const DEFAULT_CHECKPOINTER_OPTIONS: CheckpointerOptions = { startAfterCommits: 256, intervalMs: 100 };

export interface CheckpointerStats {
  /** Checkpoints the worker completed (each copied what the WAL held when it began). */
  checkpoints: number;
  /** Whether checkpoints now run in the worker (false before it starts and after it failed). */
  running: boolean;
  /** Time spent on the event loop copying the frames committed during the worker's checkpoints. */
  onLoopMs: number;
}

export interface Checkpointer {
  /**
   * After each durable commit (FULL), or each completed fsync of the WAL (NORMAL): asks the worker
   * for a checkpoint when one is due.
   */
  committed(): void;
  /** Stops the worker and closes its connection (call after closing the store's connection). */
  close(): Promise<void>;
  stats(): CheckpointerStats;
}

/**
 * The worker: opens the database, then answers each "checkpoint" with a PASSIVE checkpoint and
 * "close" by closing its connection. It never writes a row. Plain CommonJS evaluated in the worker
 * (the source of this module may be TypeScript that a worker could not load); the driver is
 * passed as a resolved path.
 */
const WORKER_SOURCE = `"use strict";
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true, timeout: workerData.busyTimeoutMs });
db.pragma("synchronous = FULL");
parentPort.on("message", (message) => {
  if (message === "close") {
    db.close();
    parentPort.close();
    return;
  }
  const [result] = db.pragma("wal_checkpoint(PASSIVE)");
  parentPort.postMessage({ busy: result.busy, log: result.log, checkpointed: result.checkpointed });
});
parentPort.postMessage("ready");
`;

/** The better-sqlite3 entry point, resolved here so the worker loads the same driver. */
function driverPath(): string {
  return createRequire(import.meta.url).resolve("better-sqlite3");
}

/**
 * A checkpointer for the store's connection `db` on the file `path` (in WAL mode, writable).
 * `busyTimeoutMs` is the worker connection's wait for a lock it needs to open the file.
 */
export function createCheckpointer(
  db: Database.Database,
  path: string,
  busyTimeoutMs: number,
  options: CheckpointerOptions = DEFAULT_CHECKPOINTER_OPTIONS,
): Checkpointer {
  let commits = 0;
  let worker: Worker | undefined;
  let state: "idle" | "starting" | "running" | "failed" | "closed" = "idle";
  let inFlight = false;
  let lastAsked = 0;
  let checkpoints = 0;
  let intervalMs = options.intervalMs;
  let lastLog = 0;
  let commitsWhenAsked = 0;
  let onLoopMs = 0;
  let exited: Promise<void> | undefined;

  /** The connection's own automatic checkpoint, unless it is gone already. */
  function autocheckpoint(pages: number): void {
    try {
      if (db.open) db.pragma(`wal_autocheckpoint = ${pages}`);
    } catch {
      // The connection is closing or unusable; nothing left to checkpoint through it.
    }
  }

  /**
   * The worker copied what the WAL held when it began; what was committed meanwhile is only in the
   * WAL, and SQLite starts the WAL over from its beginning only once every frame is copied (at the
   * next write transaction). Under steady writes the worker alone never gets there and the WAL
   * would grow to the backstop; the rest is the few frames of the last milliseconds, copied here,
   * between two batches, where no commit can add more.
   */
  function catchUp(): void {
    const started = performance.now();
    try {
      if (db.open && !db.inTransaction) db.pragma("wal_checkpoint(PASSIVE)");
    } catch {
      // Busy or closing: the next round, or the backstop, copies it.
    }
    onLoopMs += performance.now() - started;
  }

  /** The worker cannot run: SQLite's automatic checkpoint takes over again, as before. */
  function fail(): void {
    if (state === "closed" || state === "failed") return;
    state = "failed";
    inFlight = false;
    autocheckpoint(DEFAULT_AUTOCHECKPOINT_PAGES);
  }

  /** Starts the worker; false when it could not be created. */
  function start(): boolean {
    state = "starting";
    try {
      worker = new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { driver: driverPath(), path, busyTimeoutMs },
      });
    } catch {
      fail();
      return false;
    }
    // A process that is done does not wait for the checkpointer.
    worker.unref();
    const current = worker;
    exited = new Promise((resolve) => current.once("exit", () => resolve()));
    current.on("message", (message: unknown) => {
      if (message === "ready") {
        if (state !== "starting") return;
        state = "running";
        autocheckpoint(BACKSTOP_PAGES);
        return;
      }
      inFlight = false;
      if (state !== "running") return;
      checkpoints++;
      // The WAL held `log` frames: those written since the last checkpoint are the growth (or all
      // of them, when it started over in between). Ask sooner or later next time, towards one
      // checkpoint per DEFAULT_AUTOCHECKPOINT_PAGES frames.
      const log = Number((message as { log?: unknown }).log);
      const frames = log >= lastLog ? log - lastLog : log;
      lastLog = log;
      if (frames < DEFAULT_AUTOCHECKPOINT_PAGES / 2) intervalMs = Math.min(intervalMs * 2, MAX_INTERVAL_MS);
      else if (frames > DEFAULT_AUTOCHECKPOINT_PAGES * 2)
        intervalMs = Math.max(intervalMs / 2, MIN_INTERVAL_MS);
      const checkpointed = Number((message as { checkpointed?: unknown }).checkpointed);
      if (commits !== commitsWhenAsked || checkpointed < log) catchUp();
    });
    current.on("error", fail);
    current.on("exit", fail);
    return true;
  }

  return {
    committed() {
      commits++;
      if (state === "failed" || state === "closed" || inFlight) return;
      if (commits < options.startAfterCommits) return;
      const now = performance.now();
      if (now - lastAsked < intervalMs) return;
      lastAsked = now;
      if (state === "idle" && !start()) return;
      if (!worker) return;
      inFlight = true;
      commitsWhenAsked = commits;
      // Messages queue until the worker is ready; the first checkpoint runs as soon as it is.
      worker.postMessage("checkpoint");
    },
    async close() {
      if (state === "closed") return;
      const wasFailed = state === "failed";
      state = "closed";
      if (!worker || !exited) return;
      if (!wasFailed) worker.postMessage("close");
      // A checkpoint under way finishes first (it is bounded by the WAL's size); a worker that
      // does not answer within the bound is stopped (a checkpoint cut short is safe: SQLite
      // resumes from the WAL).
      const timer = setTimeout(() => void worker?.terminate(), 5000);
      await exited;
      clearTimeout(timer);
    },
    stats: () => ({ checkpoints, running: state === "running", onLoopMs }),
  };
}
