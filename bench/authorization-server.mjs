#!/usr/bin/env node
/**
 * Authorization-server benchmark: complete code flows per second and refresh grants per second,
 * with p99 latency and the server's resident memory, for
 *
 * - Gatehouse (`createAuthorizationServer` from dist/, on durable SQLite: WAL, synchronous=FULL),
 * - the MCP TypeScript SDK's `mcpAuthRouter` with its in-memory demo provider
 *   (`DemoInMemoryAuthProvider`, Express), rate limits off on both sides.
 *
 * A "complete flow" is GET /authorize with a signed-in browser session and an existing consent
 * (Gatehouse answers with the code silently; the SDK demo provider never asks anyone) followed by
 * POST /token with the PKCE verifier. A "refresh" is POST /token with grant_type=refresh_token,
 * each worker following its own rotation chain. The SDK demo provider does not implement refresh
 * ("Not implemented for example demo"), so this script adds the smallest in-memory rotation to a
 * subclass of it; that part of the peer is ours, and says so in the output.
 *
 * Each server runs in its own child process (so its RSS is its own and it does not share an event
 * loop with the load); the load generator is this process, on the same 2-core machine, so figures
 * are a floor, not a capacity. Run after `npm run build`:
 *
 *   node bench/authorization-server.mjs [--json] [--seconds 6] [--concurrency 8]
 *
 * With --json, progress goes to stderr and the last line on stdout is one JSON object.
 */
import { fork } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);
const RESOURCE = "http://127.0.0.1:9001/mcp";
const SCOPE = "notes:read offline_access";
const CLIENT_ID = "bench-client";
// An https redirect URI the pre-registered client registered: Gatehouse re-authorizes such a client
// silently from a remembered consent (clients/policy.ts), which is the flow measured here. A public
// loopback client sees the consent page every time (RFC 8252 §8.6). The bench never follows the
// redirect; it reads the code from the Location header.
const REDIRECT_URI = "https://bench.example/callback";
const USERNAME = "bench";
/** Most concurrent workers a run may use (each refresh worker signs in as its own user). */
const MAX_WORKERS = 64;
const PASSWORD = "correct horse battery staple";

// ------------------------------------------------------------------ server children

async function serveGatehouse() {
  const { createAuthorizationServer, hashPassword } = await import("../dist/authorization-server/index.js");
  const { createSqliteStore } = await import("../dist/storage/sqlite/index.js");
  const { listen } = await import("../dist/http/node.js");
  const { silentLogger } = await import("../dist/shared/log.js");
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-as-"));
  const store = createSqliteStore({ path: join(dir, "gatehouse.sqlite") });
  await store.migrate();
  let handler = async () => new Response("starting", { status: 503 });
  const http = await listen((request, info) => handler(request, info), { port: 0, host: "127.0.0.1" });
  const server = await createAuthorizationServer({
    issuer: http.url,
    store,
    resources: [{ uri: RESOURCE, scopes: ["notes:read", "notes:write"] }],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    // Rate limits off, as on the peer: one client and one address send hundreds of requests a second.
    tokenRateLimit: { perClientPerMinute: 0, perAddressPerMinute: 0 },
  });
  handler = server.fetch;
  // One user per worker for the refresh phase (each signs in on its own; sign-ins are rate-limited
  // per username), plus the one the flow phase shares.
  const passwordHash = await hashPassword(PASSWORD);
  for (const username of [USERNAME, ...Array.from({ length: MAX_WORKERS }, (_, i) => `${USERNAME}-${i}`)]) {
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

async function serveSdk() {
  const { default: express } = await import("express");
  const { mcpAuthRouter } = await import("@modelcontextprotocol/sdk/server/auth/router.js");
  const { DemoInMemoryAuthProvider } = await import(
    "@modelcontextprotocol/sdk/examples/server/demoInMemoryOAuthProvider.js"
  );
  const { InvalidGrantError } = await import("@modelcontextprotocol/sdk/server/auth/errors.js");

  /** The demo provider plus the smallest in-memory refresh rotation (the demo throws "Not implemented"). */
  class DemoWithRefresh extends DemoInMemoryAuthProvider {
    refreshTokens = new Map();
    async exchangeAuthorizationCode(client, code, verifier, redirectUri, resource) {
      const tokens = await super.exchangeAuthorizationCode(client, code, verifier, redirectUri, resource);
      const refresh = randomBytes(32).toString("base64url");
      this.refreshTokens.set(refresh, { clientId: client.client_id, scope: tokens.scope, resource });
      return { ...tokens, refresh_token: refresh };
    }
    async exchangeRefreshToken(client, refreshToken) {
      const grant = this.refreshTokens.get(refreshToken);
      if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError("invalid refresh token");
      this.refreshTokens.delete(refreshToken);
      const access = randomBytes(32).toString("base64url");
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

async function childMain(kind) {
  const running = kind === "gatehouse" ? await serveGatehouse() : await serveSdk();
  process.on("message", async (message) => {
    if (message === "rss") process.send({ rss: process.memoryUsage().rss });
    if (message === "writes") {
      const cpu = process.cpuUsage();
      process.send({ writes: running.writeStats?.() ?? null, cpuMs: (cpu.user + cpu.system) / 1000 });
    }
    if (message === "close") {
      await running.close();
      process.send({ closed: true });
      process.exit(0);
    }
  });
  process.send({ url: running.url });
}

// ------------------------------------------------------------------ load generator

function startChild(kind) {
  const child = fork(SELF, ["--serve", kind], {
    execArgv: process.env.BENCH_CHILD_EXEC_ARGV ? process.env.BENCH_CHILD_EXEC_ARGV.split(" ") : [],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const waiting = [];
  child.on("message", (m) => waiting.shift()?.(m));
  const next = () => new Promise((resolve) => waiting.push(resolve));
  return {
    child,
    ready: next(),
    async rss() {
      child.send("rss");
      return (await next()).rss;
    },
    /** The store's write counters (Gatehouse) and the CPU time the server process has used. */
    async writes() {
      child.send("writes");
      return await next();
    },
    async close() {
      child.send("close");
      await next();
    },
  };
}

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

/** A minimal cookie jar for the one interactive login. */
class Jar {
  cookies = new Map();
  async request(url, init = {}) {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair.indexOf("=");
      if (eq > 0) this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    return res;
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

/** Gatehouse: one real login and consent, so later /authorize calls are silent. Returns the cookie header. */
async function gatehouseSession(base, username = USERNAME) {
  const jar = new Jar();
  const { challenge } = pkce();
  let res = await jar.request(authorizeUrl(base, challenge, "s"));
  let location = res.headers.get("location") ?? "";
  if (location.includes("/login")) {
    const page = await jar.request(new URL(location, base).href);
    res = await jar.request(`${base}/login`, {
      ...form({ ...hiddenFields(await page.text()), username, password: PASSWORD }),
    });
    location = res.headers.get("location") ?? "";
  }
  if (location.includes("/consent")) {
    const page = await jar.request(new URL(location, base).href);
    res = await jar.request(`${base}/consent`, {
      ...form({ ...hiddenFields(await page.text()), decision: "approve" }),
    });
    location = res.headers.get("location") ?? "";
  }
  if (!location.startsWith(REDIRECT_URI))
    throw new Error(`gatehouse login flow ended at ${location.slice(0, 80)}`);
  return jar.header();
}

/** GET /authorize (silent) → code → POST /token. Returns the token response body. */
async function codeFlow(base, cookie) {
  const { verifier, challenge } = pkce();
  const state = randomBytes(12).toString("base64url");
  const res = await fetch(authorizeUrl(base, challenge, state), {
    redirect: "manual",
    headers: cookie ? { cookie } : {},
  });
  await res.arrayBuffer();
  const location = res.headers.get("location") ?? "";
  if (!location.startsWith(REDIRECT_URI))
    throw new Error(`/authorize answered ${res.status} to ${location.slice(0, 80)}`);
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

/** Runs `op` in `concurrency` loops for `seconds`; each loop keeps its own state. */
async function measure({ seconds, concurrency, init, op, sampleRss, sampleWrites = async () => null }) {
  const latencies = [];
  let errors = 0;
  let firstError;
  let peakRss = 0;
  // Loops' init() (a code flow per refresh chain) runs inside the window too; its commits are few.
  const writesBefore = await sampleWrites();
  const end = performance.now() + seconds * 1000;
  const sampler = setInterval(async () => {
    peakRss = Math.max(peakRss, await sampleRss());
  }, 250);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      let state = await init();
      while (performance.now() < end) {
        const t = performance.now();
        try {
          state = await op(state);
          latencies.push(performance.now() - t);
        } catch (error) {
          errors++;
          firstError ??= error.message;
          state = await init();
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peakRss = Math.max(peakRss, await sampleRss());
  const writesAfter = await sampleWrites();
  latencies.sort((a, b) => a - b);
  const commits = writesBefore?.writes && writesAfter.writes.transactions - writesBefore.writes.transactions;
  const writeOps = writesBefore?.writes && writesAfter.writes.operations - writesBefore.writes.operations;
  // Server CPU per operation: unlike the rate, it hardly depends on how loaded the machine is.
  const cpuMs = writesBefore && writesAfter.cpuMs - writesBefore.cpuMs;
  return {
    perSecond: Math.round((latencies.length / elapsed) * 10) / 10,
    completed: latencies.length,
    errors,
    ...(firstError ? { firstError } : {}),
    p50Ms: Math.round(percentile(latencies, 50) * 10) / 10,
    p99Ms: Math.round(percentile(latencies, 99) * 10) / 10,
    peakRssMiB: Math.round((peakRss / 1048576) * 10) / 10,
    ...(cpuMs ? { serverCpuMsPerOp: Math.round((cpuMs / Math.max(1, latencies.length)) * 100) / 100 } : {}),
    ...(commits
      ? {
          commitsPerOp: Math.round((commits / Math.max(1, latencies.length)) * 100) / 100,
          writesPerCommit: Math.round((writeOps / commits) * 10) / 10,
        }
      : {}),
  };
}

async function benchServer(kind, options, log) {
  const server = startChild(kind);
  const { url } = await server.ready;
  try {
    const cookie = kind === "gatehouse" ? await gatehouseSession(url) : undefined;
    const sampleRss = () => server.rss();
    const sampleWrites = () => server.writes();
    // Warm-up: JIT, statement cache, connection pool.
    await measure({
      seconds: 1,
      concurrency: options.concurrency,
      init: async () => 0,
      op: async () => codeFlow(url, cookie),
      sampleRss,
    });
    log(`${kind}: code flows for ${options.seconds} s ...`);
    const flows = await measure({
      seconds: options.seconds,
      concurrency: options.concurrency,
      init: async () => 0,
      op: async () => {
        await codeFlow(url, cookie);
        return 0;
      },
      sampleRss,
      sampleWrites,
    });
    log(`${kind}: refresh grants for ${options.seconds} s ...`);
    let worker = 0;
    const refreshes = await measure({
      seconds: options.seconds,
      concurrency: options.concurrency,
      // Each worker signs in on its own: grants of one sign-in supersede each other (a step-up
      // retires the grant it covers), so workers sharing a session would revoke each other's chains.
      init: async () => {
        const session =
          kind === "gatehouse" ? await gatehouseSession(url, `${USERNAME}-${worker++}`) : undefined;
        return (await codeFlow(url, session)).refresh_token;
      },
      op: (token) => refresh(url, token),
      sampleRss,
      sampleWrites,
    });
    return { flows, refreshes };
  } finally {
    await server.close();
  }
}

function parseOptions(argv) {
  const options = { json: false, seconds: 6, concurrency: 8 };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split("=", 2);
    const value = () => Number(inline ?? argv[++i]);
    if (name === "--json") options.json = true;
    else if (name === "--seconds") options.seconds = value();
    else if (name === "--concurrency") options.concurrency = value();
    else throw new Error(`unknown option ${name}`);
  }
  if (!(options.seconds > 0) || !(options.concurrency >= 1) || options.concurrency > MAX_WORKERS)
    throw new Error("--seconds and --concurrency must be positive");
  return options;
}

/**
 * What one durable SQLite commit costs on this disk (WAL, synchronous=FULL: one fsync per commit).
 * better-sqlite3 is synchronous, so with one commit per write this would bound Gatehouse's rate (a
 * silent code flow writes twice: code insert, redemption; a refresh once). The store group-commits
 * the writes that arrive together, so under concurrency the commits per operation (printed per
 * case) fall below that and the bound with them.
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
    return Math.round(ms * 100) / 100;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const options = parseOptions(process.argv.slice(2));
  const log = (line) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
  const commitMs = await probeCommitMs();
  log(
    `durable SQLite commit on this disk: ${commitMs} ms (one commit per write would cap at ~${Math.round(1000 / commitMs / 2)} flows/s, ~${Math.round(1000 / commitMs)} refreshes/s)`,
  );
  const gatehouse = await benchServer("gatehouse", options, log);
  const sdk = await benchServer("sdk", options, log);
  const result = {
    benchmark: "authorization-server",
    node: process.version,
    seconds: options.seconds,
    concurrency: options.concurrency,
    sqliteCommitMs: commitMs,
    /** The cap if every write committed on its own (without group commit). */
    gatehouseCeilingOneCommitPerWrite: {
      flowsPerSecond: Math.round(1000 / commitMs / 2),
      refreshesPerSecond: Math.round(1000 / commitMs),
    },
    gatehouse: { storage: "SQLite (WAL, synchronous=FULL)", ...gatehouse },
    sdk: {
      storage: "in memory (DemoInMemoryAuthProvider; refresh rotation added by this script)",
      ...sdk,
    },
    ratios: {
      flows: Math.round((gatehouse.flows.perSecond / sdk.flows.perSecond) * 100) / 100,
      refreshes: Math.round((gatehouse.refreshes.perSecond / sdk.refreshes.perSecond) * 100) / 100,
    },
  };
  if (options.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const row = (name, r) =>
    `  ${name.padEnd(22)} ${String(r.perSecond).padStart(8)}/s  p50 ${String(r.p50Ms).padStart(6)} ms  p99 ${String(r.p99Ms).padStart(6)} ms  peak RSS ${r.peakRssMiB} MiB  errors ${r.errors}  server CPU ${r.serverCpuMsPerOp} ms/op` +
    (r.commitsPerOp === undefined
      ? ""
      : `  commits/op ${r.commitsPerOp} (${r.writesPerCommit} writes/commit)`);
  log(
    `\nAuthorization server, ${options.concurrency} concurrent loops, ${options.seconds} s per case (${process.version})`,
  );
  log(row("gatehouse flows", gatehouse.flows));
  log(row("sdk demo flows", sdk.flows));
  log(row("gatehouse refreshes", gatehouse.refreshes));
  log(row("sdk demo refreshes", sdk.refreshes));
  log(`  ratio gatehouse/sdk: flows ${result.ratios.flows}, refreshes ${result.ratios.refreshes}`);
}

const serveIndex = process.argv.indexOf("--serve");
if (serveIndex >= 0) {
  childMain(process.argv[serveIndex + 1]).catch((error) => {
    process.stderr.write(`bench server failed: ${error.stack ?? error}\n`);
    process.exit(1);
  });
} else {
  main().catch((error) => {
    process.stderr.write(`bench failed: ${error.stack ?? error}\n`);
    process.exit(1);
  });
}
