/**
 * `gatehouse/storage/sqlite`: the SQLite backend (better-sqlite3), the default for one instance.
 * Importing it loads the native module; `gatehouse/storage` does not.
 */
export { createSqliteStore, type SqliteStore, type SqliteStoreOptions } from "./store.js";
