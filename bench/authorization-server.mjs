#!/usr/bin/env node
/**
 * Authorization-server benchmark: issue 11's two rows side by side in one run,
 *
 * - code flows per second by a signed-in browser session ("sessions"): GET /authorize answered
 *   silently from the session and a remembered consent, then POST /token with the PKCE verifier;
 * - refresh grants per second: POST /token with grant_type=refresh_token, each loop following its
 *   own rotation chain;
 *
 * for Gatehouse (`createAuthorizationServer` from dist/, on durable SQLite, with a key-encryption key
 * as `gatehouse serve` always has, so codes are sealed)
 * and the peer, the MCP TypeScript SDK's `mcpAuthRouter` (Express) with its in-memory demo provider
 * (`DemoInMemoryAuthProvider`) issuing JWT access tokens (ES256, jose) as Gatehouse does. Rate limits
 * are off on both sides. The demo provider issues opaque tokens and has no refresh ("Not implemented
 * for example demo"); the JWT signing and the smallest in-memory rotation are added by this script
 * to a subclass, and the output says so.
 *
 * Besides, Gatehouse alone (the peer has no login): complete flows by a browser that is not signed
 * in ("sign-ins"): GET /authorize, the login page, POST /login with the password (scrypt, the KDF
 * kept strong on purpose), the code, POST /token. Sessions never pay scrypt; sign-ins always do.
 * Each sign-in comes from its own loopback address (127.1.x.y) and user, so the login limits per
 * address and per user (which the bench keeps on) are never reached.
 *
 * Method (issue 11): each server runs in its own child process, pinned with `taskset` to core 0
 * when `taskset` exists and there are two cores or more; this process, the load generator, pins
 * itself to core 1. Both servers stay up for the whole run and are measured in interleaved repeats
 * (the order alternating per repeat); each repeat gives a ratio Gatehouse/peer, and the summary is
 * the median. Beside req/s stands the server CPU per request (user + system of the server process,
 * threads included), which depends far less on what else the shared machine is doing; its ratio
 * is peer CPU / Gatehouse CPU, so ≥ 1.0 means "at least as good" in both. The load generator's own
 * CPU per request is printed too: if it approaches 1000 ms / req/s, the generator is the limit.
 * Run after `npm run build`:
 *
 *   node bench/authorization-server.mjs [--json] [--seconds 3] [--repeats 3] [--concurrency 8]
 *                                       [--only sessions|refreshes|signIns] [--stores sqlite,sqlite-full,...]
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
 * - `memory`: Gatehouse's in-memory store (what Gatehouse costs without durable storage).
 *
 * The default is all five; `--store X` is `--stores X`. Ratios: each store against the peer, and
 * each durable store against Gatehouse's own memory store.
 *
 * `--only` measures one case (for profiling: BENCH_CHILD_EXEC_ARGV="--cpu-prof" passes flags to
 * the server processes); the ratios need sessions and refreshes both.
 *
 * BENCH_DIST=/abs/path/to/a/build loads Gatehouse from another build of this checkout (one inside
 * it, so its imports resolve), for before/after figures of a change.
 *
 * With --json, progress goes to stderr and the last line on stdout is one JSON object.
 */
import { execFileSync, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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
/** Most concurrent loops a run may use (each refresh loop signs in as its own user). */
const MAX_WORKERS = 64;
/** Users for the sign-in case: each sign-in takes the next one, so no user meets its login limit. */
const SIGN_IN_USERS = 512;
const PASSWORD = "correct horse battery staple";

// ------------------------------------------------------------------ server children

/** The stores `--stores` may name (the -slow ones are their store under a slowed fsync). */
const STORES = ["sqlite", "sqlite-full", "sqlite-slow", "sqlite-full-slow", "memory"];
/** Microseconds strace adds to every fsync/fdatasync of a `-slow` server. */
const SLOW_FSYNC_US = 2000;

/** The store Gatehouse runs on: durable SQLite (NORMAL + WAL fsync, or FULL), or its memory store. */
async function openStore(kind, dir) {
  if (kind === "memory") return (await import(`${DIST}storage/memory/index.js`)).createMemoryStore();
  const { createSqliteStore } = await import(`${DIST}storage/sqlite/index.js`);
  const full = kind.startsWith("sqlite-full");
  return createSqliteStore({ path: join(dir, "gatehouse.sqlite"), ...(full ? { synchronous: "full" } : {}) });
}

async function serveGatehouse(storeKind) {
  const { createAuthorizationServer, hashPassword } = await import(`${DIST}authorization-server/index.js`);
  const { listen } = await import(`${DIST}http/node.js`);
  const { silentLogger } = await import(`${DIST}shared/log.js`);
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-as-"));
  const store = await openStore(storeKind, dir);
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
    // As `gatehouse serve` always runs (a configured or generated key-encryption key): the signing
    // key is stored encrypted, and authorization codes are sealed (grants/sealed-code.ts).
    keyEncryptionKeys: [randomBytes(32).toString("base64url")],
    // Rate limits off, as on the peer: one client and one address send hundreds of requests a second.
    tokenRateLimit: { perClientPerMinute: 0, perAddressPerMinute: 0 },
  });
  handler = server.fetch;
  // One user per refresh loop (grants of one sign-in supersede each other), the one the session
  // case shares, and the sign-in case's users. One hash for all: the KDF cost is paid at login.
  const passwordHash = await hashPassword(PASSWORD);
  const usernames = [
    USERNAME,
    ...Array.from({ length: MAX_WORKERS }, (_, i) => `${USERNAME}-${i}`),
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

function startChild(kind, pin, storeKind) {
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
  const child = spawn(command[0], command.slice(1), { stdio: ["ignore", "inherit", "inherit", "ipc"] });
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
    kind,
    store: storeKind,
    name: kind === "gatehouse" ? `gatehouse ${storeKind}` : "sdk",
    ready: next(),
    /** Resident memory, the store's write counters (Gatehouse) and the CPU the server has used. */
    async sample() {
      child.send("sample");
      return await next();
    },
    async close() {
      if (exited) return;
      child.send("close");
      await next();
    },
  };
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
  return (await gatehouseSignIn(server.url, username, pkce().challenge, "s")).cookie;
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

/** GET /authorize (silent, from the session) → code → POST /token. Returns the token response body. */
async function codeFlow(base, cookie) {
  const { verifier, challenge } = pkce();
  const state = randomBytes(12).toString("base64url");
  const res = await fetch(authorizeUrl(base, challenge, state), {
    redirect: "manual",
    headers: cookie ? { cookie } : {},
  });
  await res.arrayBuffer();
  return redeem(base, res.headers.get("location") ?? "", state, verifier);
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
  const before = await server.sample();
  const loadBefore = process.cpuUsage();
  const sampler = setInterval(async () => {
    peakRss = Math.max(peakRss, (await server.sample()).rss);
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
    ...(firstError ? { firstError } : {}),
    // Server CPU per operation: unlike the rate, it hardly depends on how loaded the machine is.
    serverCpuMsPerOp: round((after.cpuMs - before.cpuMs) / n, 3),
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

/** The cases every server runs; `signIns` only Gatehouse (the peer has no login). */
function cases(server, concurrency) {
  const url = server.url;
  const chain = async (i) => (await codeFlow(url, await session(server, `${USERNAME}-${i}`))).refresh_token;
  const shared = { cookie: undefined };
  return {
    sessions: {
      states: Array(concurrency).fill(0),
      prepare: async () => {
        shared.cookie = await session(server);
      },
      init: async () => 0,
      op: async () => {
        await codeFlow(url, shared.cookie);
        return 0;
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
      op: (token) => refresh(url, token),
    },
    ...(server.signIns
      ? {
          signIns: {
            states: Array(concurrency).fill(0),
            prepare: async () => {},
            init: async () => 0,
            op: async () => {
              await signInFlow(url);
              return 0;
            },
          },
        }
      : {}),
  };
}

function parseOptions(argv) {
  const options = { json: false, seconds: 3, repeats: 3, concurrency: 8, only: undefined, stores: undefined };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split("=", 2);
    const value = () => Number(inline ?? argv[++i]);
    if (name === "--json") options.json = true;
    else if (name === "--seconds") options.seconds = value();
    else if (name === "--repeats") options.repeats = value();
    else if (name === "--concurrency") options.concurrency = value();
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
    (options.stores && !options.stores.every((store) => STORES.includes(store)))
  ) {
    throw new Error(
      `--seconds, --repeats and --concurrency (at most ${MAX_WORKERS}) must be positive; --stores lists ${STORES.join(", ")}`,
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
  const firstError = runs.find((r) => r.firstError)?.firstError;
  if (firstError) out.firstError = firstError;
  return out;
}

const USAGE = `Usage: node bench/authorization-server.mjs [--json] [--seconds 3] [--repeats 3] [--concurrency 8]
                                         [--only sessions|refreshes|signIns] [--stores ${STORES.join(",")}]

Gatehouse on each store named (default all; -slow: 2 ms added to every fsync through strace) against the MCP SDK router in
memory (sessions, refreshes), sign-ins for Gatehouse alone on the first store; servers pinned to core 0, the load generator to
core 1. Run after npm run build.
BENCH_DIST=<build> measures another build; BENCH_CHILD_EXEC_ARGV passes flags to the servers.
`;

async function main() {
  const options = parseOptions(process.argv.slice(2));
  if (options.help) {
    process.stdout.write(USAGE);
    return;
  }
  const log = (line) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
  const strace = haveStrace();
  const wanted = options.stores ?? STORES;
  const stores = wanted.filter((store) => strace || !store.endsWith("-slow"));
  const skipped = wanted.filter((store) => !stores.includes(store));
  if (stores.length === 0) throw new Error(`nothing to measure: ${skipped.join(", ")} need strace`);
  const pin = pinning();
  const loadAverageBefore = loadavg().map((v) => round(v, 2));
  const commitMs = await probeCommitMs();
  log(
    `durable SQLite commit on this disk (synchronous=FULL, on the loop): ${commitMs} ms; pinning: ${pin ? `servers on core ${pin.server}, load generator on core ${pin.loadGenerator}` : "none"}` +
      (skipped.length ? `; left out (strace is not installed): ${skipped.join(", ")}` : ""),
  );

  const servers = [
    ...stores.map((store) => startChild("gatehouse", pin, store)),
    startChild("sdk", pin, undefined),
  ];
  // Sign-ins (scrypt at every login) on the first store only: they say what a login costs, not
  // what a store does.
  servers[0].signIns = true;
  const results = Object.fromEntries(servers.map((server) => [server.name, {}]));
  try {
    for (const server of servers) server.url = (await server.ready).url;
    const work = new Map(servers.map((server) => [server, cases(server, options.concurrency)]));
    for (const [server, byCase] of work) {
      for (const c of Object.values(byCase)) await c.prepare();
      // Warm-up: JIT, statement cache, connections.
      for (const name of ["sessions", "refreshes"]) {
        await measure(server, { seconds: 1, ...byCase[name] });
      }
    }
    for (let r = 0; r < options.repeats; r++) {
      // Every server in each repeat, the order reversed every other repeat.
      const order = r % 2 === 0 ? servers : [...servers].reverse();
      for (const name of ["sessions", "refreshes", "signIns"]) {
        if (options.only && options.only !== name) continue;
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
  } finally {
    for (const server of servers) await server.close().catch(() => {});
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
    ];
    for (const [label, other] of against) {
      for (const name of ["sessions", "refreshes"]) {
        const r = ratio(`gatehouse ${store}`, other, name);
        if (r) ratios[`${store}/${label} ${name}`] = r;
      }
    }
  }
  const storage = {
    sqlite: "SQLite (WAL, synchronous=NORMAL, the store's own fdatasync of the WAL off the event loop)",
    "sqlite-full": "SQLite (WAL, synchronous=FULL)",
    "sqlite-slow": `SQLite as sqlite, ${SLOW_FSYNC_US} µs added to every fsync/fdatasync (strace)`,
    "sqlite-full-slow": `SQLite as sqlite-full, ${SLOW_FSYNC_US} µs added to every fsync/fdatasync (strace)`,
    memory: "in memory (createMemoryStore)",
  };
  const result = {
    benchmark: "authorization-server",
    node: process.version,
    seconds: options.seconds,
    repeats: options.repeats,
    concurrency: options.concurrency,
    pinned: pin ?? null,
    loadAverage: { before: loadAverageBefore, after: loadavg().map((v) => round(v, 2)) },
    sqliteCommitMs: commitMs,
    ...(skipped.length ? { leftOut: skipped } : {}),
    servers: Object.fromEntries(
      servers.map((server) => [
        server.name,
        {
          storage:
            server.kind === "sdk"
              ? "in memory (DemoInMemoryAuthProvider; JWT access tokens and refresh rotation added by this script)"
              : storage[server.store],
          ...Object.fromEntries(
            Object.entries(results[server.name]).map(([k, runs]) => [k, { ...summarize(runs), runs }]),
          ),
        },
      ]),
    ),
    /**
     * "<store>/sdk <case>": Gatehouse on that store against the peer; "<store>/memory <case>":
     * against Gatehouse on its memory store. Per repeat, then the median; serverCpu is the other's
     * CPU per request ÷ this one's (≥ 1 is at least as good), p99 this one's ÷ the other's.
     */
    ratios,
  };
  if (options.json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  const row = (name, r) =>
    `  ${name.padEnd(34)} ${String(r.perSecond).padStart(8)}/s  server CPU ${String(r.serverCpuMsPerOp).padStart(6)} ms/op  load gen CPU ${r.loadGeneratorCpuMsPerOp} ms/op  p50 ${r.p50Ms} ms  p95 ${r.p95Ms} ms  p99 ${r.p99Ms} ms  peak RSS ${r.peakRssMiB} MiB  errors ${r.errors}` +
    (r.commitsPerOp === undefined ? "" : `  commits/op ${r.commitsPerOp}`) +
    (r.walSyncsPerOp === undefined ? "" : `  WAL fsyncs/op ${r.walSyncsPerOp}`) +
    (r.checkpointsPer1kOps === undefined
      ? ""
      : `  checkpoints/1k ops ${r.checkpointsPer1kOps} (${r.checkpointLoopUsPerOp} µs/op on the loop)`) +
    (r.firstError ? `  first error: ${r.firstError}` : "");
  log(
    `\nAuthorization server, ${options.concurrency} concurrent loops, ${options.repeats} interleaved repeats of ${options.seconds} s per case, medians (${process.version}; load average ${result.loadAverage.before.join(" ")} → ${result.loadAverage.after.join(" ")})`,
  );
  for (const server of servers) log(`  ${server.name}: ${result.servers[server.name].storage}`);
  for (const name of ["sessions", "refreshes", "signIns"]) {
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
