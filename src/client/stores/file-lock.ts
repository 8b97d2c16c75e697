/**
 * A lock shared by every process that opens the same store directory: a lock file created with
 * O_EXCL (`wx`), holding the owner's pid, host and start time. Used around refresh so that two
 * processes holding one rotating refresh token present it once between them (RFC 9700 §4.14.2:
 * presenting a rotated refresh token again makes the authorization server revoke the grant), and
 * around the encrypted file's read-modify-write so that one process's save never drops another's.
 *
 * Staleness: the owner touches the file's mtime every `staleMs / 3` while it holds the lock, so a
 * slow but living owner keeps it. A lock is taken over when its pid is dead (same host only: a pid
 * means nothing on another machine sharing the directory) or when it was not touched for `staleMs`
 * (an owner frozen or on another host). "Not touched" is judged by the mtime and by the taker's own
 * clock: a record (nonce and mtime) seen unchanged for `staleMs` is stale whatever date its mtime
 * claims, so a lock written on a host whose clock runs ahead (an mtime in the future) cannot block
 * every taker until that date (issue 22). Takeovers are serialized through a second O_EXCL file,
 * and the taker re-reads the lock under it, so a lock that was released and re-taken meanwhile is
 * never removed by mistake.
 *
 * Every wait ends: each pass of the loop sleeps and checks the deadline, whatever it found (a lock
 * released between create and read, a takeover that did not happen). Symbolic links at the lock
 * paths are refused, never followed (no-follow.ts): a dangling one made O_EXCL say "exists" and the
 * read say "gone" forever.
 */
import { randomBytes } from "node:crypto";
import { lutimes, open, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { TokenStoreError } from "./errors.js";
import { readFileNoFollow } from "./no-follow.js";

export interface FileLockOptions {
  /** A lock not touched for this long is taken over. Default 30 s. */
  staleMs?: number;
  /** How long to wait for a living owner before giving up. Default 120 s. */
  waitMs?: number;
}

const DEFAULT_STALE_MS = 30_000;
const DEFAULT_WAIT_MS = 120_000;
/** A takeover guard is held for a few file operations; older than this, its owner is gone. */
const GUARD_STALE_MS = 10_000;
/** A lock file holds one small JSON record; anything larger is not one of ours. */
const MAX_LOCK_FILE_BYTES = 4096;

interface LockOwner {
  pid: number;
  host: string;
  /** When the owner took the lock (ms since the epoch); informational, staleness uses the mtime. */
  created_at: number;
  /** Tells this holding apart from a later one by the same pid. */
  nonce: string;
}

/**
 * The error when a living owner keeps the lock past `waitMs`; names the file and the pid, nothing
 * else. Code ERR_STORE_LOCK_TIMEOUT.
 */
export class LockTimeoutError extends TokenStoreError<"ERR_STORE_LOCK_TIMEOUT"> {
  constructor(path: string, owner: LockOwner | undefined) {
    super(
      "ERR_STORE_LOCK_TIMEOUT",
      `timed out waiting for the lock ${path}${owner ? ` (held by pid ${owner.pid} on ${owner.host})` : ""}`,
    );
    this.name = "LockTimeoutError";
  }
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

/** False only when the pid certainly does not exist (ESRCH); EPERM means it exists under another user. */
function processIsAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return !isErrno(error, "ESRCH");
  }
}

interface FoundLock {
  owner: LockOwner | undefined;
  mtimeMs: number;
}

/** The lock's record and mtime, or undefined when there is none; a symbolic link is refused. */
async function readOwner(path: string): Promise<FoundLock | undefined> {
  const file = await readFileNoFollow(path, MAX_LOCK_FILE_BYTES);
  if (!file) return undefined;
  let owner: LockOwner | undefined;
  try {
    const parsed = JSON.parse(file.text) as Partial<LockOwner>;
    if (typeof parsed.pid === "number" && typeof parsed.nonce === "string") {
      owner = {
        pid: parsed.pid,
        host: String(parsed.host ?? ""),
        created_at: Number(parsed.created_at ?? 0),
        nonce: parsed.nonce,
      };
    }
  } catch {
    // A file cut short by a crash between create and write: judged by its age alone.
  }
  return { owner, mtimeMs: file.mtimeMs };
}

/**
 * When this process first saw each record unchanged (by its own clock), per lock path: the cap on
 * an mtime in the future. A record that changes (the owner's heartbeat) starts again.
 */
class Sightings {
  readonly #seen = new Map<string, { key: string; since: number }>();
  since(path: string, found: FoundLock): number {
    const key = `${found.owner?.nonce ?? ""}|${found.mtimeMs}`;
    const known = this.#seen.get(path);
    if (known?.key === key) return known.since;
    const since = Date.now();
    this.#seen.set(path, { key, since });
    return since;
  }
}

function isStale(found: FoundLock, staleMs: number, firstSeen: number): boolean {
  const now = Date.now();
  if (now - found.mtimeMs > staleMs) return true;
  // The cap on a claimed freshness: however far ahead the mtime, unchanged for staleMs here is stale.
  if (now - firstSeen > staleMs) return true;
  const { owner } = found;
  return owner !== undefined && owner.host === hostname() && !processIsAlive(owner.pid);
}

/** Creates `path` exclusively with a fresh owner record; undefined when it already exists. */
async function tryCreate(path: string): Promise<LockOwner | undefined> {
  const owner: LockOwner = {
    pid: process.pid,
    host: hostname(),
    created_at: Date.now(),
    nonce: randomBytes(12).toString("base64url"),
  };
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "wx", 0o600);
  } catch (error) {
    if (isErrno(error, "EEXIST")) return undefined;
    throw error;
  }
  try {
    await handle.writeFile(JSON.stringify(owner));
  } finally {
    await handle.close();
  }
  return owner;
}

/** Removes `path` only while it still holds `nonce`'s record (not a successor's). */
async function removeIfOwned(path: string, nonce: string | undefined): Promise<void> {
  const found = await readOwner(path);
  if (!found || found.owner?.nonce !== nonce) return;
  await unlink(path).catch((error) => {
    if (!isErrno(error, "ENOENT")) throw error;
  });
}

/**
 * Removes a stale lock, serialized with every other taker through `<path>.takeover`: under the
 * guard the lock is read again and removed only if it is the same stale record that was seen.
 */
async function takeOver(path: string, seen: FoundLock, sightings: Sightings): Promise<void> {
  const guardPath = `${path}.takeover`;
  const guard = await tryCreate(guardPath);
  if (!guard) {
    const other = await readOwner(guardPath);
    if (other && isStale(other, GUARD_STALE_MS, sightings.since(guardPath, other))) {
      await removeIfOwned(guardPath, other.owner?.nonce);
    }
    return;
  }
  try {
    const now = await readOwner(path);
    if (now && now.owner?.nonce === seen.owner?.nonce && now.mtimeMs === seen.mtimeMs) {
      await unlink(path).catch((error) => {
        if (!isErrno(error, "ENOENT")) throw error;
      });
    }
  } finally {
    await removeIfOwned(guardPath, guard.nonce);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `task` while holding the lock file `path` (created 0600), then removes it. Waits (polling,
 * with a growing pause up to 200 ms) while a living owner holds it; takes over a stale one. Throws
 * `LockTimeoutError` once `waitMs` has passed without the lock, and `StorePathSymlinkError` when a
 * symbolic link sits at the lock path or its takeover guard.
 */
export async function withFileLock<T>(
  path: string,
  task: () => Promise<T>,
  options: FileLockOptions = {},
): Promise<T> {
  const staleMs = options.staleMs ?? DEFAULT_STALE_MS;
  const deadline = Date.now() + (options.waitMs ?? DEFAULT_WAIT_MS);
  const sightings = new Sightings();
  let pause = 10;
  let owner: LockOwner | undefined;
  for (;;) {
    owner = await tryCreate(path);
    if (owner) break;
    // Undefined when it was released between our create and our read: the next pass creates it.
    const found = await readOwner(path);
    if (found && isStale(found, staleMs, sightings.since(path, found))) {
      await takeOver(path, found, sightings);
    }
    // Every pass, whatever it found, counts against the deadline: no path through the loop spins.
    if (Date.now() >= deadline) throw new LockTimeoutError(path, found?.owner);
    await sleep(pause);
    pause = Math.min(pause * 2, 200);
  }
  // Keeps a long task's lock fresh, so nobody judges a living owner stale by its age.
  const heartbeat = setInterval(
    () => {
      const now = new Date();
      // lutimes: a link swapped in for our lock is not followed to touch someone else's file.
      lutimes(path, now, now).catch(() => {});
    },
    Math.max(Math.floor(staleMs / 3), 1),
  );
  heartbeat.unref();
  try {
    return await task();
  } finally {
    clearInterval(heartbeat);
    await removeIfOwned(path, owner.nonce);
  }
}
