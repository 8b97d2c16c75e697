#!/usr/bin/env node
/**
 * Resource-server benchmark (issues 2 and 11): every resource-server row of issue 11 in one run.
 * Requests/s, p50/p99, server CPU per request and resident memory of each protected route against
 * the same route unprotected, on loopback. Run after `npm run build`:
 *
 *   node bench/resource-server.mjs [--json] [--seconds 15] [--rounds 5] [--connections 10] [--warmup 2]
 *                                  [--warmup-rounds 1] [--tokens 400000] [--dist dist] [--autocannon]
 *                                  [--cases node-warm,hono-warm,...]
 *
 * Method: every server case runs in its own child process for the whole run. When `taskset` exists
 * and there are two cores or more, the server children (and the jose loop) are pinned to core 0 and
 * this process with the load generator to core 1 (BENCH_NO_PIN=1 turns that off). The load
 * generator is wrk when it is installed (`apt-get install wrk`; a Lua script sends the distinct
 * tokens), else autocannon in this process (or with --autocannon). Cases are measured in
 * interleaved rounds (each round gives every case seconds/rounds, whole seconds for wrk, and a
 * different case goes first each round), so load from other processes hits all cases alike; the
 * first --warmup-rounds (default 1) interleaved rounds are run and discarded (round 1 ran lower
 * than the rest for every case, after the per-case warm-ups of --warmup seconds);
 * figures are medians over rounds, ratios are medians of the per-round ratios, by req/s and by
 * server CPU per request (process.cpuUsage of the server child: on a shared machine the steadier
 * figure). The load average is printed with the results, and each case's server busy share (the
 * child's CPU time / wall time): the rows compare servers that are the limit, and a share well
 * below 1 means the child waited for requests or for its core, each request then carrying a wake-up
 * a saturated server shares, the same µs in every case, which pulls every ratio toward 1 (what made
 * bench/web-listener.mjs read ~1.0 for web-warm-text / raw while its node:http client set the rate;
 * it now sends those cases with autocannon, as here, and agrees within the noise). BENCH_CHILD_EXEC_ARGV (e.g.
 * "--cpu-prof --cpu-prof-dir=/tmp/prof") is passed to the server children, for profiles.
 * `--dist` (or BENCH_DIST, as bench/authorization-server.mjs) names the build to measure (default
 * ./dist), so two builds can be compared.
 *
 *   raw            bare node:http route, no gate (the floor)
 *   node-warm      the same node:http route behind nodeRequireBearer, cachedVerifier(jwtVerifier),
 *                  one token (warm cache)
 *   node-distinct  the same server, every request a different pre-signed token (cache misses:
 *                  full ES256 JWT verification per request)
 *   node-distinct-2nd  the same, with the cache's admission "second-use" (a token is remembered
 *                  only when verified a second time): the same distinct tokens never enter it
 *   verify-only    the same node:http route doing only crypto.verify (ES256, ieee-p1363) of each
 *                  request's token signature with the same key (no parsing, no claims), the same
 *                  distinct tokens as node-distinct: the floor any gate pays per distinct token
 *   hand-gate      the same node:http route behind a minimal hand-written gate: synchronous
 *                  crypto.verify, then the header's alg/typ and the claims iss, aud, exp and scope
 *                  checked, no cache; the same distinct tokens (issue 25: node-distinct / hand-gate)
 *   peer           express + @modelcontextprotocol/sdk requireBearerAuth with a jose.jwtVerify
 *                  verifier against the same key, one token
 *   express-unprot the same Express route, no gate
 *   express-warm   the same Express route behind gatehouse/express requireBearerAuth, one token
 *   express-noop   the same Express route behind a middleware that only calls next() (what any
 *                  middleware layer costs)
 *   hono-unprot    a Hono route on @hono/node-server, no gate
 *   hono-warm      the same Hono route behind gatehouse/hono bearerAuth (middleware), one token
 *   hono-noop      the same Hono route behind an async middleware that only awaits next() (what any
 *                  middleware costs)
 *   hono-wrapped   the same Hono route, its handler wrapped by gatehouse/hono withBearerAuth (no
 *                  middleware chain), one token
 *   web-unprot     toNodeListener + web-standard handler, no gate (extra: the web adapter)
 *   web-warm       toNodeListener + requireBearer, one token, the handler answering with
 *                  `new Response(body, { headers })` (what a web-standard handler writes)
 *   web-warm-json  the same, the handler answering with Gatehouse's own completeResponse (what the
 *                  authorization server's JSON and pages are: a body kept as text, its stream never
 *                  made), so the figure is the listener's and the gate's cost, not undici's Response
 *   web-warm-text  the same, the handler answering with gatehouse-auth/node's textResponse (the
 *                  listener writes it without an undici Response, Headers or stream); a build
 *                  without textResponse answers with `new Response` here (the output says so)
 *   jose-loop      bare jose.jwtVerify over distinct tokens, no HTTP, ten concurrent chains, on the
 *                  servers' core
 *
 * Targets (issue 11): node-warm / raw >= 0.95; node-warm / peer >= 10; node-distinct / jose-loop
 * >= 0.9; express-warm / express-unprot >= 0.9; hono-warm / hono-unprot >= 0.9 (and the same for
 * hono-wrapped, the faster form). Issue 25: web-warm / raw >= 0.8 (the web-standard listener, what
 * `gatehouse serve` runs on, with the warm gate), printed beside web-warm-json / raw and
 * hono-unprotected / raw (@hono/node-server's lazy Request and Response, the reference); web-warm-text / raw
 * >= 0.8 (the same with the handler answering textResponse); hono-warm / hono-noop >= 0.95 (the
 * middleware against one that only calls next()); node-distinct / hand-gate >= 1 (issue 25: met,
 * kept), beside node-distinct / verify-only (raw crypto.verify).
 * The jose row compares HTTP requests with bare verifications: every request also pays for
 * node:http itself. The "ceiling" line gives the best ratio a gate costing 0 µs could reach: vs
 * peer from the raw route's CPU; for node-distinct / jose-loop, verify-only / jose-loop as measured
 * (node:http and the bare signature check at the distinct row's rate), and beside it the older
 * estimate, labelled as such: jose's CPU per verification plus the raw route's CPU per request at
 * raw's own (much higher) rate, which assumes a gate pays all of jose's work and node:http costs
 * the same per request at both rates. node-distinct / verify-only is the gate's share of a
 * distinct-token request (1 for a gate that adds nothing to the signature check).
 * The resource is a loopback URI, so every gate checks Host against its allow-list (DNS-rebinding
 * defence); the in-process line gives the warm path with and without that check, and a cold
 * verification through the gate against bare jose. With --json the last line of stdout is one JSON
 * object.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join, resolve as resolvePath } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  ask,
  childReady,
  concurrentLoop,
  helpOrCheckArgs,
  loopSummary,
  median,
  round1,
  round3,
  roundRatio,
} from "./lib.mjs";

const SELF = fileURLToPath(import.meta.url);
const RESOURCE = "http://127.0.0.1/api";
const ISSUER = "https://issuer.bench.example";
const PATH = "/api/notes";
const BODY = JSON.stringify({ notes: [{ id: "1", text: "benchmark note" }] });
const BODY_HEADERS = { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) };
const JOSE_OPTIONS = { issuer: ISSUER, audience: RESOURCE, algorithms: ["ES256"], typ: "at+jwt" };

// ---------------------------------------------------------------- child: one server case

async function child() {
  // The configuration arrives over IPC (the token list is too large for an environment variable).
  const { caseName, jwk, tokens, dist } = await new Promise((resolve) => process.once("message", resolve));
  const fromDist = (path) => import(pathToFileURL(join(dist, path)).href);
  const jose = await import("jose");
  const { toNodeListener, nodeRequireBearer } = await fromDist("http/node.js");
  const { createResourceServer, cachedVerifier, jwtVerifier } = await fromDist("resource-server/index.js");
  // RESOURCE is a loopback URI, so the gate checks Host (DNS-rebinding defence); the server's real
  // port is only known once it listens, hence the explicit list (the same check as the default).
  // `admission`: the cache's rule (cache.ts); "always", its default, unless a case says otherwise.
  const newGate = (host, admission = "always") =>
    createResourceServer({
      resource: RESOURCE,
      authorizationServers: [ISSUER],
      // `false`: the Host/Origin check off, for the in-process comparison only.
      allowedHosts: host === false ? false : [host],
      verifier: cachedVerifier(
        jwtVerifier({ issuer: ISSUER, audience: RESOURCE, jwks: { keys: [jwk] }, algorithms: ["ES256"] }),
        { maxEntries: 10_000, admission },
      ),
    });

  if (caseName === "jose-loop") {
    const key = await jose.importJWK(jwk, "ES256");
    let i = 0;
    process.on("message", async (m) => {
      if (m === "stop") process.exit(0);
      if (m.inProcess) {
        process.send(await inProcessCosts(jose, key, tokens, newGate("127.0.0.1:8080"), newGate(false)));
        return;
      }
      // {loop: seconds}: ten concurrent verification chains (like ten connections), each token once
      // per pass over the list.
      process.send(
        await concurrentLoop(
          m.loop,
          () => tokens[i++ % tokens.length],
          (token) => jose.jwtVerify(token, key, JOSE_OPTIONS),
        ),
      );
    });
    process.send({ ready: true });
    return;
  }

  // The one route every case serves: the same JSON body, the same headers.
  const route = (_req, res) => {
    res.writeHead(200, BODY_HEADERS);
    res.end(BODY);
  };
  // Listening first: the gate's Host allow-list needs the port. No request arrives before the
  // parent hears the port, by then the case's listener is in place.
  const server = createServer();
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = server.address().port;
  const host = `127.0.0.1:${port}`;
  let listener;
  if (caseName === "raw") {
    listener = route;
  } else if (caseName === "node-warm" || caseName === "node-distinct") {
    listener = nodeRequireBearer(newGate(host), { scopes: ["notes:read"] }, route);
  } else if (caseName === "node-distinct-2nd") {
    listener = nodeRequireBearer(newGate(host, "second-use"), { scopes: ["notes:read"] }, route);
  } else if (caseName === "verify-only") {
    // The least a gate does per distinct token: the signature check alone, as jws.ts makes it
    // (RFC 7515 §5.2: the signing input is the token up to its last dot; RFC 7518 §3.4: R || S).
    const { createPublicKey, verify } = await import("node:crypto");
    const key = createPublicKey({ key: jwk, format: "jwk" });
    const signer = { key, dsaEncoding: "ieee-p1363" };
    listener = (req, res) => {
      const authorization = req.headers.authorization ?? "";
      const dot = authorization.lastIndexOf(".");
      const valid =
        dot > 7 &&
        verify(
          "sha256",
          Buffer.from(authorization.slice(7, dot), "ascii"),
          signer,
          Buffer.from(authorization.slice(dot + 1), "base64url"),
        );
      if (!valid) {
        // Counted as a failure by the load generator: the case would not be measuring a check.
        res.writeHead(401, { "content-length": 0 });
        res.end();
        return;
      }
      route(req, res);
    };
  } else if (caseName === "hand-gate") {
    // A minimal gate written by hand for this one key (RFC 9068 access tokens): no cache, no key
    // lookup, synchronous crypto.verify, then the checks any gate must make (RFC 9068 §4: typ, iss,
    // aud, exp; the scope the route needs), the failures answered 401 without a body.
    const { createPublicKey, verify } = await import("node:crypto");
    const key = createPublicKey({ key: jwk, format: "jwk" });
    const signer = { key, dsaEncoding: "ieee-p1363" };
    const decode = (part) => JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
    const check = (authorization) => {
      if (!authorization?.startsWith("Bearer ")) return false;
      const token = authorization.slice(7);
      const first = token.indexOf(".");
      const last = token.lastIndexOf(".");
      if (first < 1 || last <= first) return false;
      const valid = verify(
        "sha256",
        Buffer.from(token.slice(0, last), "ascii"),
        signer,
        Buffer.from(token.slice(last + 1), "base64url"),
      );
      if (!valid) return false;
      const header = decode(token.slice(0, first));
      if (header.alg !== "ES256" || header.typ !== "at+jwt") return false;
      const claims = decode(token.slice(first + 1, last));
      const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
      return (
        claims.iss === ISSUER &&
        audience.includes(RESOURCE) &&
        typeof claims.exp === "number" &&
        claims.exp > Date.now() / 1000 &&
        typeof claims.scope === "string" &&
        claims.scope.split(" ").includes("notes:read")
      );
    };
    listener = (req, res) => {
      let ok = false;
      try {
        ok = check(req.headers.authorization);
      } catch {
        ok = false;
      }
      if (!ok) {
        res.writeHead(401, { "content-length": 0 });
        res.end();
        return;
      }
      route(req, res);
    };
  } else if (caseName === "web-unprotected") {
    listener = toNodeListener(async () => new Response(BODY, { headers: BODY_HEADERS }));
  } else if (caseName === "web-warm") {
    const protectedRoute = newGate(host).requireBearer({ scopes: ["notes:read"] });
    const handler = async () => new Response(BODY, { headers: BODY_HEADERS });
    listener = toNodeListener((request) => protectedRoute(request, handler));
  } else if (caseName === "web-warm-json") {
    // The body text is built once, as the raw route's is: the handler's own work stays out of it.
    const { completeResponse } = await fromDist("shared/http.js");
    const protectedRoute = newGate(host).requireBearer({ scopes: ["notes:read"] });
    const handler = async () => completeResponse(BODY, { headers: { "content-type": "application/json" } });
    listener = toNodeListener((request) => protectedRoute(request, handler));
  } else if (caseName === "web-warm-text") {
    // gatehouse-auth/node's textResponse where the build has it (the fallback is announced).
    const { textResponse } = await fromDist("http/node.js");
    if (textResponse === undefined)
      console.error(`web-warm-text: no textResponse in ${dist}, new Response instead`);
    const build = textResponse ?? ((text, init) => new Response(text, init));
    const protectedRoute = newGate(host).requireBearer({ scopes: ["notes:read"] });
    const handler = async () => build(BODY, { headers: { "content-type": "application/json" } });
    listener = toNodeListener((request) => protectedRoute(request, handler));
  } else if (caseName.startsWith("express-")) {
    const express = (await import("express")).default;
    const app = express();
    const send = (_req, res) => res.type("application/json").send(BODY);
    if (caseName === "express-warm") {
      const { requireBearerAuth } = await fromDist("http/express.js");
      app.get(PATH, requireBearerAuth(newGate(host), { scopes: ["notes:read"] }), send);
    } else if (caseName === "express-noop") {
      // The least any Express middleware costs: one more layer that calls next().
      app.get(PATH, (_req, _res, next) => next(), send);
    } else {
      app.get(PATH, send);
    }
    listener = app;
  } else if (caseName.startsWith("hono-")) {
    const { Hono } = await import("hono");
    const { getRequestListener } = await import("@hono/node-server");
    const app = new Hono();
    const send = (c) => c.body(BODY, 200, { "content-type": "application/json" });
    if (caseName === "hono-warm") {
      const { bearerAuth } = await fromDist("http/hono.js");
      app.get(PATH, bearerAuth(newGate(host), { scopes: ["notes:read"] }), send);
    } else if (caseName === "hono-wrapped") {
      // The route's one handler wrapped by the gate: Hono skips its middleware chain.
      const { withBearerAuth } = await fromDist("http/hono.js");
      app.get(PATH, withBearerAuth(newGate(host), { scopes: ["notes:read"] }, send));
    } else if (caseName === "hono-noop") {
      // The least any Hono middleware costs (issue 25's row): async, only awaits next().
      const noop = async (_c, next) => {
        await next();
      };
      app.get(PATH, noop, send);
    } else {
      app.get(PATH, send);
    }
    listener = getRequestListener(app.fetch);
  } else if (caseName === "peer") {
    const express = (await import("express")).default;
    const { requireBearerAuth } = await import(
      "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js"
    );
    const key = await jose.importJWK(jwk, "ES256");
    const verifier = {
      async verifyAccessToken(token) {
        const { payload } = await jose.jwtVerify(token, key, JOSE_OPTIONS);
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
  server.on("request", listener);
  process.send({ port });
  process.on("message", (m) => {
    if (m === "cpu") {
      const { user, system } = process.cpuUsage();
      process.send({ cpuMicros: user + system, rss: process.memoryUsage.rss() });
    }
    if (m === "stop") {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    }
  });
}

/**
 * CPU cost per call without HTTP: the gate (judge, as nodeRequireBearer calls it) on a
 * warm cache and on distinct tokens (cache misses: full verification through Gatehouse), against
 * bare jose.jwtVerify on the same kind of tokens, in alternating chunks.
 */
async function inProcessCosts(jose, key, tokens, gate, gateWithoutHostCheck) {
  const check = gate.judge({ scopes: ["notes:read"] });
  const checkWithoutHost = gateWithoutHostCheck.judge({ scopes: ["notes:read"] });
  const headFor = (token) => {
    const authorization = `Bearer ${token}`;
    return {
      url: PATH,
      host: "127.0.0.1:8080",
      header: (name) => (name === "authorization" ? authorization : null),
      hasBody: false,
      bodyText: async () => "",
    };
  };
  const cpuPer = async (n, fn) => {
    const before = process.cpuUsage();
    for (let i = 0; i < n; i++) await fn(i);
    const cpu = process.cpuUsage(before);
    return (cpu.user + cpu.system) / n;
  };
  const warmHead = headFor(tokens[0]);
  await cpuPer(20_000, () => check(warmHead));
  await cpuPer(20_000, () => checkWithoutHost(warmHead));
  // The Host/Origin check's share of the warm path: the same head through both gates, alternating.
  const withHost = [];
  const withoutHost = [];
  for (let i = 0; i < 5; i++) {
    withHost.push(await cpuPer(40_000, () => check(warmHead)));
    withoutHost.push(await cpuPer(40_000, () => checkWithoutHost(warmHead)));
  }
  const middle = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const gateWarm = middle(withHost);
  const gateWarmWithoutHostCheck = middle(withoutHost);
  const chunk = 250;
  let offset = 1;
  let gateSum = 0;
  let joseSum = 0;
  let measured = 0;
  for (let round = 0; offset + 2 * chunk <= tokens.length && round < 9; round++) {
    const heads = tokens.slice(offset, offset + chunk).map(headFor);
    const gateCost = await cpuPer(chunk, async (i) => {
      if (!(await check(heads[i])).ok) throw new Error("bench token refused");
    });
    const joseTokens = tokens.slice(offset + chunk, offset + 2 * chunk);
    const joseCost = await cpuPer(chunk, (i) => jose.jwtVerify(joseTokens[i], key, JOSE_OPTIONS));
    offset += 2 * chunk;
    if (round === 0) continue; // warm-up pair
    gateSum += gateCost;
    joseSum += joseCost;
    measured++;
  }
  return {
    gateWarm,
    gateWarmWithoutHostCheck,
    gateDistinct: gateSum / measured,
    joseVerify: joseSum / measured,
  };
}

// ---------------------------------------------------------------- parent: orchestration

/**
 * Core 0 for the servers, core 1 for this process (and wrk), when `taskset` is there and there are
 * two cores or more; otherwise nothing is pinned (and the output says so).
 */
function pinning() {
  if (process.env.BENCH_NO_PIN || availableParallelism() < 2) return undefined;
  try {
    execFileSync("taskset", ["-a", "-cp", "1", String(process.pid)], { stdio: "ignore" });
    return { server: "0", loadGenerator: "1" };
  } catch {
    return undefined;
  }
}

/** wrk's path when it is installed and wanted, else undefined (autocannon then). */
function findWrk(wanted) {
  if (!wanted) return undefined;
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" });
  } catch (error) {
    // `wrk --version` prints its version and exits 1; only a missing binary is ENOENT.
    if (error.code === "ENOENT") return undefined;
  }
  return "wrk";
}

function startCase(caseName, shared, pin) {
  const execArgv = process.env.BENCH_CHILD_EXEC_ARGV ? process.env.BENCH_CHILD_EXEC_ARGV.split(" ") : [];
  const args = [...execArgv, SELF, "--child"];
  const proc = pin
    ? spawn("taskset", ["-c", pin.server, process.execPath, ...args], {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      })
    : spawn(process.execPath, args, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return childReady(proc, { caseName, ...shared }, `case ${caseName}`);
}

async function runAutocannon(autocannon, url, { seconds, connections, headersFor, headers }) {
  const result = await autocannon({
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
  });
  return {
    requestsPerSecond: result.requests.average,
    total: result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    failures: result.non2xx + result.errors + result.timeouts,
  };
}

/** wrk's Lua script for distinct tokens: `tokenFile first count` as script arguments. */
const WRK_DISTINCT_LUA = `
local tokens = {}
local next_index = 1
function init(args)
  local first, count = tonumber(args[2]), tonumber(args[3])
  local i = 0
  for line in io.lines(args[1]) do
    if i >= first and i < first + count then tokens[#tokens + 1] = "Bearer " .. line end
    i = i + 1
  end
end
function request()
  local value = tokens[next_index]
  next_index = next_index % #tokens + 1
  return wrk.format(nil, nil, { Authorization = value })
end
`;

const WRK_UNITS = { us: 1e-3, ms: 1, s: 1000 };
function wrkMs(text, label) {
  const m = new RegExp(`\\s${label}%\\s+([\\d.]+)(us|ms|s)`).exec(text);
  return m ? Math.round(Number(m[1]) * WRK_UNITS[m[2]] * 1000) / 1000 : Number.NaN;
}

/** One wrk run on the load generator's core; `distinct` = {file, first, count} for the Lua script. */
function runWrk(url, { seconds, connections, headers, distinct, pin, script }) {
  const args = ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency"];
  for (const [name, value] of Object.entries(headers ?? {})) args.push("-H", `${name}: ${value}`);
  if (distinct) args.push("-s", script);
  args.push(`${url}${PATH}`);
  if (distinct) args.push("--", distinct.file, String(distinct.first), String(distinct.count));
  const [command, fullArgs] = pin ? ["taskset", ["-c", pin.loadGenerator, "wrk", ...args]] : ["wrk", args];
  return new Promise((resolve, reject) => {
    const proc = spawn(command, fullArgs, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout.on("data", (chunk) => {
      out += chunk;
    });
    proc.once("error", reject);
    proc.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`wrk exited with ${code}: ${out}`));
      const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? Number.NaN);
      const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
      const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      resolve({
        requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN),
        total,
        p50Ms: wrkMs(out, "50"),
        p99Ms: wrkMs(out, "99"),
        failures: non2xx + (socketErrors ? socketErrors.slice(1).reduce((a, x) => a + Number(x), 0) : 0),
      });
    });
  });
}

/** The child's CPU time and RSS now. */
const sample = (proc) => ask(proc, "cpu", (m) => m && typeof m.cpuMicros === "number");
/** A figure with `digits` decimals; "n/a" for one not measured (too few --tokens: it arrives as null). */
const fixed = (x, digits) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "n/a");
const loadAverage = () => loadavg().map((x) => Math.round(x * 100) / 100);

const USAGE = `Usage: node bench/resource-server.mjs [--json] [--seconds 15] [--rounds 5] [--connections 10] [--warmup 2]
                                     [--warmup-rounds 1] [--tokens 400000] [--dist dist] [--autocannon]
                                     [--cases node-warm,hono-warm,...]

Every resource-server row of issue 11 in one run: servers pinned to core 0, the load generator (wrk
when installed, else autocannon) on core 1; medians of per-round ratios by req/s and server CPU.
Run after npm run build. BENCH_DIST=<build> (or --dist) measures another build.
Cases (--cases; raw and the jose loop always run): node-warm, node-distinct, node-distinct-2nd,
verify-only, hand-gate, peer, express-unprotected, express-warm, express-noop, hono-unprotected, hono-warm,
hono-noop, hono-wrapped, web-unprotected, web-warm, web-warm-json, web-warm-text (the header comment of
bench/resource-server.mjs describes each).
`;
async function parent() {
  const args = process.argv.slice(2);
  const valueOptions = [
    "--seconds",
    "--rounds",
    "--connections",
    "--tokens",
    "--warmup",
    "--warmup-rounds",
    "--dist",
    "--cases",
  ];
  if (helpOrCheckArgs(args, { valueOptions, flagOptions: ["--json", "--autocannon"], usage: USAGE })) return;
  const json = args.includes("--json");
  const argValue = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const numberArg = (name, fallback) => Number(argValue(name) ?? fallback);
  const seconds = numberArg("--seconds", 15);
  const rounds = numberArg("--rounds", 5);
  const connections = numberArg("--connections", 10);
  const tokenCount = numberArg("--tokens", 400_000);
  const warmupSeconds = numberArg("--warmup", 2);
  const warmupRounds = numberArg("--warmup-rounds", 1);
  const dist = resolvePath(argValue("--dist") ?? process.env.BENCH_DIST ?? join(SELF, "..", "..", "dist"));
  const log = (line) => (json ? process.stderr : process.stdout).write(`${line}\n`);

  const pin = pinning();
  const wrk = findWrk(!args.includes("--autocannon"));
  const generator = wrk ? "wrk" : "autocannon";
  const autocannon = wrk ? undefined : (await import("autocannon")).default;
  const loadBefore = loadAverage();
  log(
    `load average ${loadBefore.join(" ")}; ${pin ? "servers pinned to core 0, load generator to core 1" : "not pinned"}; ${generator}; build ${dist}`,
  );
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
  const scratch = mkdtempSync(join(tmpdir(), "gatehouse-rs-bench-"));
  const tokenFile = join(scratch, "tokens.txt");
  const script = join(scratch, "distinct.lua");
  writeFileSync(tokenFile, `${tokens.join("\n")}\n`);
  writeFileSync(script, WRK_DISTINCT_LUA);

  // wrk takes whole seconds.
  const roundSeconds = wrk ? Math.max(1, Math.round(seconds / rounds)) : seconds / rounds;
  // The recorded distinct-token requests use the first 3/4 of the list (each round its own slice);
  // warm-up the rest, so no recorded request hits the cache (unless the list wraps: reported).
  const recordedTokens = Math.floor(tokenCount * 0.75);
  const perRoundTokens = Math.floor((recordedTokens - 1) / rounds);
  /** Whether a caching distinct case sent a token twice in a recorded round (see the warning). */
  let distinctWrapped = false;
  /**
   * A case sending distinct tokens: each round its own slice of the recorded tokens, the warm-ups
   * from the rest; every distinct case has its own counters and so sends the same slices. A case
   * whose server `caches` reports the list wrapping (its repeats may be cache hits).
   */
  const distinctCase = (caches) => {
    let next = 1;
    let warmupNext = recordedTokens;
    let round = 0;
    return {
      warmupHeaders: () => ({
        authorization: `Bearer ${tokens[recordedTokens + (warmupNext++ % (tokenCount - recordedTokens))]}`,
      }),
      headersFor: () => {
        if (caches && next >= recordedTokens) distinctWrapped = true;
        return { authorization: `Bearer ${tokens[next++ % recordedTokens]}` };
      },
      distinct: (warmup) =>
        warmup
          ? { file: tokenFile, first: recordedTokens, count: tokenCount - recordedTokens }
          : { file: tokenFile, first: 1 + perRoundTokens * round++, count: perRoundTokens },
    };
  };
  const bearer = { authorization: `Bearer ${warmToken}` };
  // Every case sends an Authorization header of the same size (ignored where unprotected), so the
  // client does the same work in each.
  const allCases = {
    raw: { headers: bearer },
    "node-warm": { headers: bearer },
    "node-distinct": distinctCase(true),
    "node-distinct-2nd": distinctCase(true),
    // verify-only caches nothing: the same slices as node-distinct, its floor.
    "verify-only": distinctCase(false),
    // The hand-written gate caches nothing either: the same slices.
    "hand-gate": distinctCase(false),
    peer: { headers: bearer },
    "express-unprotected": { headers: bearer },
    "express-warm": { headers: bearer },
    "express-noop": { headers: bearer },
    "hono-unprotected": { headers: bearer },
    "hono-warm": { headers: bearer },
    "hono-noop": { headers: bearer },
    "hono-wrapped": { headers: bearer },
    "web-unprotected": { headers: bearer },
    "web-warm": { headers: bearer },
    "web-warm-json": { headers: bearer },
    "web-warm-text": { headers: bearer },
  };
  // --cases a,b: only those (raw always, as the floor), for a quick look at one row.
  const only = argValue("--cases")?.split(",");
  const cases = Object.fromEntries(
    Object.entries(allCases).filter(([name]) => !only || name === "raw" || only.includes(name)),
  );
  const measure = async (name, c, secs, warmup) => {
    const url = `http://127.0.0.1:${servers[name].port}`;
    if (wrk) {
      const distinct = c.distinct?.(warmup);
      const result = await runWrk(url, {
        seconds: Math.max(1, Math.round(secs)),
        connections,
        headers: c.headers,
        distinct,
        pin,
        script,
      });
      // wrk cycles through its slice: more requests than tokens means some were cache hits (only
      // the gates cache; verify-only checks every request whatever it repeats).
      if (name.startsWith("node-distinct") && !warmup && result.total > distinct.count)
        distinctWrapped = true;
      return result;
    }
    return runAutocannon(autocannon, url, {
      seconds: secs,
      connections,
      headers: c.headers,
      headersFor: warmup ? (c.warmupHeaders ?? c.headersFor) : c.headersFor,
    });
  };
  const servers = {};
  const perRound = Object.fromEntries([...Object.keys(cases), "jose-loop"].map((n) => [n, []]));
  const rss = {};
  let inProcess;
  try {
    for (const [name, c] of Object.entries(cases)) {
      servers[name] = await startCase(name, { jwk, tokens: [], dist }, pin);
      // Warm-up (JIT, keep-alive sockets, key import), not recorded: under load the JIT needs a few
      // seconds before node:http reaches its steady cost.
      await measure(name, c, warmupSeconds, true);
    }
    servers["jose-loop"] = await startCase(
      "jose-loop",
      { jwk, tokens: tokens.slice(recordedTokens), dist },
      pin,
    );
    servers["jose-loop"].proc.send({ loop: 0.5 });
    await new Promise((resolve) => servers["jose-loop"].proc.once("message", resolve));

    const order = Object.entries(cases);
    // Discarded warm-up rounds (--warmup-rounds, default 1): the first interleaved round ran lower
    // than the others for every case (the machine settling after the sequential warm-ups), so it is
    // run and thrown away rather than counted.
    for (let round = -warmupRounds; round < rounds; round++) {
      const recorded = round >= 0;
      // A different case goes first each round, so no case always follows the same neighbour.
      const first = (round + warmupRounds) % order.length;
      for (const [name, c] of [...order.slice(first), ...order.slice(0, first)]) {
        const before = await sample(servers[name].proc);
        const start = performance.now();
        // A warm-up round sends the warm-up tokens (the recorded distinct tokens stay uncached).
        const measured = await measure(name, c, roundSeconds, !recorded);
        const wallSeconds = (performance.now() - start) / 1000;
        const after = await sample(servers[name].proc);
        measured.cpuMicrosPerRequest = (after.cpuMicros - before.cpuMicros) / Math.max(1, measured.total);
        // The share of one core the server child used (see the note printed with the results).
        measured.serverBusy = (after.cpuMicros - before.cpuMicros) / 1e6 / wallSeconds;
        rss[name] = Math.max(rss[name] ?? 0, after.rss);
        if (recorded) perRound[name].push(measured);
      }
      servers["jose-loop"].proc.send({ loop: roundSeconds });
      const loop = await new Promise((resolve) => servers["jose-loop"].proc.once("message", resolve));
      if (!recorded) {
        log(`warm-up round (discarded): ${order.map(([n]) => n).join(", ")} and jose-loop ran`);
        continue;
      }
      perRound["jose-loop"].push(loop);
      log(
        `round ${round + 1}/${rounds}: ${Object.entries(perRound)
          .map(([n, r]) => `${n} ${Math.round(r.at(-1).requestsPerSecond ?? r.at(-1).opsPerSecond)}`)
          .join(", ")}`,
      );
    }
    servers["jose-loop"].proc.send({ inProcess: true });
    inProcess = await new Promise((resolve) => servers["jose-loop"].proc.once("message", resolve));
  } finally {
    for (const s of Object.values(servers)) s.proc.send("stop");
    rmSync(scratch, { recursive: true, force: true });
  }
  const loadAfter = loadAverage();

  const results = {};
  for (const name of Object.keys(cases)) {
    const r = perRound[name];
    results[name] = {
      requestsPerSecond: Math.round(median(r.map((x) => x.requestsPerSecond))),
      p50Ms: round3(median(r.map((x) => x.p50Ms))),
      p99Ms: round3(median(r.map((x) => x.p99Ms))),
      cpuMicrosPerRequest: round1(median(r.map((x) => x.cpuMicrosPerRequest))),
      serverBusy: round3(median(r.map((x) => x.serverBusy))),
      rssMB: Math.round(rss[name] / 2 ** 20),
      failures: r.reduce((a, x) => a + x.failures, 0),
      rounds: r.map((x) => Math.round(x.requestsPerSecond)),
    };
  }
  results["jose-loop"] = loopSummary(perRound["jose-loop"]);
  const cpuOf = (name, i) => perRound[name][i].cpuMicrosPerRequest ?? perRound[name][i].cpuMicrosPerOp;
  // Throughput-equivalent ratio by CPU, per round then the median: b's CPU per request / a's (how
  // many of a per CPU-second of b).
  const cpuRatio = (a, b) => round3(median(perRound[a].map((_, i) => cpuOf(b, i) / cpuOf(a, i))));
  const comparisons = [
    ["warmVsRawNodeHttp", "node-warm / raw node:http", "node-warm", "raw", 0.95],
    ["warmVsPeer", "node-warm / peer (MCP SDK + express)", "node-warm", "peer", 10],
    ["distinctVsJoseLoop", "node-distinct / bare jose verify loop", "node-distinct", "jose-loop", 0.9],
    // The gate's share of a distinct-token request, and the best any gate could do over HTTP.
    ["distinctVsVerifyOnly", "node-distinct / verify-only floor", "node-distinct", "verify-only"],
    // Issue 25: against a minimal hand-written gate over the same HTTP (met there; kept).
    ["distinctVsHandGate", "node-distinct / hand-written gate", "node-distinct", "hand-gate", 1],
    [
      "distinct2ndVsJoseLoop",
      "node-distinct-2nd / bare jose verify loop",
      "node-distinct-2nd",
      "jose-loop",
      0.9,
    ],
    ["distinct2ndVsVerifyOnly", "node-distinct-2nd / verify-only floor", "node-distinct-2nd", "verify-only"],
    ["verifyOnlyVsJoseLoop", "verify-only / bare jose verify loop", "verify-only", "jose-loop"],
    [
      "expressWarmVsUnprotected",
      "express-warm / express-unprotected",
      "express-warm",
      "express-unprotected",
      0.9,
    ],
    ["expressWarmVsNoopMiddleware", "express-warm / express-noop middleware", "express-warm", "express-noop"],
    ["honoWarmVsUnprotected", "hono-warm / hono-unprotected", "hono-warm", "hono-unprotected", 0.9],
    // Issue 25 (restated): the middleware against a middleware that only calls next().
    ["honoWarmVsNoopMiddleware", "hono-warm / hono-noop middleware", "hono-warm", "hono-noop", 0.95],
    ["honoWrappedVsUnprotected", "hono-wrapped / hono-unprotected", "hono-wrapped", "hono-unprotected", 0.9],
    ["webWarmVsWebUnprotected", "web-warm / web-unprotected", "web-warm", "web-unprotected"],
    ["webUnprotectedVsRawNodeHttp", "web-unprotected / raw node:http", "web-unprotected", "raw"],
    // Issue 25: the web-standard listener (what gatehouse serve runs on) with the warm gate.
    ["webWarmVsRawNodeHttp", "web-warm / raw node:http", "web-warm", "raw", 0.8],
    ["webWarmJsonVsRawNodeHttp", "web-warm-json / raw node:http", "web-warm-json", "raw", 0.8],
    ["webWarmTextVsRawNodeHttp", "web-warm-text / raw node:http", "web-warm-text", "raw", 0.8],
    // The reference: @hono/node-server's lazy Request and Response, no gate.
    ["honoUnprotectedVsRawNodeHttp", "hono-unprotected / raw node:http", "hono-unprotected", "raw"],
  ];
  const ratios = {};
  const cpuRatios = {};
  const targets = {};
  for (const [key, , a, b, target] of comparisons) {
    if (!perRound[a] || !perRound[b]) continue;
    ratios[key] = roundRatio(perRound, a, b);
    cpuRatios[key] = cpuRatio(a, b);
    if (target !== undefined)
      targets[key] = { target, met: ratios[key] >= target, metByCpu: cpuRatios[key] >= target };
  }
  // What the HTTP floor allows: the best ratio a gate costing 0 µs could reach, by CPU.
  const cpu = (name) => results[name].cpuMicrosPerRequest ?? results[name].cpuMicrosPerOp;
  const rawCpu = cpu("raw");
  const ceilings = {
    warmVsPeer: results.peer ? round3(cpu("peer") / rawCpu) : undefined,
    // Measured (verify-only / jose-loop): node:http and the signature check at the distinct rate.
    distinctVsJoseLoopMeasured: results["verify-only"]
      ? { byRate: ratios.verifyOnlyVsJoseLoop, byCpu: cpuRatios.verifyOnlyVsJoseLoop }
      : undefined,
    // Estimated: the raw route's CPU per request (at raw's rate) added to a jose verification.
    distinctVsJoseLoopRawEstimate: round3(cpu("jose-loop") / (cpu("jose-loop") + rawCpu)),
  };
  const inProcessRatios = {
    gateDistinctVsJoseVerify: round3(inProcess.joseVerify / inProcess.gateDistinct),
  };

  log("");
  log(`load average before ${loadBefore.join(" ")}, after ${loadAfter.join(" ")} (1, 5, 15 min)`);
  log("case                   req/s   p50 ms  p99 ms  server CPU µs/req  RSS MB  failures");
  for (const [name, r] of Object.entries(results)) {
    if (r.opsPerSecond !== undefined) {
      log(
        `${name.padEnd(21)}${String(r.opsPerSecond).padStart(7)}  (verifications/s, no HTTP)   ${String(r.cpuMicrosPerOp).padStart(6)} µs/verify`,
      );
    } else {
      log(
        `${name.padEnd(21)}${String(r.requestsPerSecond).padStart(7)}  ${String(r.p50Ms).padStart(6)}  ${String(r.p99Ms).padStart(6)}  ${String(r.cpuMicrosPerRequest).padStart(17)}  ${String(r.rssMB).padStart(6)}  ${r.failures}`,
      );
    }
  }
  log(
    `server busy (its CPU time / wall time, 1 = one core), medians: ${Object.entries(results)
      .filter(([, r]) => r.serverBusy !== undefined)
      .map(([name, r]) => `${name} ${r.serverBusy}`)
      .join(", ")}`,
  );
  if (Object.values(results).some((r) => r.serverBusy < 0.9))
    log(
      "note: below 0.9 the server waited for requests (the load generator set the rate) or for its core (other load): each request's CPU then includes wake-ups a saturated server shares, and the ratios lean toward 1",
    );
  log("");
  log("ratio                                     by req/s  by CPU   target   met (req/s, CPU)");
  for (const [key, label, , , target] of comparisons) {
    if (ratios[key] === undefined) continue;
    log(
      `${label.padEnd(42)}${String(ratios[key]).padEnd(10)}${String(cpuRatios[key]).padEnd(9)}${
        target === undefined
          ? ""
          : `>= ${String(target).padEnd(5)} ${targets[key].met ? "yes" : "NO"}, ${targets[key].metByCpu ? "yes" : "NO"}`
      }`,
    );
  }
  log("");
  const measuredCeiling = ceilings.distinctVsJoseLoopMeasured;
  log(
    `ceiling for a 0 µs gate on node:http: ${ceilings.warmVsPeer === undefined ? "" : `vs peer ${ceilings.warmVsPeer}× (by CPU, from raw); `}node-distinct / jose loop ${
      measuredCeiling
        ? `${measuredCeiling.byRate} by req/s, ${measuredCeiling.byCpu} by CPU (measured: verify-only / jose loop)`
        : "not measured (needs the verify-only case)"
    }, estimate ${ceilings.distinctVsJoseLoopRawEstimate} by CPU (jose's CPU + raw's CPU at raw's rate)`,
  );
  log(
    `in-process CPU (no HTTP): gate warm ${fixed(inProcess.gateWarm, 2)} µs (${fixed(inProcess.gateWarmWithoutHostCheck, 2)} µs without the Host check); gate distinct ${fixed(inProcess.gateDistinct, 1)} µs; bare jose.jwtVerify ${fixed(inProcess.joseVerify, 1)} µs; jose / gate distinct = ${inProcessRatios.gateDistinctVsJoseVerify}`,
  );
  if (distinctWrapped)
    log(
      `WARNING: node-distinct's token slice wrapped during a round (${perRoundTokens} tokens a round): some of its requests were cache hits, its figures are not all-miss; rerun with a larger --tokens`,
    );
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ seconds, rounds, warmupRounds, connections, tokens: tokenCount, generator, pinned: pin !== undefined, loadAverage: { before: loadBefore, after: loadAfter }, distinctWrapped, results, ratios, cpuRatios, targets, ceilings, inProcess, inProcessRatios })}\n`,
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
