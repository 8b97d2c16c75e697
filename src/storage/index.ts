/**
 * `gatehouse/storage`: the storage contract and `openStore`. The backends live in their own
 * subpaths (`gatehouse/storage/memory`, `/sqlite`, `/postgres`); nothing here loads a driver.
 */
export * from "./contract.js";
export { isPostgresUrl, type OpenStoreOptions, openStore, SQLITE_FILE_NAME, sqlitePathFor } from "./open.js";
