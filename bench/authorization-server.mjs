#!/usr/bin/env node
/**
 * Authorization-server benchmark: the authorization-server rows of issues 11 and 25 side by side
 * in one run,
 *
 * - code flows per second by a signed-in browser session ("sessions"): GET /authorize answered
 *   silently from the session and a remembered consent, then POST /token with the PKCE verifier;
 *   all loops share one user and one session;
 * - the same user re-authorizing the same client ("reauth", issue 25's outside driver): each loop
 *   (16 by default, `--reauth-concurrency`) its own user and browser session, re-authorizing the
 *   pre-registered https client again and again. Both flow cases supersede grants: past 32 active
 *   grants in one sign-in (MAX_ACTIVE_GRANTS_PER_SIGN_IN) each new grant retires the oldest, so in
 *   steady state every flow also revokes one grant (a re-login without a step-up mark or DPoP key
 *   cannot be told from a sibling instance, grants/superseded-grants.ts); `sessions` already did
 *   that, in one shared session, and `reauth` is the added case with the driver's shape;
 * - refresh grants per second: POST /token with grant_type=refresh_token, each loop following its
 *   own rotation chain;
 *
 * for Gatehouse (`createAuthorizationServer` from dist/, with a key-encryption key as `gatehouse
 * serve` always has, so codes are sealed) and the peer, the MCP TypeScript SDK's `mcpAuthRouter`
 * (Express) with its in-memory demo provider (`DemoInMemoryAuthProvider`) issuing JWT access tokens
 * (ES256, jose) as Gatehouse does. Rate limits are off on both sides. The demo provider issues
 * opaque tokens and has no refresh ("Not implemented for example demo"); the JWT signing and the
 * smallest in-memory rotation are added by this script to a subclass, and the output says so.
 *
 * Besides, Gatehouse alone (the peer has no login): complete flows by a browser that is not signed
 * in ("sign-ins"): GET /authorize, the login page, POST /login with the password (scrypt, the KDF
 * kept strong on purpose), the code, POST /token. Sessions never pay scrypt; sign-ins always do.
 * Each sign-in comes from its own loopback address (127.1.x.y) and user, so the login limits per
 * address and per user (which the bench keeps on) are never reached.
 *
 * Method (issue 11): each server runs in its own child process, pinned with `taskset` to core 0
 * when `taskset` exists and there are two cores or more; this process, the load generator, pins
 * itself to core 1. All servers stay up for the whole run and are measured in interleaved repeats
 * (the order alternating per repeat); each repeat gives a ratio Gatehouse/peer, and the summary is
 * the median. Beside req/s stands the server CPU per request (user + system of the server process,
 * threads included), which depends far less on what else the shared machine is doing; its ratio
 * is peer CPU / Gatehouse CPU, so ≥ 1.0 means "at least as good" in both. The load generator's own
 * CPU per request is printed too: if it approaches 1000 ms / req/s, the generator is the limit.
 * Every row has p50, p95 and p99 latency and the error rate (failed operations ÷ attempted; a loop
 * whose operation fails starts over with a fresh session or chain). Run after `npm run build`:
 *
 *   node bench/authorization-server.mjs [--json] [--seconds 3] [--repeats 3] [--concurrency 8]
 *                                       [--reauth-concurrency 16] [--only sessions|reauth|refreshes|signIns]
 *                                       [--stores sqlite,sqlite-full,...] [--database-url postgres://...]
 *
 * Gatehouse runs on several stores side by side in one run (`--stores`, comma-separated; each its
 * own server process, all measured in the same interleaved repeats):
 *
 * - `sqlite`: durable SQLite as shipped: WAL, synchronous = NORMAL and the store's own fdatasync of
 *   the WAL off the event loop before any answer (storage/sqlite/wal-sync.ts);
 * - `sqlite-full`: the fallback, synchronous = FULL (each COMMIT syncs on the event loop);
 * - `sqlite-slow`, `sqlite-full-slow`: the same with 2 ms added to every fsync and fdatasync of the
 *   server process (a network disk's order of magnitude): the server runs under `strace -f
 *   --seccomp-bpf -e inject=fsync,fdatasync:delay_exit=2000`, which stops it only at those calls;
 *   left out, and said so, when strace is not installed;
 * - `memory`: Gatehouse's in-memory store (what Gatehouse costs without durable storage);
 * - `sqlite-nofsync`: NOT DURABLE, for attribution only, never in the default set: `sqlite` without
 *   the store's fsync (the test-only mode the power-loss test catches losing answered tokens), so
 *   that sqlite ÷ sqlite-nofsync is the fsync's share of a request and sqlite-nofsync ÷ memory the
 *   statements' share;
 * - `postgres`: one instance on PostgreSQL (`--database-url`, default
 *   postgres://postgres@127.0.0.1:5432/test or GATEHOUSE_BENCH_DATABASE_URL: the server on which the
 *   bench creates a fresh database of its own, dropped at the end);
 * - `postgres-2`: two server processes (both pinned to the servers' core) sharing one fresh
 *   database, the second started on what the first migrated and seeded, with the first one's issuer
 *   and the run's key-encryption key, as instances behind one balancer; the load generator sends
 *   each request to the next instance in turn, so a flow's /authorize and /token may land on
 *   different instances. Left out, and said so, when PostgreSQL does not answer. Before each
 *   measured window the bench runs ANALYZE on the store's database, as autovacuum keeps a running
 *   database's statistics; a fresh database is otherwise planned from its empty tables for the
 *   whole run (sequential scans of tables that grow during it).
 *
 * For the PostgreSQL stores each row also has the CPU of PostgreSQL's backends connected to that
 * database per operation (/proc/<pid>/schedstat of the pids pg_stat_activity lists; the pools keep
 * their connections for the whole run) and, for postgres-2, each instance's CPU per HTTP request.
 * On two cores ×2 cannot show scaling (both instances share core 0), so the output adds the model
 * of bench/as-postgres.mjs: with c_gh the instances' CPU and c_pg PostgreSQL's per operation,
 * X(k, N) = 1000 × min(k / c_gh, N / (c_gh + c_pg)) operations per second for k instances on N
 * cores, and the predicted ×2 ÷ ×1 for 2, 4, 8 and 16 cores (docs/scaling.md explains it).
 *
 * The default is the seven durable or memory stores (`sqlite-nofsync` only when named); `--store X` is `--stores X`. Ratios: each store against the peer, each
 * durable store against Gatehouse's own memory store, and postgres-2 against postgres.
 *
 * `--only` measures one case. `--cpu-profile DIR` profiles every server process (each instance of
 * postgres-2 apart) over the measured windows only, through node:inspector, and writes
 * DIR/<server>-<instance>.cpuprofile (BENCH_CHILD_EXEC_ARGV="--cpu-prof" profiles whole processes,
 * start-up and seeding included).
 *
 * BENCH_DIST=/abs/path/to/a/build loads Gatehouse from another build of this checkout (one inside
 * it, so its imports resolve), for before/after figures of a change.
 *
 * With --json, progress goes to stderr and the last line on stdout is one JSON object with every
 * row (each case's medians and its per-repeat runs), the ratios and the PostgreSQL model.
 */
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  benchDatabases,
  connectAdmin,
  cpuBetween,
  DEFAULT_DATABASE_URL,
  scalingModel,
} from "./as-postgres.mjs";

const SELF = fileURLToPath(import.meta.url);
/** The build Gatehouse is loaded from (BENCH_DIST: another build, e.g. to compare two versions). */
const DIST = process.env.BENCH_DIST
  ? new URL(`file://${process.env.BENCH_DIST}/`).href
  : new URL("../dist/", import.meta.url).href;
const RESOURCE = "http://127.0.0.1:9001/mcp";
const SCOPE = "notes:read offline_access";
const CLIENT_ID = "bench-client";
// An https redirect URI the pre-registered client registered: Gatehouse re-authorizes such a client
// silently from a remembered consent (clients/policy.ts), which is the flow measured here. A public
// loopback client sees the consent page every time (RFC 8252 §8.6). The bench never follows the
// redirect; it reads the code from the Location header.
const REDIRECT_URI = "https://bench.example/callback";
const USERNAME = "bench";
/** The re-authorization case's users: loop i signs in as `reauth-i` (its own user and session). */
const REAUTH_USER = "reauth";
/** Most concurrent loops a run may use (each refresh loop signs in as its own user). */
const MAX_WORKERS = 64;
/** Users for the sign-in case: each sign-in takes the next one, so no user meets its login limit. */
const SIGN_IN_USERS = 512;
const PASSWORD = "correct horse battery staple";

// ------------------------------------------------------------------ server children

/**
 * The stores `--stores` may name (the -slow ones are their store under a slowed fsync; postgres-2
 * is two server processes on one PostgreSQL database).
 */
const STORES = [
  "sqlite",
  "sqlite-full",
  "sqlite-slow",
  "sqlite-full-slow",
  "memory",
  "postgres",
  "postgres-2",
  "sqlite-nofsync",
];
const POSTGRES_STORES = ["postgres", "postgres-2"];
/** Stores `--stores` may name that the default set leaves out (not durable: attribution only). */
const ATTRIBUTION_STORES = ["sqlite-nofsync"];
/** The cases, in the order each repeat measures them (`signIns`: Gatehouse on the first store only). */
const CASES = ["sessions", "reauth", "refreshes", "signIns"];
/** The cases with a peer to compare with (the peer has no login). */
const COMPARED = ["sessions", "reauth", "refreshes"];
/** Microseconds strace adds to every fsync/fdatasync of a `-slow` server. */
const SLOW_FSYNC_US = 2000;

/** The store Gatehouse runs on: durable SQLite (NORMAL + WAL fsync, or FULL), or its memory store. */
async function openStore(kind, dir) {
  if (kind === "memory") return (await import(`${DIST}storage/memory/index.js`)).createMemoryStore();
  if (POSTGRES_STORES.includes(kind)) {
    const { createPostgresStore } = await import(`${DIST}storage/postgres/index.js`);
    const store = createPostgresStore({ connectionString: process.env.BENCH_DATABASE_URL });
    // Keep the pool's connections between the measured windows (pg closes a connection idle for
    // 10 s, and other servers are measured in between): a server under steady load keeps them, so
    // no window pays for new backends, and the backends whose CPU is read stay the same.
    store.pool.options.idleTimeoutMillis = 0;
    return store;
  }
  const { createSqliteStore } = await import(`${DIST}storage/sqlite/index.js`);
  if (kind === "sqlite-nofsync") {
    // The test-only mode (storage/sqlite/wal-sync.ts): NORMAL without the store's fsync. Not durable.
    const { setSqliteDurabilityForTests } = await import(`${DIST}storage/sqlite/wal-sync.js`);
    setSqliteDurabilityForTests("unsafe-normal-without-fsync");
  }
  const full = kind.startsWith("sqlite-full");
  return createSqliteStore({ path: join(dir, "gatehouse.sqlite"), ...(full ? { synchronous: "full" } : {}) });
}

async function serveGatehouse(storeKind) {
  const { createAuthorizationServer } = await import(`${DIST}authorization-server/index.js`);
  const { listen } = await import(`${DIST}http/node.js`);
  const { silentLogger } = await import(`${DIST}shared/log.js`);
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-as-"));
  const store = await openStore(storeKind, dir);
  await store.migrate();
  let handler = async () => new Response("starting", { status: 503 });
  const http = await listen((request, info) => handler(request, info), { port: 0, host: "127.0.0.1" });
  const server = await createAuthorizationServer({
    // The second instance of postgres-2 takes the first one's issuer, as instances behind one
    // balancer share its public URL; the load generator reaches each on its own port.
    issuer: process.env.BENCH_ISSUER || http.url,
    store,
    resources: [{ uri: RESOURCE, scopes: ["notes:read", "notes:write"] }],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    // As `gatehouse serve` always runs (a configured or generated key-encryption key): the signing
    // key is stored encrypted, and authorization codes are sealed (grants/sealed-code.ts).
    // One key per run, passed by the load generator: instances on one database must share it.
    keyEncryptionKeys: [process.env.BENCH_KEK || randomBytes(32).toString("base64url")],
    // Rate limits off, as on the peer: one client and one address send hundreds of requests a second.
    tokenRateLimit: { perClientPerMinute: 0, perAddressPerMinute: 0 },
  });
  handler = server.fetch;
  // The second instance of postgres-2 finds everything below in the database the first one seeded.
  if (process.env.BENCH_SEED !== "0") await seed(store);
  return {
    url: http.url,
    // Durable commits (transactions) and write operations so far, when the store counts them.
    writeStats: () => store.writeStats?.(),
    async close() {
      await http.close();
      await server.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The users, the client and the sign-in users' consents every case needs. */
async function seed(store) {
  const { hashPassword } = await import(`${DIST}authorization-server/index.js`);
  // One user per refresh loop (grants of one sign-in supersede each other), the one the session
  // case shares, one per re-authorization loop, and the sign-in case's users. One hash for all: the KDF cost is paid at login.
  const passwordHash = await hashPassword(PASSWORD);
  const usernames = [
    USERNAME,
    ...Array.from({ length: MAX_WORKERS }, (_, i) => `${USERNAME}-${i}`),
    ...Array.from({ length: MAX_WORKERS }, (_, i) => `${REAUTH_USER}-${i}`),
    ...Array.from({ length: SIGN_IN_USERS }, (_, i) => `signin-${i}`),
  ];
  for (const username of usernames) {
    await store.createUser({ id: username, username, passwordHash, isAdmin: false, createdAt: Date.now() });
  }
  await store.createClient({
    clientId: CLIENT_ID,
    source: "preregistered",
    clientName: "Bench",
    redirectUris: [REDIRECT_URI],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: Date.now(),
  });
  // The sign-in case's users approved this client before: a sign-in is the password check and the
  // silent code, without the first-visit consent page.
  for (let i = 0; i < SIGN_IN_USERS; i++) {
    const now = Date.now();
    await store.grantConsent({
      userId: `signin-${i}`,
      clientId: CLIENT_ID,
      redirectUri: REDIRECT_URI,
      scopes: SCOPE.split(" "),
      createdAt: now,
      updatedAt: now,
    });
  }
}

async function serveSdk() {
  const { default: express } = await import("express");
  const { mcpAuthRouter } = await import("@modelcontextprotocol/sdk/server/auth/router.js");
  const { DemoInMemoryAuthProvider } = await import(
    "@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js"
  );
  const { InvalidGrantError } = await import("@modelcontextprotocol/sdk/server/auth/errors.js");
  const { SignJWT, generateKeyPair } = await import("jose");
  const { privateKey } = await generateKeyPair("ES256");
  let issuer = "";

  /** An RFC 9068 access token, ES256 like Gatehouse's, for what the demo stored as opaque. */
  const jwtAccessToken = (clientId, scope, resource) =>
    new SignJWT({ client_id: clientId, scope })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
      .setIssuer(issuer)
      .setSubject("demo_user")
      .setAudience(resource ? String(resource) : RESOURCE)
      .setIssuedAt()
      .setExpirationTime("1h")
      .setJti(randomBytes(16).toString("base64url"))
      .sign(privateKey);

  /** The demo provider with JWT access tokens and the smallest in-memory refresh rotation. */
  class DemoWithRefresh extends DemoInMemoryAuthProvider {
    refreshTokens = new Map();
    async exchangeAuthorizationCode(client, code, verifier, redirectUri, resource) {
      const tokens = await super.exchangeAuthorizationCode(client, code, verifier, redirectUri, resource);
      const data = this.tokens.get(tokens.access_token);
      this.tokens.delete(tokens.access_token);
      const access = await jwtAccessToken(client.client_id, tokens.scope, data.resource);
      this.tokens.set(access, { ...data, token: access });
      const refresh = randomBytes(32).toString("base64url");
      this.refreshTokens.set(refresh, {
        clientId: client.client_id,
        scope: tokens.scope,
        resource: data.resource,
      });
      return { ...tokens, access_token: access, refresh_token: refresh };
    }
    async exchangeRefreshToken(client, refreshToken) {
      const grant = this.refreshTokens.get(refreshToken);
      if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError("invalid refresh token");
      this.refreshTokens.delete(refreshToken);
      const access = await jwtAccessToken(client.client_id, grant.scope, grant.resource);
      this.tokens.set(access, {
        token: access,
        clientId: client.client_id,
        scopes: grant.scope ? grant.scope.split(" ") : [],
        expiresAt: Date.now() + 3600_000,
        resource: grant.resource,
        type: "access",
      });
      const refresh = randomBytes(32).toString("base64url");
      this.refreshTokens.set(refresh, grant);
      return {
        access_token: access,
        token_type: "bearer",
        expires_in: 3600,
        scope: grant.scope,
        refresh_token: refresh,
      };
    }
  }

  const provider = new DemoWithRefresh();
  await provider.clientsStore.registerClient({
    client_id: CLIENT_ID,
    client_name: "Bench",
    redirect_uris: [REDIRECT_URI],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  });
  const app = express();
  let router = (_req, _res, next) => next();
  app.use((req, res, next) => router(req, res, next));
  const server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  const url = `http://127.0.0.1:${server.address().port}`;
  issuer = url;
  router = mcpAuthRouter({
    provider,
    issuerUrl: new URL(url),
    scopesSupported: ["notes:read", "notes:write", "offline_access"],
    authorizationOptions: { rateLimit: false },
    tokenOptions: { rateLimit: false },
    clientRegistrationOptions: { rateLimit: false },
    revocationOptions: { rateLimit: false },
  });
  return {
    url,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function childMain(kind, storeKind) {
  let profiler;
  const running = kind === "gatehouse" ? await serveGatehouse(storeKind) : await serveSdk();
  process.on("message", async (message) => {
    if (message === "sample") {
      const cpu = process.cpuUsage();
      process.send({
        rss: process.memoryUsage().rss,
        writes: running.writeStats?.() ?? null,
        cpuMs: (cpu.user + cpu.system) / 1000,
      });
    }
    // --cpu-profile: the V8 profiler over the measured windows only (not start-up, seeding and
    // warm-up, which dominate a --cpu-prof of the whole process).
    if (message?.profile === "start") {
      const { Session } = await import("node:inspector/promises");
      profiler = new Session();
      profiler.connect();
      await profiler.post("Profiler.enable");
      await profiler.post("Profiler.start");
      process.send({ profiling: true });
    }
    if (message?.profile === "stop") {
      const { profile } = await profiler.post("Profiler.stop");
      writeFileSync(message.path, JSON.stringify(profile));
      process.send({ profiled: message.path });
    }
    if (message === "close") {
      await running.close();
      process.send({ closed: true });
      process.exit(0);
    }
  });
  process.send({ url: running.url });
}

// ------------------------------------------------------------------ pinning

/**
 * Core 0 for the servers, core 1 for this process, when `taskset` is there and there are two
 * cores or more; otherwise nothing is pinned (and the output says so).
 */
function pinning() {
  if (process.env.BENCH_NO_PIN) return undefined;
  if (availableParallelism() < 2) return undefined;
  try {
    execFileSync("taskset", ["-a", "-cp", "1", String(process.pid)], { stdio: "ignore" });
    return { server: "0", loadGenerator: "1" };
  } catch {
    return undefined;
  }
}

/** Whether strace can run here (for the -slow stores). */
function haveStrace() {
  try {
    execFileSync("strace", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function startChild(kind, pin, storeKind, env = {}) {
  const execArgv = process.env.BENCH_CHILD_EXEC_ARGV ? process.env.BENCH_CHILD_EXEC_ARGV.split(" ") : [];
  let command = [process.execPath, ...execArgv, SELF, "--serve", kind, ...(storeKind ? [storeKind] : [])];
  if (storeKind?.endsWith("-slow")) {
    // seccomp-bpf: the tracee stops only at the two syscalls, and only the calling thread waits.
    command = [
      "strace",
      "-f",
      "--seccomp-bpf",
      "-qq",
      "-o",
      "/dev/null",
      "-e",
      "trace=fsync,fdatasync",
      "-e",
      `inject=fsync,fdatasync:delay_exit=${SLOW_FSYNC_US}`,
      ...command,
    ];
  }
  if (pin) command = ["taskset", "-c", pin.server, ...command];
  const child = spawn(command[0], command.slice(1), {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, ...env },
  });
  const waiting = [];
  let exited;
  child.on("message", (m) => waiting.shift()?.resolve(m));
  // A server that dies (a failed start, a crash) fails the run instead of leaving it waiting; a
  // message it can no longer receive is that same failure.
  child.on("error", () => {});
  child.on("exit", (code, signal) => {
    exited = new Error(`the ${kind} ${storeKind ?? ""} server exited (${signal ?? code})`);
    for (const w of waiting.splice(0)) w.reject(exited);
  });
  const next = () =>
    new Promise((resolve, reject) => (exited ? reject(exited) : waiting.push({ resolve, reject })));
  return {
    ready: next(),
    /** Resident memory, the store's write counters (Gatehouse) and the CPU the server has used. */
    async sample() {
      child.send("sample");
      return await next();
    },
    /** Starts the child's CPU profiler, or stops it and writes the profile to `path`. */
    async profile(action, path) {
      child.send({ profile: action, path });
      return await next();
    },
    async close() {
      if (exited) return;
      child.send("close");
      await next();
    },
  };
}

/**
 * A server under test: one child, or for postgres-2 two children on one database, the second
 * started once the first has migrated and seeded it and taking its issuer. `pick()` answers the
 * instance for the next request, in turn, as a round-robin balancer would: a flow's /authorize and
 * /token may land on different instances. `postgresCpu()` (PostgreSQL stores) snapshots the CPU of
 * the backends connected to the store's database.
 */
function startServer(kind, pin, storeKind, { env = {}, instances = 1, postgresCpu, beforeWindow } = {}) {
  const children = [startChild(kind, pin, storeKind, env)];
  const urls = [];
  const requests = [];
  let turn = 0;
  const server = {
    kind,
    store: storeKind,
    name: kind === "gatehouse" ? `gatehouse ${storeKind}` : "sdk",
    instances,
    ready: (async () => {
      urls.push((await children[0].ready).url);
      for (let i = 1; i < instances; i++) {
        const child = startChild(kind, pin, storeKind, { ...env, BENCH_SEED: "0", BENCH_ISSUER: urls[0] });
        children.push(child);
        urls.push((await child.ready).url);
      }
      requests.push(...urls.map(() => 0));
      return { url: urls[0] };
    })(),
    pick() {
      const i = turn++ % urls.length;
      requests[i]++;
      return urls[i];
    },
    /**
     * The children's samples together: CPU summed (and per instance), the largest resident memory,
     * the store's counters (one instance's), requests sent to each instance so far, and with
     * `withPostgres` PostgreSQL's backends' CPU.
     */
    async sample(withPostgres = true) {
      const samples = await Promise.all(children.map((child) => child.sample()));
      return {
        rss: Math.max(...samples.map((x) => x.rss)),
        writes: samples[0].writes,
        cpuMs: samples.reduce((sum, x) => sum + x.cpuMs, 0),
        instanceCpuMs: samples.map((x) => x.cpuMs),
        requests: [...requests],
        ...(withPostgres && postgresCpu ? { postgres: await postgresCpu() } : {}),
      };
    },
    /** Runs before each measured window (PostgreSQL stores: ANALYZE, as autovacuum keeps statistics). */
    beforeWindow,
    /** --cpu-profile: starts every child's profiler, or stops it and writes `<prefix>-<i>.cpuprofile`. */
    async profile(action, prefix) {
      for (const [i, child] of children.entries())
        await child.profile(action, `${prefix}-${i + 1}.cpuprofile`);
    },
    async close() {
      for (const child of children) await child.close();
    },
  };
  return server;
}

// ------------------------------------------------------------------ load generator

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

function form(fields) {
  return {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(fields).toString(),
  };
}

/** The next loopback source address (127.1.x.y): each browser sign-in comes from its own. */
let nextAddress = 0;
function freshAddress() {
  nextAddress++;
  return `127.1.${(nextAddress >> 8) & 255}.${nextAddress & 255 || 1}`;
}

/**
 * A browser for the login flow: a cookie jar over node:http from its own source address (fetch
 * cannot choose one), so per-address login limits see distinct browsers.
 */
class Browser {
  cookies = new Map();
  constructor(localAddress) {
    this.localAddress = localAddress;
  }
  request(url, init = {}) {
    const headers = { ...(init.headers ?? {}) };
    if (this.cookies.size) headers.cookie = this.header();
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        url,
        { method: init.method ?? "GET", headers, localAddress: this.localAddress },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => {
            for (const line of res.headers["set-cookie"] ?? []) {
              const [pair] = line.split(";");
              const eq = pair.indexOf("=");
              if (eq > 0) this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
            }
            resolve({
              status: res.statusCode,
              location: res.headers.location ?? "",
              text: Buffer.concat(chunks).toString("utf8"),
            });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(init.body);
    });
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

function hiddenFields(html) {
  const out = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]] ??= m[2].replace(/&amp;/g, "&").replace(/&quot;/g, '"');
  }
  return out;
}

function authorizeUrl(base, challenge, state) {
  return `${base}/authorize?${new URLSearchParams({
    response_type: "code",
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    code_challenge: challenge,
    code_challenge_method: "S256",
    scope: SCOPE,
    resource: RESOURCE,
    state,
  })}`;
}

/**
 * Gatehouse in a browser that is not signed in: /authorize → login page → POST /login (the
 * password check) → consent when none is remembered yet → the code. Returns the session cookie
 * and the code's redirect.
 */
async function gatehouseSignIn(base, username, challenge, state) {
  const browser = new Browser(freshAddress());
  let res = await browser.request(authorizeUrl(base, challenge, state));
  let location = res.location;
  if (location.includes("/login")) {
    const page = await browser.request(new URL(location, base).href);
    res = await browser.request(`${base}/login`, {
      ...form({ ...hiddenFields(page.text), username, password: PASSWORD }),
    });
    location = res.location;
  }
  if (location.includes("/consent")) {
    // With a remembered consent the consent step answers with the code at once.
    res = await browser.request(new URL(location, base).href);
    location = res.location;
    if (res.status === 200) {
      res = await browser.request(`${base}/consent`, {
        ...form({ ...hiddenFields(res.text), decision: "approve" }),
      });
      location = res.location;
    }
  }
  if (!location.startsWith(REDIRECT_URI))
    throw new Error(`gatehouse sign-in ended with ${res.status} at ${location.slice(0, 80)}`);
  return { cookie: browser.header(), location };
}

/** A signed-in session (cookie header) for Gatehouse; the peer needs none. */
async function session(server, username = USERNAME) {
  if (server.kind !== "gatehouse") return undefined;
  return (await gatehouseSignIn(server.pick(), username, pkce().challenge, "s")).cookie;
}

/** Reads the code from the redirect and redeems it at POST /token. Returns the token response body. */
async function redeem(base, location, state, verifier) {
  if (!location.startsWith(REDIRECT_URI))
    throw new Error(`/authorize redirected to ${location.slice(0, 80)}`);
  const back = new URL(location).searchParams;
  if (back.get("state") !== state) throw new Error("state mismatch");
  const token = await fetch(
    `${base}/token`,
    form({
      grant_type: "authorization_code",
      code: back.get("code"),
      code_verifier: verifier,
      client_id: CLIENT_ID,
      redirect_uri: REDIRECT_URI,
      resource: RESOURCE,
    }),
  );
  const body = await token.json();
  if (token.status !== 200) throw new Error(`/token answered ${token.status} ${body.error}`);
  return body;
}

/**
 * GET /authorize (silent, from the session) → code → POST /token, each request at the instance
 * `pick()` answers. Returns the token response body.
 */
async function codeFlow(pick, cookie) {
  const { verifier, challenge } = pkce();
  const state = randomBytes(12).toString("base64url");
  const res = await fetch(authorizeUrl(pick(), challenge, state), {
    redirect: "manual",
    headers: cookie ? { cookie } : {},
  });
  await res.arrayBuffer();
  return redeem(pick(), res.headers.get("location") ?? "", state, verifier);
}

/** A complete flow by a browser that is not signed in: the password check, the code, the tokens. */
let nextSignInUser = 0;
async function signInFlow(base) {
  const { verifier, challenge } = pkce();
  const state = randomBytes(12).toString("base64url");
  const username = `signin-${nextSignInUser++ % SIGN_IN_USERS}`;
  const { location } = await gatehouseSignIn(base, username, challenge, state);
  return redeem(base, location, state, verifier);
}

async function refresh(base, refreshToken) {
  const res = await fetch(
    `${base}/token`,
    form({
      grant_type: "refresh_token",
      refresh_token: refreshToken,
      client_id: CLIENT_ID,
      resource: RESOURCE,
    }),
  );
  const body = await res.json();
  if (res.status !== 200 || !body.refresh_token)
    throw new Error(`refresh answered ${res.status} ${body.error}`);
  return body.refresh_token;
}

function percentile(sorted, p) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const round = (value, digits) => Math.round(value * 10 ** digits) / 10 ** digits;

function median(values) {
  const sorted = values.filter((v) => typeof v === "number" && Number.isFinite(v)).sort((a, b) => a - b);
  if (!sorted.length) return undefined;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Runs `op` in `states.length` loops for `seconds`; loop i carries `states[i]` (a refresh chain),
 * re-initialised with `init` after an error.
 */
async function measure(server, { seconds, states, init, op }) {
  const latencies = [];
  let errors = 0;
  let firstError;
  let peakRss = 0;
  // A running database's statistics are kept current by autovacuum; the bench's fresh one would
  // otherwise be planned from the empty tables it was created with, for the whole run.
  await server.beforeWindow?.();
  const before = await server.sample();
  const loadBefore = process.cpuUsage();
  const sampler = setInterval(async () => {
    peakRss = Math.max(peakRss, (await server.sample(false)).rss);
  }, 250);
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    states.map(async (_, i) => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          states[i] = await op(states[i]);
          latencies.push(performance.now() - t);
        } catch (error) {
          errors++;
          firstError ??= error.message;
          states[i] = await init(i);
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const loadCpu = process.cpuUsage(loadBefore);
  const after = await server.sample();
  peakRss = Math.max(peakRss, after.rss);
  latencies.sort((a, b) => a - b);
  const n = Math.max(1, latencies.length);
  // Per instance: its CPU per HTTP request it was sent (postgres-2 has two; the others one).
  const instanceCpuMsPerRequest = after.instanceCpuMs.map((ms, i) =>
    round((ms - before.instanceCpuMs[i]) / Math.max(1, after.requests[i] - before.requests[i]), 3),
  );
  // PostgreSQL's backends for this store's database (PostgreSQL stores; undefined when /proc
  // shows none of them, e.g. a server on another host).
  const pgCpuMs = after.postgres?.size ? cpuBetween(before.postgres, after.postgres) : undefined;
  const commits = before.writes && after.writes.transactions - before.writes.transactions;
  // fsyncs of the WAL the store ran off the event loop (storage/sqlite/wal-sync.ts), when it does.
  const walSyncs =
    before.writes?.walSyncs === undefined ? undefined : after.writes.walSyncs - before.writes.walSyncs;
  const writeOps = before.writes && after.writes.operations - before.writes.operations;
  // WAL checkpoints the store ran off the event loop, and the time it still spent on the loop for
  // them (storage/sqlite/checkpointer.ts), when the build counts them.
  const checkpoints =
    before.writes?.checkpoints === undefined
      ? undefined
      : after.writes.checkpoints - before.writes.checkpoints;
  const checkpointLoopMs =
    before.writes?.onLoopMs === undefined ? 0 : after.writes.onLoopMs - before.writes.onLoopMs;
  return {
    perSecond: round(latencies.length / elapsed, 1),
    completed: latencies.length,
    errors,
    // Failed operations among all attempted (a failed loop signs in again and goes on).
    errorRate: round(errors / Math.max(1, latencies.length + errors), 4),
    ...(firstError ? { firstError } : {}),
    // Server CPU per operation: unlike the rate, it hardly depends on how loaded the machine is.
    serverCpuMsPerOp: round((after.cpuMs - before.cpuMs) / n, 3),
    instanceCpuMsPerRequest,
    ...(pgCpuMs === undefined ? {} : { pgCpuMsPerOp: round(pgCpuMs / n, 3) }),
    loadGeneratorCpuMsPerOp: round((loadCpu.user + loadCpu.system) / 1000 / n, 3),
    p50Ms: round(percentile(latencies, 50), 1),
    p95Ms: round(percentile(latencies, 95), 1),
    p99Ms: round(percentile(latencies, 99), 1),
    peakRssMiB: round(peakRss / 1048576, 1),
    ...(commits
      ? { commitsPerOp: round(commits / n, 2), writesPerCommit: round(writeOps / commits, 1) }
      : {}),
    ...(walSyncs ? { walSyncsPerOp: round(walSyncs / n, 2) } : {}),
    ...(checkpoints === undefined
      ? {}
      : {
          checkpointsPer1kOps: round((checkpoints * 1000) / n, 2),
          checkpointLoopUsPerOp: round((checkpointLoopMs * 1000) / n, 1),
        }),
  };
}

/**
 * The cases every server runs; `signIns` only Gatehouse (the peer has no login). Every request goes
 * to the instance `server.pick()` answers (one server: always the same).
 */
function cases(server, { concurrency, reauthConcurrency }) {
  const pick = server.pick;
  const chain = async (i) => (await codeFlow(pick, await session(server, `${USERNAME}-${i}`))).refresh_token;
  const shared = { cookie: undefined };
  return {
    sessions: {
      states: Array(concurrency).fill(0),
      prepare: async () => {
        shared.cookie = await session(server);
      },
      init: async () => 0,
      op: async () => {
        await codeFlow(pick, shared.cookie);
        return 0;
      },
    },
    // The outside driver's shape (issue 25): each loop its own user and browser session,
    // re-authorizing the same pre-registered https client again and again; a loop's state is its
    // session cookie. Past MAX_ACTIVE_GRANTS_PER_SIGN_IN (32) active grants in a sign-in, each new
    // grant retires the oldest (grants/superseded-grants.ts), so in steady state every flow also
    // revokes the grant it supersedes. Each loop reaches that state before anything is measured:
    // it runs that many flows first (a slow loaded run would not get there in its windows).
    reauth: {
      states: Array(reauthConcurrency).fill(undefined),
      prepare: async function () {
        this.states = await Promise.all(this.states.map((_, i) => session(server, `${REAUTH_USER}-${i}`)));
        if (server.kind !== "gatehouse") return;
        const { MAX_ACTIVE_GRANTS_PER_SIGN_IN } = await import(
          `${DIST}authorization-server/grants/superseded-grants.js`
        );
        await Promise.all(
          this.states.map(async (cookie) => {
            for (let n = 0; n < MAX_ACTIVE_GRANTS_PER_SIGN_IN; n++) await codeFlow(pick, cookie);
          }),
        );
      },
      init: (i) => session(server, `${REAUTH_USER}-${i}`),
      op: async (cookie) => {
        await codeFlow(pick, cookie);
        return cookie;
      },
    },
    refreshes: {
      states: Array(concurrency).fill(undefined),
      // Each loop signs in on its own: grants of one sign-in supersede each other (a step-up
      // retires the grant it covers), so loops sharing a session would revoke each other's chains.
      prepare: async function () {
        this.states = await Promise.all(this.states.map((_, i) => chain(i)));
      },
      init: chain,
      op: (token) => refresh(pick(), token),
    },
    ...(server.signIns
      ? {
          signIns: {
            states: Array(concurrency).fill(0),
            prepare: async () => {},
            init: async () => 0,
            op: async () => {
              await signInFlow(pick());
              return 0;
            },
          },
        }
      : {}),
  };
}

function parseOptions(argv) {
  const options = {
    json: false,
    seconds: 3,
    repeats: 3,
    concurrency: 8,
    reauthConcurrency: 16,
    only: undefined,
    stores: undefined,
    databaseUrl: DEFAULT_DATABASE_URL,
    cpuProfile: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split("=", 2);
    const value = () => Number(inline ?? argv[++i]);
    if (name === "--json") options.json = true;
    else if (name === "--seconds") options.seconds = value();
    else if (name === "--repeats") options.repeats = value();
    else if (name === "--concurrency") options.concurrency = value();
    else if (name === "--reauth-concurrency") options.reauthConcurrency = value();
    else if (name === "--database-url") options.databaseUrl = inline ?? argv[++i];
    else if (name === "--cpu-profile") options.cpuProfile = inline ?? argv[++i];
    else if (name === "--only") options.only = inline ?? argv[++i];
    else if (name === "--store" || name === "--stores") options.stores = (inline ?? argv[++i]).split(",");
    else if (name === "--help" || name === "-h") options.help = true;
    else throw new Error(`unknown option ${name} (--help lists them)`);
  }
  if (
    !(options.seconds > 0) ||
    !(Number.isInteger(options.repeats) && options.repeats >= 1) ||
    !(Number.isInteger(options.concurrency) && options.concurrency >= 1) ||
    options.concurrency > MAX_WORKERS ||
    !(Number.isInteger(options.reauthConcurrency) && options.reauthConcurrency >= 1) ||
    options.reauthConcurrency > MAX_WORKERS ||
    (options.only && !CASES.includes(options.only)) ||
    (options.stores && !options.stores.every((store) => STORES.includes(store)))
  ) {
    throw new Error(
      `--seconds, --repeats, --concurrency and --reauth-concurrency (at most ${MAX_WORKERS}) must be positive; --only names one of ${CASES.join(", ")}; --stores lists ${STORES.join(", ")}`,
    );
  }
  return options;
}

/**
 * What one durable SQLite commit costs on this disk (WAL, synchronous=FULL: one fsync per commit).
 * better-sqlite3 is synchronous and the store group-commits the writes that arrive together
 * (printed per case as commits per operation and writes per commit).
 */
async function probeCommitMs() {
  const { default: Database } = await import("better-sqlite3");
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-fsync-"));
  try {
    const db = new Database(join(dir, "probe.sqlite"));
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE t (x INTEGER)");
    const insert = db.prepare("INSERT INTO t VALUES (?)");
    const n = 200;
    const t = performance.now();
    for (let i = 0; i < n; i++) insert.run(i);
    const ms = (performance.now() - t) / n;
    db.close();
    return round(ms, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Medians over the repeats of one server's case. */
function summarize(runs) {
  const keys = [
    "perSecond",
    "serverCpuMsPerOp",
    "loadGeneratorCpuMsPerOp",
    "p50Ms",
    "p95Ms",
    "p99Ms",
    "pgCpuMsPerOp",
    "commitsPerOp",
    "walSyncsPerOp",
    "checkpointsPer1kOps",
    "checkpointLoopUsPerOp",
  ];
  const out = Object.fromEntries(
    keys
      .map((k) => [k, median(runs.map((r) => r[k]))])
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, round(v, 3)]),
  );
  out.peakRssMiB = Math.max(...runs.map((r) => r.peakRssMiB));
  out.errors = runs.reduce((sum, r) => sum + r.errors, 0);
  out.errorRate = round(
    out.errors / Math.max(1, out.errors + runs.reduce((sum, r) => sum + r.completed, 0)),
    4,
  );
  if (runs[0]?.instanceCpuMsPerRequest) {
    out.instanceCpuMsPerRequest = runs[0].instanceCpuMsPerRequest.map((_, i) =>
      round(median(runs.map((r) => r.instanceCpuMsPerRequest[i])), 3),
    );
  }
  const firstError = runs.find((r) => r.firstError)?.firstError;
  if (firstError) out.firstError = firstError;
  return out;
}

const USAGE = `Usage: node bench/authorization-server.mjs [--json] [--seconds 3] [--repeats 3] [--concurrency 8]
                                         [--reauth-concurrency 16] [--only ${CASES.join("|")}]
                                         [--stores ${STORES.join(",")}]
                                         [--database-url postgres://postgres@127.0.0.1:5432/test] [--cpu-profile DIR]

Gatehouse on each store named (default all; -slow: 2 ms added to every fsync through strace; postgres: one instance on a
fresh PostgreSQL database, postgres-2: two instances sharing one, requests spread over both) against the MCP SDK router in
memory (sessions, reauth, refreshes), sign-ins for Gatehouse alone on the first store; servers pinned to core 0, the load
generator to core 1. Per row req/s, server CPU per request (and per instance), PostgreSQL's backends' CPU per request,
p50/p95/p99, error rate; ratios to the peer, to the memory store and postgres-2 to postgres; the scaling model for
PostgreSQL. The PostgreSQL stores are left out, and the output says why, when the server does not answer. Run after
npm run build.
--cpu-profile DIR writes each server's CPU profile of the measured windows (not start-up or warm-up) to DIR.
BENCH_DIST=<build> measures another build; BENCH_CHILD_EXEC_ARGV passes flags to the servers;
GATEHOUSE_BENCH_DATABASE_URL is the default of --database-url.
`;

const STORAGE = {
  sqlite: "SQLite (WAL, synchronous=NORMAL, the store's own fdatasync of the WAL off the event loop)",
  "sqlite-full": "SQLite (WAL, synchronous=FULL)",
  "sqlite-slow": `SQLite as sqlite, ${SLOW_FSYNC_US} µs added to every fsync/fdatasync (strace)`,
  "sqlite-full-slow": `SQLite as sqlite-full, ${SLOW_FSYNC_US} µs added to every fsync/fdatasync (strace)`,
  memory: "in memory (createMemoryStore)",
  "sqlite-nofsync": "SQLite as sqlite WITHOUT the store's fsync (NOT DURABLE: attribution only)",
  postgres: "PostgreSQL, one instance (a fresh database of its own, pool of 10)",
  "postgres-2":
    "PostgreSQL, two instances on one fresh database (pools of 10 each), requests alternating between them",
};

async function main() {
  const options = parseOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    return;
  }
  const log = (line) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
  const strace = haveStrace();
  const wanted = options.stores ?? STORES.filter((store) => !ATTRIBUTION_STORES.includes(store));
  const leftOut = [];
  if (!strace) {
    const slow = wanted.filter((store) => store.endsWith("-slow"));
    if (slow.length) leftOut.push(`${slow.join(", ")} (strace is not installed)`);
  }
  // The PostgreSQL stores: one fresh database each, dropped at the end.
  let admin;
  let databases;
  const wantedPostgres = wanted.filter((store) => POSTGRES_STORES.includes(store));
  if (wantedPostgres.length) {
    const connected = await connectAdmin(options.databaseUrl);
    if (connected.admin) {
      admin = connected.admin;
      databases = await benchDatabases(admin, options.databaseUrl, wantedPostgres);
    } else leftOut.push(`${wantedPostgres.join(", ")} (${connected.reason})`);
  }
  const stores = wanted.filter(
    (store) => (strace || !store.endsWith("-slow")) && (databases || !POSTGRES_STORES.includes(store)),
  );
  if (stores.length === 0) throw new Error(`nothing to measure: left out ${leftOut.join("; ")}`);
  // Before pinning: afterwards this process sees only its own core.
  const cores = availableParallelism();
  const pin = pinning();
  const loadAverageBefore = loadavg().map((v) => round(v, 2));
  const commitMs = await probeCommitMs();
  log(
    `durable SQLite commit on this disk (synchronous=FULL, on the loop): ${commitMs} ms; pinning: ${pin ? `servers on core ${pin.server}, load generator on core ${pin.loadGenerator}` : "none"}` +
      (leftOut.length ? `; left out: ${leftOut.join("; ")}` : ""),
  );

  // One key-encryption key for the run: the instances of postgres-2 share their signing key and
  // sealed codes through it, as every instance of one deployment must.
  const kek = randomBytes(32).toString("base64url");
  const servers = [
    ...stores.map((store) => {
      const postgres = POSTGRES_STORES.includes(store);
      return startServer("gatehouse", pin, store, {
        env: { BENCH_KEK: kek, ...(postgres ? { BENCH_DATABASE_URL: databases.url(store) } : {}) },
        instances: store === "postgres-2" ? 2 : 1,
        ...(postgres
          ? { postgresCpu: () => databases.backendCpu(store), beforeWindow: () => databases.analyze(store) }
          : {}),
      });
    }),
    startServer("sdk", pin, undefined),
  ];
  // Sign-ins (scrypt at every login) on the first store only: they say what a login costs, not
  // what a store does.
  servers[0].signIns = true;
  const results = Object.fromEntries(servers.map((server) => [server.name, {}]));
  const measured = CASES.filter((name) => !options.only || options.only === name);
  try {
    try {
      for (const server of servers) server.url = (await server.ready).url;
      const work = new Map(servers.map((server) => [server, cases(server, options)]));
      for (const [server, byCase] of work) {
        for (const name of measured) await byCase[name]?.prepare();
        // Warm-up: JIT, statement cache, connections.
        for (const name of COMPARED.filter((name) => measured.includes(name))) {
          await measure(server, { seconds: 1, ...byCase[name] });
        }
      }
      if (options.cpuProfile) {
        mkdirSync(options.cpuProfile, { recursive: true });
        for (const server of servers) await server.profile("start");
      }
      for (let r = 0; r < options.repeats; r++) {
        // Every server in each repeat, the order reversed every other repeat.
        const order = r % 2 === 0 ? servers : [...servers].reverse();
        for (const name of measured) {
          for (const server of order) {
            const c = work.get(server)[name];
            if (!c) continue;
            log(`repeat ${r + 1}/${options.repeats}: ${server.name} ${name} for ${options.seconds} s ...`);
            const result = await measure(server, { seconds: options.seconds, ...c });
            results[server.name][name] ??= [];
            results[server.name][name].push(result);
          }
        }
      }
      if (options.cpuProfile) {
        for (const server of servers) {
          await server.profile("stop", join(options.cpuProfile, server.name.replace(/ /g, "-")));
        }
        log(`CPU profiles of the measured windows: ${options.cpuProfile}/<server>-<instance>.cpuprofile`);
      }
    } finally {
      for (const server of servers) await server.close().catch(() => {});
    }
  } finally {
    await databases?.drop();
    await admin?.end().catch(() => {});
  }

  /** `a` against `b` per repeat (both measured in it), then the median; CPU as b's ÷ a's. */
  const ratio = (a, b, name) => {
    const runs = (results[a][name] ?? []).map((x, i) => {
      const y = results[b][name][i];
      return {
        perSecond: round(x.perSecond / y.perSecond, 2),
        serverCpu: round(y.serverCpuMsPerOp / x.serverCpuMsPerOp, 2),
        p99: round(x.p99Ms / y.p99Ms, 2),
      };
    });
    if (runs.length === 0) return undefined;
    return {
      perSecond: round(median(runs.map((r) => r.perSecond)), 2),
      serverCpu: round(median(runs.map((r) => r.serverCpu)), 2),
      p99: round(median(runs.map((r) => r.p99)), 2),
      perRepeat: runs,
    };
  };
  const ratios = {};
  for (const store of stores) {
    const against = [
      ["sdk", "sdk"],
      ...(store !== "memory" && stores.includes("memory") ? [["memory", "gatehouse memory"]] : []),
      ...(store === "postgres-2" && stores.includes("postgres") ? [["postgres", "gatehouse postgres"]] : []),
      ...(store === "sqlite" && stores.includes("sqlite-nofsync")
        ? [["sqlite-nofsync", "gatehouse sqlite-nofsync"]]
        : []),
    ];
    for (const [label, other] of against) {
      for (const name of COMPARED) {
        const r = ratio(`gatehouse ${store}`, other, name);
        if (r) ratios[`${store}/${label} ${name}`] = r;
      }
    }
  }
  const summaries = Object.fromEntries(
    servers.map((server) => [
      server.name,
      Object.fromEntries(Object.entries(results[server.name]).map(([k, runs]) => [k, summarize(runs)])),
    ]),
  );
  // The scaling model (bench/as-postgres.mjs): from the ×1 and ×2 rows' CPU per operation.
  const model = {};
  if (stores.includes("postgres") && stores.includes("postgres-2")) {
    for (const name of COMPARED) {
      const m = scalingModel(summaries["gatehouse postgres"][name], summaries["gatehouse postgres-2"][name]);
      if (m) model[name] = m;
    }
  }
  const result = {
    benchmark: "authorization-server",
    node: process.version,
    cores,
    seconds: options.seconds,
    repeats: options.repeats,
    concurrency: options.concurrency,
    reauthConcurrency: options.reauthConcurrency,
    pinned: pin ?? null,
    loadAverage: { before: loadAverageBefore, after: loadavg().map((v) => round(v, 2)) },
    sqliteCommitMs: commitMs,
    ...(leftOut.length ? { leftOut } : {}),
    servers: Object.fromEntries(
      servers.map((server) => [
        server.name,
        {
          storage:
            server.kind === "sdk"
              ? "in memory (DemoInMemoryAuthProvider; JWT access tokens and refresh rotation added by this script)"
              : STORAGE[server.store],
          instances: server.instances,
          ...Object.fromEntries(
            Object.entries(results[server.name]).map(([k, runs]) => [
              k,
              { ...summaries[server.name][k], runs },
            ]),
          ),
        },
      ]),
    ),
    /**
     * "<store>/sdk <case>": Gatehouse on that store against the peer; "<store>/memory <case>":
     * against Gatehouse on its memory store; "postgres-2/postgres <case>": two instances against
     * one. Per repeat, then the median; serverCpu is the other's CPU per request ÷ this one's (≥ 1
     * is at least as good; for postgres-2 it is summed over both instances), p99 this one's ÷ the
     * other's.
     */
    ratios,
    /** Per case: the CPU costs read and the predicted rates on N cores (bench/as-postgres.mjs). */
    ...(Object.keys(model).length ? { postgresModel: model } : {}),
  };
  if (options.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const row = (name, r) =>
    `  ${name.padEnd(34)} ${String(r.perSecond).padStart(8)}/s  server CPU ${String(r.serverCpuMsPerOp).padStart(6)} ms/op` +
    (r.instanceCpuMsPerRequest?.length > 1
      ? ` (per instance ${r.instanceCpuMsPerRequest.join(", ")} ms/req)`
      : "") +
    (r.pgCpuMsPerOp === undefined ? "" : `  PostgreSQL CPU ${r.pgCpuMsPerOp} ms/op`) +
    `  load gen CPU ${r.loadGeneratorCpuMsPerOp} ms/op  p50 ${r.p50Ms} ms  p95 ${r.p95Ms} ms  p99 ${r.p99Ms} ms  peak RSS ${r.peakRssMiB} MiB  errors ${r.errors} (${round(r.errorRate * 100, 2)}%)` +
    (r.commitsPerOp === undefined ? "" : `  commits/op ${r.commitsPerOp}`) +
    (r.walSyncsPerOp === undefined ? "" : `  WAL fsyncs/op ${r.walSyncsPerOp}`) +
    (r.checkpointsPer1kOps === undefined
      ? ""
      : `  checkpoints/1k ops ${r.checkpointsPer1kOps} (${r.checkpointLoopUsPerOp} µs/op on the loop)`) +
    (r.firstError ? `  first error: ${r.firstError}` : "");
  log(
    `\nAuthorization server, ${options.concurrency} concurrent loops (reauth: ${options.reauthConcurrency}), ${options.repeats} interleaved repeats of ${options.seconds} s per case, medians (${process.version}, ${result.cores} cores; load average ${result.loadAverage.before.join(" ")} → ${result.loadAverage.after.join(" ")})`,
  );
  for (const server of servers) log(`  ${server.name}: ${result.servers[server.name].storage}`);
  for (const name of CASES) {
    for (const server of servers) {
      const r = result.servers[server.name][name];
      if (r) log(row(`${server.name} ${name}`, r));
    }
  }
  if (servers[0].signIns && result.servers[servers[0].name].signIns) {
    log("  (sign-ins: Gatehouse only, each with a password check; the peer has no login)");
  }
  for (const [name, r] of Object.entries(ratios)) {
    log(
      `  ratio ${name.padEnd(30)} req/s ${String(r.perSecond).padEnd(5)} server CPU ${String(r.serverCpu).padEnd(5)} p99 ×${r.p99} (per repeat: ${r.perRepeat.map((x) => `${x.perSecond}/${x.serverCpu}`).join(", ")})`,
    );
  }
  for (const [name, m] of Object.entries(model)) {
    log(
      `  model ${name}: Gatehouse ${m.x1.gatehouseMsPerOp} ms + PostgreSQL ${m.x1.postgresMsPerOp} ms per op with one instance, ` +
        `${m.x2.gatehouseMsPerOp} + ${m.x2.postgresMsPerOp} ms with two; X(k, N) = 1000 × min(k / c_gh, N / (c_gh + c_pg)): ` +
        m.byCores
          .map(
            (c) =>
              `${c.cores} cores ${c.x1PerSecond} → ${c.x2PerSecond}/s (×${c.x2OverX1}; ×${c.x2OverX1AtX1Costs} at ×1's costs)`,
          )
          .join(", "),
    );
  }
}

const serveIndex = process.argv.indexOf("--serve");
if (serveIndex >= 0) {
  childMain(process.argv[serveIndex + 1], process.argv[serveIndex + 2]).catch((error) => {
    process.stderr.write(`bench server failed: ${error.stack ?? error}\n`);
    process.exit(1);
  });
} else {
  main().catch((error) => {
    process.stderr.write(`bench failed: ${error.stack ?? error}\n`);
    process.exit(1);
  });
}
