/**
 * Authorization-server instances for the scale and fault tests: real `gatehouse serve` processes
 * (the built CLI, `dist/cli/main.js`) on loopback, sharing one SQLite file or one PostgreSQL
 * database, plus the fixtures they need (a throw-away PostgreSQL database, a user, a client).
 *
 * Every instance gets the same issuer, as behind a load balancer: the tests pick which instance
 * serves each request, so any instance must be able to serve any step.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { hashPassword } from "../../src/authorization-server/core/password.js";
import type { AuthorizationStore, ClientRecord } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";

/** The PostgreSQL server of the project's machines (trust auth). */
export const POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/test";
/** The issuer every instance shares: the address of an (imagined) load balancer in front of them. */
export const SHARED_ISSUER = "http://127.0.0.1:8999";
export const RESOURCE = "http://127.0.0.1:9001/mcp";
export const SCOPES = "notes:read notes:write";
export const CLIENT_ID = "scale-test-app";
export const REDIRECT_URI = "http://127.0.0.1:9002/callback";
export const PASSWORD = "correct horse battery staple";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
/** `gatehouse serve` with the test-only crash switch (test/faults/serve-with-fault.mjs). */
const SERVE_WITH_FAULT = fileURLToPath(new URL("../faults/serve-with-fault.mjs", import.meta.url));

export type Database = { kind: "sqlite"; dataDir: string } | { kind: "postgres"; url: string };

export interface Instance {
  /** `http://127.0.0.1:<port>` */
  base: string;
  pid: number;
  /** Everything the process wrote to stderr (JSON log lines), for failure messages. */
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM and wait (graceful shutdown); a no-op when already gone. */
  stop(): Promise<void>;
}

export interface StartOptions {
  database: Database;
  /**
   * Arms `GATEHOUSE_TEST_FAULT` (test/faults/fault-injection.ts) in this process, which then runs
   * the serve command through test/faults/serve-with-fault.mjs instead of the CLI's entry point.
   */
  fault?: string;
  /** Behind a proxy: `X-Forwarded-For` names the client (the bench varies it per browser). */
  trustProxy?: boolean;
  extraArgs?: string[];
}

/** The CLI flags naming `database`. */
export function databaseArgs(database: Database): string[] {
  return database.kind === "sqlite" ? ["--data", database.dataDir] : ["--database-url", database.url];
}

/** Runs a one-shot `gatehouse` command (an admin command) and returns its output; throws on a non-zero exit. */
export function runCli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.GATEHOUSE_DATABASE_URL;
    delete env.GATEHOUSE_TEST_FAULT;
    execFile(process.execPath, [MAIN, ...args], { env, timeout: 30_000 }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`gatehouse ${args[0]} ${args[1] ?? ""} failed: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** Starts `gatehouse serve` on a free loopback port and waits for its ready line. */
export async function startInstance(options: StartOptions): Promise<Instance> {
  if (!existsSync(MAIN)) {
    throw new Error(
      `${MAIN} is missing: run \`npm run build\` first (the instances are built CLI processes)`,
    );
  }
  const args = [
    ...(options.fault ? [SERVE_WITH_FAULT] : [MAIN, "serve"]),
    "--insecure-loopback",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--issuer",
    SHARED_ISSUER,
    "--resource",
    RESOURCE,
    "--scopes",
    SCOPES,
    "--no-request-log",
    "--json",
    ...databaseArgs(options.database),
    ...(options.trustProxy ? ["--trust-proxy"] : []),
    ...(options.extraArgs ?? []),
  ];
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.GATEHOUSE_DATABASE_URL;
  delete env.GATEHOUSE_TEST_FAULT;
  if (options.fault) env.GATEHOUSE_TEST_FAULT = options.fault;
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    // Keep the tail only: a long run logs a lot.
    stderr = (stderr + chunk).slice(-20_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const port = await readyPort(child, exited, () => stderr);
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid ?? -1,
    stderr: () => stderr,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function readyPort(
  child: ChildProcess,
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  stderr: () => string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gatehouse serve did not report ready within 30 s; stderr:\n${stderr()}`));
    }, 30_000);
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      for (const line of stdout.split("\n")) {
        if (!line.startsWith("{")) continue;
        try {
          const event = JSON.parse(line) as { event?: string; port?: number };
          if (event.event === "ready" && typeof event.port === "number") {
            clearTimeout(timer);
            resolve(event.port);
          }
        } catch {
          // A partial line; the rest comes with the next chunk.
        }
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(
        new Error(`gatehouse serve exited (${code ?? signal}) before it was ready; stderr:\n${stderr()}`),
      );
    });
  });
}

/** Stops every instance given (ignoring ones already gone). */
export async function stopAll(instances: Iterable<Instance | undefined>): Promise<void> {
  await Promise.all([...instances].map((i) => i?.stop()));
}

/** A database of its own on the local PostgreSQL, dropped by `drop()`. */
export interface TestDatabase {
  url: string;
  name: string;
  /** Runs SQL as the admin on the `test` database (for faults: locks, connection limits). */
  admin: pg.Client;
  drop(): Promise<void>;
}

/**
 * Creates `gh_<prefix>_<random>` on 127.0.0.1:5432. Fails with a message naming what it could not
 * reach when PostgreSQL is not there (the test must fail, not skip).
 */
export async function createTestDatabase(prefix: string): Promise<TestDatabase> {
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL} (${(error as Error).message}); ` +
        "these tests need it: start it (scripts/ensure-test-services.sh) and run again",
    );
  }
  const name = `gh_${prefix}_${randomBytes(4).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  return {
    url: `postgres://postgres@127.0.0.1:5432/${name}`,
    name,
    admin,
    async drop() {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`).catch(() => {});
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/** Opens (and migrates) the same database the instances use, from the test process. */
export async function openDatabase(database: Database): Promise<AuthorizationStore> {
  const store =
    database.kind === "sqlite"
      ? createSqliteStore({ path: `${database.dataDir}/gatehouse.sqlite` })
      : createPostgresStore({ connectionString: database.url });
  await store.migrate();
  return store;
}

/** A fresh store of either backend (SQLite in a temp directory, PostgreSQL in its own database), for in-process servers. */
export async function createBackend(
  kind: "SQLite" | "PostgreSQL",
  prefix: string,
): Promise<{ store: AuthorizationStore; cleanup(): Promise<void> }> {
  if (kind === "SQLite") {
    const dir = await mkdtemp(join(tmpdir(), `gatehouse-${prefix}-`));
    const store = createSqliteStore({ path: join(dir, "gatehouse.sqlite") });
    return {
      store,
      async cleanup() {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  const db = await createTestDatabase(prefix);
  const store = createPostgresStore({ connectionString: db.url });
  return {
    store,
    async cleanup() {
      await store.close();
      await db.drop();
    },
  };
}

/** The public test client (PKCE, refresh tokens) every flow uses. */
export function testClient(overrides: Partial<ClientRecord> = {}): ClientRecord {
  return {
    clientId: CLIENT_ID,
    source: "preregistered",
    clientName: "Scale test",
    redirectUris: [REDIRECT_URI],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: Date.now(),
    ...overrides,
  };
}

let cachedHash: Promise<string> | undefined;

/** Creates users `prefix-0..count-1` sharing one scrypt hash of {@link PASSWORD} (hashing is slow). */
export async function createUsers(store: AuthorizationStore, prefix: string, count = 1): Promise<string[]> {
  cachedHash ??= hashPassword(PASSWORD);
  const passwordHash = await cachedHash;
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const username = `${prefix}-${i}`;
    await store.createUser({
      id: `user-${username}`,
      username,
      passwordHash,
      isAdmin: false,
      createdAt: Date.now(),
    });
    names.push(username);
  }
  return names;
}
