/**
 * `gatehouse/storage/postgres`: the PostgreSQL backend (`pg`), for several server instances
 * sharing one database. Importing it loads `pg`; `gatehouse/storage` does not.
 */
export { createPostgresStore, type PostgresStore, type PostgresStoreOptions } from "./store.js";
