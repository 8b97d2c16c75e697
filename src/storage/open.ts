/**
 * Opens the store a deployment names with one string (the CLI's `--store`, `GATEHOUSE_STORE`):
 * a `postgres://` / `postgresql://` URL selects PostgreSQL, anything else is a SQLite file path
 * (a directory, or a path ending in a separator, holds `gatehouse.sqlite`; a `file:` URL works too).
 *
 * The drivers are imported dynamically so that importing `gatehouse/storage` never loads a
 * native module or `pg`.
 */

import { existsSync, statSync } from "node:fs";
import { join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { GatehouseTypeError } from "../shared/errors.js";
import type { AuthorizationStore } from "./contract.js";

export interface OpenStoreOptions {
  /** SQLite: how long a write waits for another process's lock (default 5000 ms). */
  busyTimeoutMs?: number;
  /** PostgreSQL: schema for Gatehouse's tables (default `gatehouse`). */
  schema?: string;
  /** PostgreSQL: pool size (default 10). */
  max?: number;
  /** PostgreSQL: server-side statement timeout (default 10 000 ms). */
  statementTimeoutMs?: number;
  /** Run `migrate()` before returning (default true). */
  migrate?: boolean;
}

/** The default file name inside a store directory. */
export const SQLITE_FILE_NAME = "gatehouse.sqlite";

/** Where a non-URL target puts the SQLite database. */
export function sqlitePathFor(target: string): string {
  const path = target.startsWith("file:") ? fileURLToPath(target) : target;
  if (path.endsWith(sep) || path.endsWith("/")) return join(path, SQLITE_FILE_NAME);
  if (existsSync(path) && statSync(path).isDirectory()) return join(path, SQLITE_FILE_NAME);
  return path;
}

export function isPostgresUrl(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/** Opens (and by default migrates) the store `target` names. */
export async function openStore(target: string, options: OpenStoreOptions = {}): Promise<AuthorizationStore> {
  if (target.trim() === "") throw new GatehouseTypeError("ERR_INVALID_OPTION", "store target is empty");
  let store: AuthorizationStore;
  if (isPostgresUrl(target)) {
    const { createPostgresStore } = await import("./postgres/index.js");
    store = createPostgresStore({
      connectionString: target,
      ...(options.schema === undefined ? {} : { schema: options.schema }),
      ...(options.max === undefined ? {} : { max: options.max }),
      ...(options.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: options.statementTimeoutMs }),
    });
  } else {
    const { createSqliteStore } = await import("./sqlite/index.js");
    store = createSqliteStore({
      path: sqlitePathFor(target),
      ...(options.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: options.busyTimeoutMs }),
    });
  }
  if (options.migrate !== false) {
    try {
      await store.migrate();
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
  }
  return store;
}
