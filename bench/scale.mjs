#!/usr/bin/env node
/**
 * Scale benchmark of the authorization server (issue 5 "Load"): complete flows per second and
 * refresh grants per second, with p99 latency and the count of 5xx answers, on SQLite, PostgreSQL
 * with one instance and PostgreSQL with two instances, then a bounded soak (mixed load on two
 * PostgreSQL instances) that samples the instances' resident memory. Run after `npm run build`:
 *
 *   node bench/scale.mjs [--json] [--seconds 15] [--soak 120] [--concurrency 8]
 *                        [--configs sqlite,postgres-1,postgres-2] [--soak-config postgres-2]
 *                        [--database-url postgres://postgres@127.0.0.1:5432/test]
 *
 * Instances are real `gatehouse serve` processes (`dist/cli/main.js`) on loopback, started with
 * `--trust-proxy` as behind a load balancer; every simulated browser sends its own
 * `X-Forwarded-For`, so the per-address login limit applies per browser as in production, and
 * every request goes to the next instance in turn (no stickiness). A complete flow is GET
 * /authorize, GET+POST /login (a real scrypt check), GET+POST /consent, POST /token. The load
 * generator shares the machine with the servers, so figures are a floor, not a capacity.
 *
 * PostgreSQL runs use a database created for the run and dropped after. With --json the last
 * line printed is one JSON object with every figure.
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { redact } from "./as-postgres.mjs";

const MAIN = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
const ISSUER = "http://127.0.0.1:8999";
const RESOURCE = "http://127.0.0.1:9001/mcp";
const SCOPES = "notes:read notes:write";
const CLIENT_ID = "bench-app";
const REDIRECT_URI = "http://127.0.0.1:9002/callback";
const PASSWORD = "correct horse battery staple";

// ---------------------------------------------------------------- options

function parseArgs(argv) {
  const options = {
    json: false,
    seconds: 15,
    soak: 120,
    concurrency: 8,
    configs: ["sqlite", "postgres-1", "postgres-2"],
    soakConfig: "postgres-2",
    databaseUrl: process.env.GATEHOUSE_BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  };
  for (let i = 0; i < argv.length; i++) {
    const [name, inline] = argv[i].split("=", 2);
    const value = () => inline ?? argv[++i];
    switch (name) {
      case "--json":
        options.json = true;
        break;
      case "--seconds":
        options.seconds = positive(name, value());
        break;
      case "--soak":
        options.soak = Number(value());
        if (!Number.isFinite(options.soak) || options.soak < 0)
          throw new Error("--soak must be >= 0 seconds");
        break;
      case "--concurrency":
        options.concurrency = positive(name, value());
        break;
      case "--configs":
        options.configs = value().split(",").filter(Boolean);
        break;
      case "--soak-config":
        options.soakConfig = value();
        break;
      case "--database-url":
        options.databaseUrl = value();
        break;
      default:
        throw new Error(`unknown option ${name}`);
    }
  }
  for (const c of [...options.configs, options.soakConfig]) {
    if (!/^(sqlite|postgres-[12])$/.test(c))
      throw new Error(`unknown config ${c} (sqlite, postgres-1, postgres-2)`);
  }
  return options;
}

function positive(name, raw) {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number`);
  return n;
}

// ---------------------------------------------------------------- statistics

class Recorder {
  constructor() {
    this.latencies = [];
    this.count = 0;
    this.errors5xx = 0;
    this.otherErrors = 0;
    this.failures = new Map();
  }
  ok(ms) {
    this.count++;
    this.latencies.push(ms);
  }
  fail(reason) {
    this.otherErrors++;
    this.failures.set(reason, (this.failures.get(reason) ?? 0) + 1);
  }
  summary(seconds) {
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const pick = (q) =>
      sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : null;
    return {
      perSecond: round(this.count / seconds),
      completed: this.count,
      p50Ms: round(pick(0.5)),
      p99Ms: round(pick(0.99)),
      errors5xx: this.errors5xx,
      otherErrors: this.otherErrors,
      ...(this.failures.size ? { failureReasons: Object.fromEntries(this.failures) } : {}),
    };
  }
}

function round(n) {
  return n === null ? null : Math.round(n * 10) / 10;
}

// ---------------------------------------------------------------- HTTP as a browser and a client

class Balancer {
  constructor(bases) {
    this.bases = bases;
    this.next = 0;
  }
  pick() {
    return this.bases[this.next++ % this.bases.length];
  }
}

class Http {
  constructor(recorder) {
    this.recorder = recorder;
  }
  async send(url, init) {
    const response = await fetch(url, { ...init, redirect: "manual" });
    if (response.status >= 500) {
      this.recorder.errors5xx++;
      await response.body?.cancel();
      throw new Error(`5xx:${response.status}`);
    }
    return response;
  }
}

class Browser {
  constructor(http) {
    this.http = http;
    this.cookies = new Map();
    // A private address per browser: the per-address login limit then applies per browser.
    this.address = `10.${rand8()}.${rand8()}.${rand8()}`;
  }
  async request(url, init = {}) {
    const headers = new Headers(init.headers);
    headers.set("x-forwarded-for", this.address);
    if (this.cookies.size) headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await this.http.send(url, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const pair = line.split(";")[0];
      const eq = pair.indexOf("=");
      const value = pair.slice(eq + 1).trim();
      if (value === "" || /max-age=0/i.test(line)) this.cookies.delete(pair.slice(0, eq).trim());
      else this.cookies.set(pair.slice(0, eq).trim(), value);
    }
    return response;
  }
  form(url, fields) {
    return this.request(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fields).toString(),
    });
  }
}

function rand8() {
  return randomBytes(1)[0];
}

function hiddenFields(html) {
  const out = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]] ??= m[2]
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&amp;/g, "&");
  }
  return out;
}

async function expect(response, status, step) {
  if (response.status !== status) {
    await response.body?.cancel();
    throw new Error(`${step}:${response.status}`);
  }
}

/** One complete flow; every request goes to the instance the balancer picks. Returns the refresh token. */
async function completeFlow(http, balancer, username) {
  const browser = new Browser(http);
  const verifier = randomBytes(32).toString("base64url");
  const query = new URLSearchParams({
    response_type: "code",
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: `${SCOPES} offline_access`,
    state: randomBytes(8).toString("base64url"),
  });
  const start = await browser.request(`${balancer.pick()}/authorize?${query}`);
  await expect(start, 303, "authorize");
  const loginPage = await browser.request(`${balancer.pick()}${start.headers.get("location")}`);
  await expect(loginPage, 200, "login-page");
  const login = await browser.form(`${balancer.pick()}/login`, {
    ...hiddenFields(await loginPage.text()),
    username,
    password: PASSWORD,
  });
  await expect(login, 303, "login");
  let location = login.headers.get("location");
  const consentPage = await browser.request(`${balancer.pick()}${location}`);
  if (consentPage.status === 200) {
    const consent = await browser.form(`${balancer.pick()}/consent`, {
      ...hiddenFields(await consentPage.text()),
      decision: "approve",
    });
    await expect(consent, 303, "consent");
    location = consent.headers.get("location");
  } else {
    await expect(consentPage, 303, "consent-page");
    location = consentPage.headers.get("location");
  }
  const code = new URL(location).searchParams.get("code");
  if (!code) throw new Error("no-code");
  const token = await http.send(`${balancer.pick()}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      client_id: CLIENT_ID,
      redirect_uri: REDIRECT_URI,
      resource: RESOURCE,
    }).toString(),
  });
  await expect(token, 200, "token");
  const body = await token.json();
  if (typeof body.refresh_token !== "string") throw new Error("no-refresh-token");
  return body.refresh_token;
}

async function refreshOnce(http, balancer, refreshToken) {
  const response = await http.send(`${balancer.pick()}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: refreshToken,
      client_id: CLIENT_ID,
    }).toString(),
  });
  await expect(response, 200, "refresh");
  return (await response.json()).refresh_token;
}

// ---------------------------------------------------------------- load phases

/** Runs `work` on `concurrency` loops for `seconds`; each iteration timed. */
async function timedLoops(seconds, concurrency, recorder, work) {
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      let i = 0;
      while (performance.now() < deadline) {
        const started = performance.now();
        try {
          await work(worker, i++);
          recorder.ok(performance.now() - started);
        } catch (error) {
          const reason = String(error?.message ?? error);
          if (!reason.startsWith("5xx:")) recorder.fail(reason.slice(0, 60));
        }
      }
    }),
  );
}

class Users {
  constructor(names) {
    this.names = names;
    this.next = 0;
  }
  // Round-robin keeps each user far below the per-user login limit (10 per 5 minutes).
  take() {
    return this.names[this.next++ % this.names.length];
  }
}

async function flowsPhase(options, balancer, users) {
  const recorder = new Recorder();
  const http = new Http(recorder);
  const refreshTokens = [];
  await timedLoops(options.seconds, options.concurrency, recorder, async () => {
    refreshTokens.push(await completeFlow(http, balancer, users.take()));
  });
  return { summary: recorder.summary(options.seconds), refreshTokens };
}

async function refreshPhase(options, balancer, chains) {
  const recorder = new Recorder();
  const http = new Http(recorder);
  // Each worker owns its chains: a refresh token is presented exactly once, as a well-behaved client does.
  const perWorker = Array.from({ length: options.concurrency }, (_, w) =>
    chains.filter((_, i) => i % options.concurrency === w),
  );
  if (perWorker.some((c) => c.length === 0)) throw new Error("not enough grants for the refresh phase");
  await timedLoops(options.seconds, options.concurrency, recorder, async (worker, i) => {
    const mine = perWorker[worker];
    const slot = i % mine.length;
    mine[slot] = await refreshOnce(http, balancer, mine[slot]);
  });
  return recorder.summary(options.seconds);
}

// ---------------------------------------------------------------- instances and databases

function startInstance(databaseArgs) {
  const child = spawn(
    process.execPath,
    [
      MAIN,
      "serve",
      "--insecure-loopback",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--issuer",
      ISSUER,
      "--resource",
      RESOURCE,
      "--scopes",
      SCOPES,
      "--no-request-log",
      "--trust-proxy",
      "--json",
      ...databaseArgs,
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, GATEHOUSE_TEST_FAULT: "" } },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c) => {
    stderr = (stderr + c).slice(-5000);
  });
  return new Promise((resolve, reject) => {
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => {
      stdout += chunk;
      const line = stdout.split("\n").find((l) => l.includes('"ready"'));
      if (line) {
        const { port } = JSON.parse(line);
        resolve({
          base: `http://127.0.0.1:${port}`,
          pid: child.pid,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done();
              child.once("exit", () => done());
              child.kill("SIGTERM");
            }),
        });
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`gatehouse serve exited (${code}) before ready: ${stderr}`)),
    );
  });
}

function rssMiB(pid) {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Math.round((Number(match[1]) / 1024) * 10) / 10 : null;
  } catch {
    return null;
  }
}

async function withDatabase(config, options, fn) {
  if (config === "sqlite") {
    const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
    const { createSqliteStore } = await import("../dist/storage/sqlite/index.js");
    const store = createSqliteStore({ path: join(dataDir, "gatehouse.sqlite") });
    try {
      return await fn(store, ["--data", dataDir], 1);
    } finally {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const { default: pg } = await import("pg");
  const admin = new pg.Client({ connectionString: options.databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (error) {
    throw new Error(`PostgreSQL is not reachable at ${redact(options.databaseUrl)}: ${error.message}`);
  }
  const name = `gh_bench_${randomBytes(4).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(options.databaseUrl);
  url.pathname = `/${name}`;
  const { createPostgresStore } = await import("../dist/storage/postgres/index.js");
  const store = createPostgresStore({ connectionString: url.href });
  try {
    return await fn(store, ["--database-url", url.href], config === "postgres-2" ? 2 : 1);
  } finally {
    await store.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

async function prepare(store, userCount) {
  await store.migrate();
  const { hashPassword } = await import("../dist/authorization-server/core/password.js");
  const passwordHash = await hashPassword(PASSWORD);
  await store.createClient({
    clientId: CLIENT_ID,
    source: "preregistered",
    redirectUris: [REDIRECT_URI],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: Date.now(),
  });
  const names = [];
  for (let i = 0; i < userCount; i++) {
    const username = `bench-${i}`;
    await store.createUser({ id: `u-${i}`, username, passwordHash, isAdmin: false, createdAt: Date.now() });
    names.push(username);
  }
  return new Users(names);
}

/** Users needed so no one passes 10 logins in 5 minutes, assuming at most 100 flows/s. */
function usersFor(seconds) {
  return Math.min(5000, Math.max(200, Math.ceil((seconds * 100) / 8)));
}

// ---------------------------------------------------------------- runs

async function throughputRun(config, options, log) {
  return withDatabase(config, options, async (store, dbArgs, instanceCount) => {
    const users = await prepare(store, usersFor(options.seconds));
    const instances = [];
    try {
      for (let i = 0; i < instanceCount; i++) instances.push(await startInstance(dbArgs));
      const balancer = new Balancer(instances.map((i) => i.base));
      log(`${config}: ${instanceCount} instance(s), complete flows for ${options.seconds}s ...`);
      const flows = await flowsPhase(options, balancer, users);
      log(`${config}: refresh grants for ${options.seconds}s over ${flows.refreshTokens.length} grants ...`);
      const refresh = await refreshPhase(options, balancer, flows.refreshTokens);
      return {
        config,
        instances: instanceCount,
        flows: flows.summary,
        refresh,
        rssMiB: instances.map((i) => rssMiB(i.pid)),
      };
    } finally {
      await Promise.all(instances.map((i) => i.stop()));
    }
  });
}

async function soakRun(config, options, log) {
  return withDatabase(config, options, async (store, dbArgs, instanceCount) => {
    const users = await prepare(store, usersFor(options.soak));
    const instances = [];
    try {
      for (let i = 0; i < instanceCount; i++) instances.push(await startInstance(dbArgs));
      const balancer = new Balancer(instances.map((i) => i.base));
      log(`soak on ${config}: ${options.soak}s of mixed load (1/4 complete flows, 3/4 refresh) ...`);
      const flowRecorder = new Recorder();
      const refreshRecorder = new Recorder();
      const chains = [];
      const samples = [];
      const sample = () =>
        samples.push({ t: Math.round(performance.now() - t0), rssMiB: instances.map((i) => rssMiB(i.pid)) });
      const t0 = performance.now();
      sample();
      const sampler = setInterval(sample, Math.max(1000, (options.soak * 1000) / 24));
      // Half the workers: a quarter of the load by count is flows, the rest refreshes.
      const flowWorkers = Math.max(1, Math.floor(options.concurrency / 4));
      const refreshWorkers = Math.max(1, options.concurrency - flowWorkers);
      const flowHttp = new Http(flowRecorder);
      const refreshHttp = new Http(refreshRecorder);
      for (let i = 0; i < refreshWorkers * 2; i++)
        chains.push(await completeFlow(flowHttp, balancer, users.take()));
      await Promise.all([
        timedLoops(options.soak, flowWorkers, flowRecorder, async () => {
          await completeFlow(flowHttp, balancer, users.take());
        }),
        timedLoops(options.soak, refreshWorkers, refreshRecorder, async (worker, i) => {
          const slot = worker * 2 + (i % 2);
          chains[slot] = await refreshOnce(refreshHttp, balancer, chains[slot]);
        }),
      ]);
      clearInterval(sampler);
      sample();
      const perInstance = instances.map((_, k) => samples.map((s) => s.rssMiB[k]).filter((v) => v !== null));
      return {
        config,
        instances: instanceCount,
        seconds: options.soak,
        flows: flowRecorder.summary(options.soak),
        refresh: refreshRecorder.summary(options.soak),
        rssMiB: perInstance.map((series) => ({
          start: series[0],
          // After warm-up: a quarter of the way in, and the end.
          quarter: series[Math.floor(series.length / 4)],
          end: series[series.length - 1],
          max: Math.max(...series),
        })),
        samples,
      };
    } finally {
      await Promise.all(instances.map((i) => i.stop()));
    }
  });
}

function formatRun(r) {
  const f = r.flows;
  const g = r.refresh;
  return `${r.config.padEnd(11)} x${r.instances}  flows ${String(f.perSecond).padStart(6)}/s p99 ${String(f.p99Ms).padStart(7)} ms 5xx ${f.errors5xx}  |  refresh ${String(g.perSecond).padStart(7)}/s p99 ${String(g.p99Ms).padStart(7)} ms 5xx ${g.errors5xx}  |  other errors ${f.otherErrors + g.otherErrors}`;
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const log = (line) => process.stderr.write(`bench:scale: ${line}\n`);
  const result = {
    machine: { cpus: (await import("node:os")).cpus().length, node: process.version },
    seconds: options.seconds,
    concurrency: options.concurrency,
    runs: [],
    errors: [],
  };
  for (const config of options.configs) {
    try {
      const run = await throughputRun(config, options, log);
      result.runs.push(run);
      if (!options.json) console.log(formatRun(run));
    } catch (error) {
      result.errors.push({ config, message: error.message });
      console.error(`${config}: ${error.message}`);
    }
  }
  if (options.soak > 0) {
    try {
      result.soak = await soakRun(options.soakConfig, options, log);
      if (!options.json) {
        const s = result.soak;
        console.log(
          `soak ${s.config} x${s.instances} ${s.seconds}s: flows ${s.flows.perSecond}/s (5xx ${s.flows.errors5xx}), refresh ${s.refresh.perSecond}/s p99 ${s.refresh.p99Ms} ms (5xx ${s.refresh.errors5xx}), other errors ${s.flows.otherErrors + s.refresh.otherErrors}`,
        );
        for (const [k, m] of s.rssMiB.entries()) {
          console.log(
            `  instance ${k + 1} RSS MiB: start ${m.start}, after warm-up ${m.quarter}, end ${m.end}, max ${m.max}`,
          );
        }
      }
    } catch (error) {
      result.errors.push({ config: `soak:${options.soakConfig}`, message: error.message });
      console.error(`soak: ${error.message}`);
    }
  }
  if (options.json) console.log(JSON.stringify(result));
  if (result.errors.length) process.exitCode = 1;
}

main().catch((error) => {
  console.error(`bench:scale: ${error.message}`);
  process.exitCode = 1;
});
