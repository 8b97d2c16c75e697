/**
 * Connection pool, transactions and error translation for the PostgreSQL store.
 */

import { createHash } from "node:crypto";
import pg from "pg";
import { GatehouseTypeError } from "../../shared/errors.js";
import { StorageConflictError, StorageUnavailableError } from "../contract.js";
import type { Row } from "../sql/rows.js";

export interface PostgresStoreOptions {
  /** `postgres://user@host:port/database`. Never logged: it may carry a password. */
  connectionString: string;
  /** Schema holding Gatehouse's tables (created by `migrate()`); default `gatehouse`. */
  schema?: string;
  /** Pool size (default 10). */
  max?: number;
  /** Server-side cap on any one statement (default 10 000 ms). */
  statementTimeoutMs?: number;
  /** How long to wait for a connection before failing (default 5000 ms). */
  connectionTimeoutMs?: number;
  /**
   * Named server-side prepared statements (default true): each connection parses and plans a
   * statement once instead of on every run. Set false behind a pooler that does not keep them
   * (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`); a store
   * that finds its statements missing turns them off by itself.
   */
  preparedStatements?: boolean;
}

export type Query = (text: string, params?: unknown[]) => Promise<Row[]>;
export type Execute = (text: string, params?: unknown[]) => Promise<number>;

export interface Db {
  pool: pg.Pool;
  schema: string;
  query: Query;
  execute: Execute;
  /** Runs `fn` in one READ COMMITTED transaction, retrying serialization failures and deadlocks. */
  transaction<T>(fn: (tx: { query: Query; execute: Execute }) => Promise<T>): Promise<T>;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Network-level failures of the driver (no SQLSTATE). */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "EAI_AGAIN",
]);

/** Transient conflicts between transactions: safe to run the whole transaction again. */
const RETRYABLE = new Set(["40001", "40P01"]);

/**
 * What a named prepared statement can fail with before it ran (nothing happened): its plan no
 * longer fits a table another instance altered (0A000, "cached plan must not change result type",
 * a rolling upgrade adding a column), or a pooler in front moved the session to a server
 * connection that does not hold it (26000) or already holds it (42P05). The connection is
 * dropped (its statements with it) and the statement or transaction runs again; for the two
 * pooler errors the store stops naming statements.
 */
const STALE_PLAN = "0A000";
const POOLER_LOST_IT = new Set(["26000", "42P05"]);

/** Most statement texts a pool names (each of its connections keeps the ones it ran). */
const MAX_NAMED_STATEMENTS = 2000;

/**
 * Prepared statement names: derived from the text itself (SHA-256), so a name never stands for two
 * texts, even across processes of different versions behind one pooler, and from a generation a
 * stale plan moves on (every connection then prepares the statement afresh, under its new name).
 * Only statements with parameters are named: the rest (BEGIN, COMMIT, a migration's DDL) have no
 * plan worth keeping, and a migration's several statements need the simple protocol.
 */
function statementNames(): { name(text: string): string | undefined; renew(): void } {
  const names = new Map<string, string>();
  let generation = 0;
  return {
    name(text) {
      let name = names.get(text);
      if (name === undefined) {
        if (names.size >= MAX_NAMED_STATEMENTS) return undefined;
        const digest = createHash("sha256").update(`${generation}\0${text}`).digest("base64url");
        name = `gh_${digest.slice(0, 32)}`;
        names.set(text, name);
      }
      return name;
    },
    renew() {
      generation++;
      names.clear();
    },
  };
}

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : "";
}

function isConnectionFailure(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) {
    // Class 08 connection exception; 57P01-03 shutdown / cannot connect now; class 53 insufficient
    // resources (disk full, too many connections); 57014 statement timeout; 25006 read-only replica.
    if (NETWORK_CODES.has(code) || code.startsWith("08") || code.startsWith("53")) return true;
    if (code === "57P01" || code === "57P02" || code === "57P03" || code === "57014" || code === "25006")
      return true;
    if (code === "58030" || code === "XX001") return true;
    // 55000 at connection start-up: the database is not accepting connections (maintenance,
    // ALLOW_CONNECTIONS false). Other 55000 errors are real bugs and stay errors.
    if (code === "55000" && /accepting connections|allow connections/i.test(errorMessage(error))) return true;
  }
  const message = error instanceof Error ? error.message : "";
  return /Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end|Client has encountered a connection error|Connection terminated unexpectedly/i.test(
    message,
  );
}

/**
 * Where the pool connects, for messages: host, port, database and user from the connection
 * string, never the password (PostgresStoreOptions: the string itself is never logged). A host
 * given as the `host` query parameter (a Unix socket directory) is named as such.
 */
export function describeTarget(connectionString: string): string {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return "PostgreSQL (connection string not a URL)";
  }
  const host = url.searchParams.get("host") ?? (url.hostname || "localhost");
  const port = url.port || "5432";
  const user = decodeURIComponent(url.username);
  const database = decodeURIComponent(url.pathname.replace(/^\//, "")) || user;
  return `PostgreSQL at ${host}:${port}/${database}${user ? ` (user ${user})` : ""}`;
}

/**
 * PostgreSQL's own reason for a failure to connect or to run (its message names the database or
 * role it refused, never a password), or the driver's for the network, with the SQLSTATE or errno.
 */
function reason(error: unknown): string {
  const code = sqlState(error);
  const message = errorMessage(error)
    // One line in a log or on a terminal: control characters become spaces.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters
    .replace(/[\u0000-\u001f\u007f]/g, " ")
    .slice(0, 300);
  return `${message || "no reason given"}${code && !message.includes(code) ? ` (${code})` : ""}`;
}

/**
 * Turns driver errors into the contract's types; errors thrown by a caller's `check` pass as is.
 * `target` ({@link describeTarget}) names where a connection failed.
 */
export function translate(error: unknown, target = "PostgreSQL"): unknown {
  if (error instanceof StorageUnavailableError || error instanceof StorageConflictError) return error;
  const code = sqlState(error);
  if (code === "23505") return new StorageConflictError("record already exists", { cause: error });
  if (code !== undefined && RETRYABLE.has(code)) {
    return new StorageUnavailableError(`PostgreSQL kept aborting the transaction (${code})`, {
      cause: error,
    });
  }
  if (isConnectionFailure(error)) {
    return new StorageUnavailableError(`${target} unavailable: ${reason(error)}`, { cause: error });
  }
  return error;
}

export function openPool(options: PostgresStoreOptions): Db {
  const schema = options.schema ?? "gatehouse";
  if (!SCHEMA_NAME.test(schema)) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "schema must be a lowercase SQL identifier ([a-z_][a-z0-9_]*)",
    );
  }
  const statementTimeoutMs = options.statementTimeoutMs ?? 10_000;
  if (!Number.isInteger(statementTimeoutMs) || statementTimeoutMs < 0) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "statementTimeoutMs must be a non-negative integer");
  }
  const target = describeTarget(options.connectionString);
  let prepare = options.preparedStatements ?? true;
  const statementName = statementNames();
  /** The driver's query: named (prepared once per connection) when it has parameters. */
  const config = (text: string, values: unknown[] | undefined): pg.QueryConfig => {
    const name = prepare && values !== undefined && values.length > 0 ? statementName.name(text) : undefined;
    return name === undefined ? { text, values } : { name, text, values };
  };
  /**
   * Whether `error` is a prepared statement's failure before it ran (STALE_PLAN, POOLER_LOST_IT):
   * then running it again on another connection is safe. A pooler's turns naming off.
   */
  const failedUnprepared = (error: unknown): boolean => {
    const code = sqlState(error);
    if (code !== undefined && POOLER_LOST_IT.has(code)) {
      prepare = false;
      return true;
    }
    if (code !== STALE_PLAN || !/cached plan must not change result type/i.test(errorMessage(error)))
      return false;
    statementName.renew();
    return true;
  };
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
    statement_timeout: statementTimeoutMs,
    // The schema name was validated above, so it needs no quoting here.
    options: `-c search_path=${schema}`,
    application_name: "gatehouse",
  });
  // An idle connection dropped by the server (restart, admin shutdown) must not crash the
  // process; the next query gets a fresh connection or a StorageUnavailableError.
  pool.on("error", () => {});

  /**
   * One statement outside a transaction. A pooled connection the server already closed fails at
   * once; the statement then runs once more on a fresh connection. Every such statement is a
   * read or fails closed when repeated (a second DELETE ... RETURNING finds nothing, a second
   * revocation changes nothing), and a statement timeout is never repeated.
   */
  async function statement(text: string, params: unknown[] | undefined): Promise<pg.QueryResult> {
    try {
      return await pool.query(config(text, params));
    } catch (error) {
      // A failed query's connection is not reused (pg-pool releases it with the error), so a stale
      // prepared statement goes with it.
      const unprepared = failedUnprepared(error);
      if (!unprepared && (!isConnectionFailure(error) || sqlState(error) === "57014"))
        throw translate(error, target);
      try {
        return await pool.query(config(text, params));
      } catch (again) {
        throw translate(again, target);
      }
    }
  }
  const query: Query = async (text, params) => (await statement(text, params)).rows as Row[];
  const execute: Execute = async (text, params) => (await statement(text, params)).rowCount ?? 0;

  async function transaction<T>(fn: (tx: { query: Query; execute: Execute }) => Promise<T>): Promise<T> {
    let staleConnections = 0;
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        // Whatever stops us getting a connection (refused, shutting down, not accepting
        // connections, pool ended) means the database is unavailable for this request.
        // PostgreSQL's reason tells a missing database (3D000) from an unknown role (28000) or a
        // refused connection (ECONNREFUSED); the target says where it was tried.
        const translated = translate(error, target);
        throw translated instanceof StorageConflictError || translated instanceof StorageUnavailableError
          ? translated
          : new StorageUnavailableError(`${target} unavailable: ${reason(error)}`, { cause: error });
      }
      const tx = {
        query: async (text: string, params?: unknown[]) =>
          (await client.query(config(text, params))).rows as Row[],
        execute: async (text: string, params?: unknown[]) =>
          (await client.query(config(text, params))).rowCount ?? 0,
      };
      try {
        await client.query("BEGIN");
      } catch (error) {
        // A pooled connection the server already closed (restart, pg_terminate_backend) fails at
        // BEGIN before anything happened: drop it and start again on a fresh one.
        const broken = isConnectionFailure(error);
        client.release(broken ? (error as Error) : undefined);
        // Bounded by the pool size: every idle connection may be a stale one.
        if (broken && ++staleConnections <= (options.max ?? 10)) {
          attempt--;
          continue;
        }
        throw translate(error, target);
      }
      try {
        const result = await fn(tx);
        await client.query("COMMIT");
        client.release();
        return result;
      } catch (error) {
        const broken = isConnectionFailure(error);
        // A prepared statement that failed before it ran: the connection goes (with its stale
        // statements) and the transaction runs again from the start on another.
        const unprepared = failedUnprepared(error);
        if (!broken) await client.query("ROLLBACK").catch(() => {});
        // A connection in an unknown state is destroyed rather than returned to the pool.
        client.release(broken || unprepared ? (error as Error) : undefined);
        if (unprepared && attempt < 5) continue;
        // `fn` is deterministic (callers' checks are pure), so a transaction the server aborted
        // for a conflict can run again from the start.
        const code = sqlState(error);
        if (code !== undefined && RETRYABLE.has(code) && attempt < 5) continue;
        throw translate(error, target);
      }
    }
  }

  return { pool, schema, query, execute, transaction };
}
