/**
 * `gatehouse-auth/storage`: the storage contract (`AuthorizationStore`, its records and results,
 * its two errors), `openStore` and `sqlitePathFor` (which file `openStore` opens for a directory).
 * The backends live in their own subpaths (`gatehouse-auth/storage/memory`, `/sqlite`,
 * `/postgres`); nothing here loads a driver. How a target is told apart (`isPostgresUrl`) and the
 * default file name stay inside open.ts.
 */
export * from "./contract.js";
export { type OpenStoreOptions, openStore, sqlitePathFor } from "./open.js";
