/**
 * The SQLite database file and the errors SQLite and the file system raise about it.
 */

import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { StorageConflictError, StorageUnavailableError } from "../contract.js";

/** Result codes that mean "the database cannot serve us now", not "the request is wrong". */
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|READONLY|FULL|IOERR|CANTOPEN|NOTADB|CORRUPT|PROTOCOL|NOMEM)/;

/** Turns driver errors into the contract's error types; anything else (a throwing `check`) passes. */
export function translate(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") {
    if (UNAVAILABLE.test(code))
      return new StorageUnavailableError(`SQLite unavailable (${code})`, { cause: error });
    if (code === "SQLITE_CONSTRAINT_PRIMARYKEY" || code === "SQLITE_CONSTRAINT_UNIQUE") {
      return new StorageConflictError("record already exists", { cause: error });
    }
  }
  // The file system refused the database file or its directory.
  if (typeof code === "string" && /^E(NOTDIR|ACCES|PERM|ROFS|NOSPC|DQUOT|IO|ISDIR|NOENT)$/.test(code)) {
    return new StorageUnavailableError(`SQLite file unavailable (${code})`, { cause: error });
  }
  if (error instanceof TypeError && /database connection is not open/.test(error.message)) {
    return new StorageUnavailableError("SQLite store is closed", { cause: error });
  }
  return error;
}

/** Creates the directory (0700) and an empty file (0600) so SQLite never creates them world-readable. */
export function prepareFile(path: string, readonly: boolean): void {
  if (path === ":memory:" || readonly) return;
  const dir = dirname(path);
  // The database holds signing keys and password hashes: keep it private to the service user.
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!existsSync(path)) {
    closeSync(openSync(path, "a", 0o600));
    chmodSync(path, 0o600);
  } else if (statSync(path).isDirectory()) {
    throw new StorageUnavailableError("SQLite path is a directory");
  }
}
