/**
 * Reads in the token store's directory that never follow a symbolic link. The directory is the
 * user's own (0700), but a link planted there (by another tool, a restore, a shared home) could
 * point the store's reads at a file it does not own, or, left dangling, make "the file exists"
 * (O_EXCL says EEXIST) and "the file is gone" (a following read says ENOENT) both true at once,
 * which is how a lock loop spun forever (issue 22). So every read opens with O_NOFOLLOW, and a
 * link is refused with an error that says what it is; writes already create with O_EXCL (which
 * never follows) and publish by rename or link (which replace or refuse the name, not its target).
 */
import { constants } from "node:fs";
import { lstat, open } from "node:fs/promises";
import { TokenStoreError } from "./errors.js";

/**
 * A symbolic link (or another non-regular file) where the store expects one of its own files.
 * Code ERR_STORE_PATH_UNSAFE.
 */
export class StorePathSymlinkError extends TokenStoreError<"ERR_STORE_PATH_UNSAFE"> {
  readonly path: string;
  constructor(path: string, what = "a symbolic link") {
    super(
      "ERR_STORE_PATH_UNSAFE",
      `${path} is ${what}; Gatehouse does not follow symbolic links or open special files in its store directory: remove it and try again`,
    );
    this.name = "StorePathSymlinkError";
    this.path = path;
  }
}

function isErrno(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

/**
 * The file's text and mtime, or undefined when there is no file. Refuses a symbolic link (ELOOP
 * under O_NOFOLLOW) and anything but a regular file (O_NONBLOCK so that a FIFO cannot hold the
 * open); reads at most `maxBytes` (the store's files are small, a larger one is not ours).
 */
export async function readFileNoFollow(
  path: string,
  maxBytes: number,
): Promise<{ text: string; mtimeMs: number } | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (isErrno(error, "ENOENT")) return undefined;
    if (isErrno(error, "ELOOP")) throw new StorePathSymlinkError(path);
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new StorePathSymlinkError(path, "not a regular file");
    if (info.size > maxBytes)
      throw new TokenStoreError(
        "ERR_STORE_UNREADABLE",
        `${path} is larger than ${maxBytes} bytes; it is not a store file`,
      );
    const buffer = Buffer.alloc(Math.max(info.size, 0));
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { text: buffer.subarray(0, filled).toString("utf8"), mtimeMs: info.mtimeMs };
  } finally {
    await handle.close();
  }
}

/** Whether `path` exists, judged without following a link: a link there is refused. */
export async function existsNoFollow(path: string): Promise<boolean> {
  try {
    const info = await lstat(path);
    if (info.isSymbolicLink()) throw new StorePathSymlinkError(path);
    return true;
  } catch (error) {
    if (isErrno(error, "ENOENT")) return false;
    throw error;
  }
}
