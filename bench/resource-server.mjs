#!/usr/bin/env node
/**
 * Resource-server benchmark: requests/s and p99 of one protected route against the same route
 * unprotected, in one run, with autocannon on loopback. Run after `npm run build`:
 *
 *   node bench/resource-server.mjs [--json] [--seconds 5] [--connections 10]
 *
 * Each server case runs in a child process (one core for the server, one for autocannon).
 * Cases:
 *   raw          node:http, no adapter, no gate (the floor)
 *   unprotected  toNodeListener + web handler, no gate
 *   warm         toNodeListener + requireBearer + cachedVerifier(jwtVerifier), one token
 *   distinct     same server, every request a different (pre-signed) token: cache misses
 *   peer         express + @modelcontextprotocol/sdk requireBearerAuth with a jose verifier, one token
 *   jose-loop    bare jose.jwtVerify over the distinct tokens, no HTTP (same child process type)
 * With --json the last line is one JSON object.
 */
import { fork } from "node:child_process";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

const RESOURCE = "http://127.0.0.1/api";
const ISSUER = "https://issuer.bench.example";
const PATH = "/api/notes";
const BODY = JSON.stringify({ notes: [{ id: "1", text: "benchmark note" }] });

// ---------------------------------------------------------------- child: one server case

async function child() {
  // The configuration arrives over IPC (the token list is too large for an environment variable).
  const { caseName, jwk, tokens } = await new Promise((resolve) => process.once("message", resolve));
  const jose = await import("jose");
  const { toNodeListener } = await import("../dist/http/node.js");
  const { createResourceServer, cachedVerifier, jwtVerifier } = await import(
    "../dist/resource-server/index.js"
  );

  if (caseName === "jose-loop") {
    const key = await jose.importJWK(jwk, "ES256");
    let i = 0;
    // Each {loop: seconds} message runs ten concurrent verification chains (like ten connections).
    process.on("message", async (m) => {
      if (m === "stop") process.exit(0);
      if (m.inProcess) {
        process.send(
          await inProcessCosts(jose, key, jwk, tokens, createResourceServer, cachedVerifier, jwtVerifier),
        );
        return;
      }
      const deadline = Date.now() + m.loop * 1000;
      const cpuBefore = process.cpuUsage();
      let done = 0;
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          while (Date.now() < deadline) {
            await jose.jwtVerify(tokens[i++ % tokens.length], key, {
              issuer: ISSUER,
              audience: RESOURCE,
              algorithms: ["ES256"],
              typ: "at+jwt",
            });
            done++;
          }
        }),
      );
      const cpu = process.cpuUsage(cpuBefore);
      process.send({
        opsPerSecond: done / m.loop,
        cpuMicrosPerOp: (cpu.user + cpu.system) / Math.max(1, done),
      });
    });
    process.send({ ready: true });
    return;
  }

  let listener;
  if (caseName === "raw") {
    listener = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(BODY);
    };
  } else if (caseName === "unprotected") {
    listener = toNodeListener(
      async () => new Response(BODY, { headers: { "content-type": "application/json" } }),
    );
  } else if (caseName === "warm" || caseName === "distinct") {
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [ISSUER],
      verifier: cachedVerifier(
        jwtVerifier({ issuer: ISSUER, audience: RESOURCE, jwks: { keys: [jwk] }, algorithms: ["ES256"] }),
        { maxEntries: 10_000 },
      ),
    });
    const protectedRoute = gate.requireBearer({ scopes: ["notes:read"] });
    const handler = async () => new Response(BODY, { headers: { "content-type": "application/json" } });
    listener = toNodeListener((request) => protectedRoute(request, handler));
  } else if (caseName === "peer") {
    const express = (await import("express")).default;
    const { requireBearerAuth } = await import(
      "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js"
    );
    const key = await jose.importJWK(jwk, "ES256");
    const verifier = {
      async verifyAccessToken(token) {
        const { payload } = await jose.jwtVerify(token, key, {
          issuer: ISSUER,
          audience: RESOURCE,
          algorithms: ["ES256"],
          typ: "at+jwt",
        });
        return {
          token,
          clientId: String(payload.client_id),
          scopes: String(payload.scope ?? "").split(" "),
          expiresAt: payload.exp,
        };
      },
    };
    const app = express();
    app.get(PATH, requireBearerAuth({ verifier, requiredScopes: ["notes:read"] }), (_req, res) => {
      res.type("application/json").send(BODY);
    });
    listener = app;
  } else {
    throw new Error(`unknown case ${caseName}`);
  }
  const server = createServer(listener);
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
  process.on("message", (m) => {
    if (m === "cpu") {
      const { user, system } = process.cpuUsage();
      process.send({ cpuMicros: user + system });
    }
    if (m === "stop") {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    }
  });
}

/**
 * CPU cost per call without HTTP: the gate on a warm cache, the gate on distinct tokens (cache
 * misses: full JWT verification through Gatehouse), and a bare jose.jwtVerify, on the same tokens.
 */
async function inProcessCosts(jose, key, jwk, tokens, createResourceServer, cachedVerifier, jwtVerifier) {
  const gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [ISSUER],
    verifier: cachedVerifier(jwtVerifier({ issuer: ISSUER, audience: RESOURCE, jwks: { keys: [jwk] } })),
  });
  const protectedRoute = gate.requireBearer({ scopes: ["notes:read"] });
  const response = new Response(BODY);
  const handler = async () => response;
  const requestFor = (token) =>
    new Request(`http://127.0.0.1${PATH}`, {
      headers: { host: "127.0.0.1", authorization: `Bearer ${token}` },
    });
  const cpuPer = async (n, fn) => {
    const before = process.cpuUsage();
    for (let i = 0; i < n; i++) await fn(i);
    const cpu = process.cpuUsage(before);
    return (cpu.user + cpu.system) / n;
  };
  const warmRequest = requestFor(tokens[0]);
  await cpuPer(20_000, () => protectedRoute(warmRequest, handler));
  const gateWarm = await cpuPer(100_000, () => protectedRoute(warmRequest, handler));
  // Distinct tokens: gate and bare jose alternate in chunks (the first pair is warm-up), each
  // token seen once; Request objects are built outside the timed region.
  const chunk = 250;
  let offset = 1;
  let gateSum = 0;
  let joseSum = 0;
  let measured = 0;
  for (let round = 0; offset + 2 * chunk <= tokens.length && round < 9; round++) {
    const requests = tokens.slice(offset, offset + chunk).map(requestFor);
    const gateCost = await cpuPer(chunk, (i) => protectedRoute(requests[i], handler));
    const joseTokens = tokens.slice(offset + chunk, offset + 2 * chunk);
    const joseCost = await cpuPer(chunk, (i) =>
      jose.jwtVerify(joseTokens[i], key, {
        issuer: ISSUER,
        audience: RESOURCE,
        algorithms: ["ES256"],
        typ: "at+jwt",
      }),
    );
    offset += 2 * chunk;
    if (round === 0) continue;
    gateSum += gateCost;
    joseSum += joseCost;
    measured++;
  }
  const gateDistinct = gateSum / measured;
  const joseVerify = joseSum / measured;
  return { gateWarm, gateDistinct, joseVerify };
}

// ---------------------------------------------------------------- parent: orchestration

function startCase(caseName, shared, seconds) {
  const proc = fork(fileURLToPath(import.meta.url), ["--child"], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  proc.send({ caseName, seconds, ...shared });
  return new Promise((resolve, reject) => {
    proc.once("message", (m) => resolve({ proc, ...m }));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      if (code !== 0) reject(new Error(`case ${caseName} exited with ${code}`));
    });
  });
}

async function runAutocannon(autocannon, url, { seconds, connections, headersFor, headers }) {
  const opts = {
    url,
    connections,
    pipelining: 1,
    duration: seconds,
    // A constant header set is sent as-is; only the distinct-token case rebuilds each request.
    headers,
    requests: [
      {
        method: "GET",
        path: PATH,
        ...(headersFor
          ? { setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...headersFor() } }) }
          : {}),
      },
    ],
  };
  const result = await autocannon(opts);
  const non2xx = result.non2xx + result.errors + result.timeouts;
  return {
    requestsPerSecond: Math.round(result.requests.average),
    total: result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    failures: non2xx,
  };
}

function cpuOf(proc) {
  proc.send("cpu");
  return new Promise((resolve) => {
    const onMessage = (m) => {
      if (m && typeof m.cpuMicros === "number") {
        proc.off("message", onMessage);
        resolve(m.cpuMicros);
      }
    };
    proc.on("message", onMessage);
  });
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function parent() {
  const args = process.argv.slice(2);
  const json = args.includes("--json");
  const numberArg = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const seconds = numberArg("--seconds", 5);
  const connections = numberArg("--connections", 10);
  const tokenCount = numberArg("--tokens", 40_000);
  const log = (line) => (json ? process.stderr : process.stdout).write(`${line}\n`);

  const autocannon = (await import("autocannon")).default;
  const jose = await import("jose");
  const { publicKey, privateKey } = await jose.generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: "bench", alg: "ES256" };
  const now = Math.floor(Date.now() / 1000);
  const sign = (i) =>
    new jose.SignJWT({ sub: `user-${i}`, client_id: "bench-client", scope: "notes:read", jti: String(i) })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
      .setIssuer(ISSUER)
      .setAudience(RESOURCE)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(privateKey);
  log(`signing ${tokenCount} distinct tokens...`);
  const tokens = [];
  for (let i = 0; i < tokenCount; i++) tokens.push(await sign(i));
  const warmToken = tokens[0];

  // Every server runs in its own child for the whole run; the cases are measured in interleaved
  // rounds so that load from other processes on the machine hits all cases alike.
  const rounds = numberArg("--rounds", 5);
  const roundSeconds = seconds / rounds;
  const recordedTokens = Math.floor(tokenCount * 0.75);
  let next = 0;
  let warmupNext = recordedTokens;
  const bearer = { authorization: `Bearer ${warmToken}` };
  const cases = {
    // Every case sends the same Authorization header (ignored where unprotected), so the client
    // does the same work in each.
    raw: { child: "raw", headers: bearer },
    unprotected: { child: "unprotected", headers: bearer },
    warm: { child: "warm", headers: bearer },
    distinct: {
      child: "distinct",
      warmupHeaders: () => ({
        authorization: `Bearer ${tokens[recordedTokens + (warmupNext++ % (tokenCount - recordedTokens))]}`,
      }),
      headersFor: () => ({ authorization: `Bearer ${tokens[next++ % recordedTokens]}` }),
    },
    peer: { child: "peer", headers: bearer },
  };
  const servers = {};
  let results;
  let roundRatio;
  try {
    for (const [name, c] of Object.entries(cases)) {
      servers[name] = await startCase(c.child, { jwk, tokens: [] }, seconds);
      const url = `http://127.0.0.1:${servers[name].port}`;
      // Warm-up (JIT, keep-alive sockets, key import), not recorded.
      await runAutocannon(autocannon, url, {
        seconds: 1,
        connections,
        headers: c.headers,
        headersFor: c.warmupHeaders ?? c.headersFor,
      });
    }
    servers.loop = await startCase("jose-loop", { jwk, tokens: tokens.slice(0, 10_000) }, seconds);
    const perRound = Object.fromEntries([...Object.keys(cases), "jose-loop"].map((n) => [n, []]));
    for (let round = 0; round < rounds; round++) {
      for (const [name, c] of Object.entries(cases)) {
        const url = `http://127.0.0.1:${servers[name].port}`;
        const cpuBefore = await cpuOf(servers[name].proc);
        const measured = await runAutocannon(autocannon, url, {
          seconds: roundSeconds,
          connections,
          headers: c.headers,
          headersFor: c.headersFor,
        });
        // Server CPU time per request: far less sensitive to other load on the machine than req/s.
        measured.cpuMicrosPerRequest =
          ((await cpuOf(servers[name].proc)) - cpuBefore) / Math.max(1, measured.total);
        perRound[name].push(measured);
      }
      servers.loop.proc.send({ loop: roundSeconds });
      perRound["jose-loop"].push(await new Promise((resolve) => servers.loop.proc.once("message", resolve)));
      log(
        `round ${round + 1}/${rounds}: ${Object.entries(perRound)
          .map(([n, r]) => `${n} ${Math.round(r.at(-1).requestsPerSecond ?? r.at(-1).opsPerSecond)}`)
          .join(", ")}`,
      );
    }
    results = {};
    for (const name of Object.keys(cases)) {
      const r = perRound[name];
      results[name] = {
        requestsPerSecond: median(r.map((x) => x.requestsPerSecond)),
        p50Ms: median(r.map((x) => x.p50Ms)),
        p99Ms: median(r.map((x) => x.p99Ms)),
        cpuMicrosPerRequest: Math.round(median(r.map((x) => x.cpuMicrosPerRequest)) * 10) / 10,
        failures: r.reduce((a, x) => a + x.failures, 0),
        rounds: r.map((x) => x.requestsPerSecond),
      };
    }
    results["jose-loop"] = {
      opsPerSecond: median(perRound["jose-loop"].map((x) => Math.round(x.opsPerSecond))),
      rounds: perRound["jose-loop"].map((x) => Math.round(x.opsPerSecond)),
      cpuMicrosPerOp: Math.round(median(perRound["jose-loop"].map((x) => x.cpuMicrosPerOp)) * 10) / 10,
    };
    roundRatio = (a, b, key = "requestsPerSecond") =>
      median(
        perRound[a].map((x, i) => x.requestsPerSecond / (perRound[b][i][key] ?? perRound[b][i].opsPerSecond)),
      );
    servers.loop.proc.send({ inProcess: true });
    results.inProcess = await new Promise((resolve) => servers.loop.proc.once("message", resolve));
  } finally {
    for (const s of Object.values(servers)) s.proc.send("stop");
  }
  log("");
  for (const [name, r] of Object.entries(results)) {
    if (name === "inProcess") continue;
    if (r.opsPerSecond !== undefined)
      log(
        `${name.padEnd(12)} ${String(r.opsPerSecond).padStart(7)} verifications/s  CPU ${r.cpuMicrosPerOp} µs/verification`,
      );
    else
      log(
        `${name.padEnd(12)} ${String(r.requestsPerSecond).padStart(7)} req/s  p50 ${r.p50Ms} ms  p99 ${r.p99Ms} ms  server CPU ${r.cpuMicrosPerRequest} µs/req  failures ${r.failures}`,
      );
  }
  const distinctWrapped = next > recordedTokens;
  // Ratios: median over rounds of the ratio within each round (robust to load drifting between rounds).
  const round3 = (x) => Math.round(x * 1000) / 1000;
  const ratios = {
    warmVsUnprotected: round3(roundRatio("warm", "unprotected")),
    warmVsRawNodeHttp: round3(roundRatio("warm", "raw")),
    warmVsPeer: round3(roundRatio("warm", "peer")),
    distinctVsJoseLoop: round3(roundRatio("distinct", "jose-loop", "opsPerSecond")),
    unprotectedVsRawNodeHttp: round3(roundRatio("unprotected", "raw")),
  };
  // The same comparisons by server CPU time per request (b's CPU / a's CPU: a throughput-equivalent
  // ratio that holds up when other processes load the machine).
  const cpu = (name) => results[name].cpuMicrosPerRequest ?? results[name].cpuMicrosPerOp;
  const cpuRatios = {
    warmVsUnprotected: round3(cpu("unprotected") / cpu("warm")),
    warmVsRawNodeHttp: round3(cpu("raw") / cpu("warm")),
    warmVsPeer: round3(cpu("peer") / cpu("warm")),
    distinctVsJoseLoop: round3(cpu("jose-loop") / cpu("distinct")),
  };
  const ip = results.inProcess;
  const inProcessRatios = { distinctVsJoseVerify: round3(ip.joseVerify / ip.gateDistinct) };
  const targets = {
    warmVsUnprotected: ratios.warmVsUnprotected >= 0.95,
    warmVsPeer: ratios.warmVsPeer >= 10,
    distinctVsJoseLoop: ratios.distinctVsJoseLoop >= 0.9,
  };
  log("");
  log("ratio                                 req/s (rounds)   by server CPU   target");
  const line = (label, key, target) =>
    log(
      `${label.padEnd(38)}${String(ratios[key]).padEnd(17)}${String(cpuRatios[key]).padEnd(16)}${
        target === undefined ? "" : `>= ${target}: ${targets[key] ? "met" : "MISSED"}`
      }`,
    );
  line("warm / unprotected (toNodeListener)", "warmVsUnprotected", 0.95);
  line("warm / raw node:http", "warmVsRawNodeHttp");
  line("warm / peer (MCP SDK + express)", "warmVsPeer", 10);
  line("distinct / bare jose verify loop", "distinctVsJoseLoop", 0.9);
  log("");
  log(
    `in-process CPU per request (no HTTP): gate warm ${ip.gateWarm.toFixed(2)} µs; gate distinct ${ip.gateDistinct.toFixed(1)} µs; bare jose.jwtVerify ${ip.joseVerify.toFixed(1)} µs; jose / gate distinct = ${inProcessRatios.distinctVsJoseVerify}`,
  );
  if (distinctWrapped)
    log("note: the distinct-token list wrapped during the run; some requests were cache hits");
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ seconds, rounds, connections, tokens: tokenCount, distinctWrapped, results, ratios, cpuRatios, inProcessRatios, targets })}\n`,
    );
  }
}

if (process.argv.includes("--child")) {
  child().catch((error) => {
    console.error(error);
    process.exit(1);
  });
} else {
  parent().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
