#!/usr/bin/env node
/**
 * Web listener benchmark: the server CPU per request that `toNodeListener` (IncomingMessage → web
 * Request, web Response → ServerResponse) costs for what an authorization server sees, in the
 * build under test against a baseline build, in one run:
 *
 * - "form-json": POST of a ~250-byte form with Content-Length, read through `request.body`'s reader
 *   (as the authorization server's readForm does), answered by a ~700-byte JSON body built with the
 *   build's own `jsonResponse` and the no-store headers (a token response);
 * - "redirect": GET with a Cookie header answered 303 with the pages' security headers, a Location
 *   and two Set-Cookie fields, no body (a silent /authorize);
 * - "html": GET answered 200 with a ~3 KB HTML page and the security headers (a login page), built
 *   with `new Response(text)` as the authorization server's pages are today;
 * - "html-complete": the same page built with the build's `completeResponse` (shared/http.ts) where
 *   it has one (a build without it falls back to `new Response(text)`);
 * - "html-text": the same page built with the build's `textResponse` (gatehouse-auth/node) where it
 *   has one (else `new Response(text)`, announced on stderr);
 * - "rs-warm", "rs-warm-json", "rs-warm-text": issue 25's web-standard listener row, a GET with a
 *   bearer token through the build's resource-server gate (`requireBearer`, `cachedVerifier` warm,
 *   one token, Host allow-list) answered with a ~60-byte JSON body built with `new Response`, with
 *   `completeResponse`, and with `textResponse` (else `new Response`, announced);
 * - "raw": the same GET answered by a bare node:http route, no gate (the floor: the same in both
 *   builds; the rs rows' ratio to it is what bench/resource-server.mjs reports as web-warm / raw);
 * - "node-warm": the bare route behind the build's `nodeRequireBearer` (warm gate, no web objects),
 *   issue 25's nodeRequireBearer row against raw.
 *
 * One child process (pinned to core 0 with `taskset` when there are two cores) serves every case for
 * both builds on loopback; this process (core 1) sends the requests over keep-alive connections:
 * with node:http's client for the authorization-server cases, and with autocannon (10 connections,
 * as bench/resource-server.mjs) for raw, rs-* and node-warm. node:http's client set the rate
 * (4,200-9,900 req/s in runs here, raw and rs-warm-text alike, the child busy 0.2-0.5 of a core):
 * each request then paid a wake-up of the idle server (raw 41-49 µs against 17-23 µs with
 * autocannon), the same µs in every case, and raw/rs-warm-text by CPU read 0.9-1.0 where autocannon
 * on the same child gives 0.67-0.79, as bench/resource-server.mjs does (`--generator node` measures
 * the old way). Issue 25's rows against raw are about a server that is the limit: see the busy
 * share printed with the figures.
 * Each round measures every case × build once, the build order alternating per round, and the
 * child's process.cpuUsage() (user + system) is read before and after each; the summary is the median
 * over rounds of the CPU µs per request and of the per-round ratio build/baseline (< 1 is cheaper).
 * The handler's own work (parsing the form, JSON.stringify) is in both figures alike.
 *
 *   node bench/web-listener.mjs [--requests 4000] [--rounds 5] [--concurrency 8] [--cases a,b]
 *                               [--connections 10] [--seconds 2] [--generator autocannon|node]
 *                               [--dist build] [--base build] [--json]
 *
 * --dist (or BENCH_DIST; default dist/) is the build under test, --base (or BENCH_BASE; default
 * .cache/dist-base) the baseline; both must be builds of this checkout.
 */
import { execFileSync, spawn } from "node:child_process";
import { Agent, request as httpRequest } from "node:http";
import { availableParallelism, loadavg } from "node:os";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { helpOrCheckArgs, median, round1, round3 } from "./lib.mjs";

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** `--name value` from the command line (the server child gets the builds from the environment). */
const flag = (name) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : resolvePath(process.argv[i + 1]);
};
const BUILDS = {
  candidate: flag("--dist") ?? process.env.BENCH_DIST ?? `${ROOT}dist`,
  base: flag("--base") ?? process.env.BENCH_BASE ?? `${ROOT}.cache/dist-base`,
};
const ALL_CASES = [
  "form-json",
  "redirect",
  "html",
  "html-complete",
  "html-text",
  "raw",
  "rs-warm",
  "rs-warm-json",
  "rs-warm-text",
  "node-warm",
];
const DEFAULT_CASES = ["form-json", "redirect", "html", "html-complete"];
let CASES = DEFAULT_CASES;

const USAGE = `usage: node bench/web-listener.mjs [--requests N] [--rounds N] [--concurrency N] [--cases a,b]
                                [--connections N] [--seconds N] [--generator autocannon|node]
                                [--dist build] [--base build] [--json]

Server CPU per request of toNodeListener for a form POST -> JSON, a GET -> 303 with Set-Cookie and a
GET -> HTML page (built with new Response, and with completeResponse where the build has it), the
build under test (--dist or BENCH_DIST, default dist/) against a baseline build (--base or
BENCH_BASE, default .cache/dist-base), measured alternately in one run; prints each build's median
CPU µs per request and the median per-round ratio build/baseline (< 1 is cheaper).
Other cases (--cases): html-text (the page built with textResponse), raw (a bare node:http route),
rs-warm, rs-warm-json, rs-warm-text (a bearer GET through the warm resource-server gate answered
with new Response, completeResponse, textResponse), node-warm (the bare route behind
nodeRequireBearer); with raw, each of these cases' ratio to raw is printed. These are sent by
autocannon (--generator node: by node:http's client, which sets a lower rate than the server's).

  --requests N     requests per case, build and round (default 4000; node:http's client)
  --seconds N      seconds per case, build and round for autocannon's cases (default 2)
  --rounds N       rounds (default 5)
  --concurrency N  keep-alive connections of node:http's client (default 8)
  --connections N  autocannon's connections for raw, rs-* and node-warm (default 10)
  --generator G    autocannon (default) or node, for raw, rs-* and node-warm
  --cases a,b      only these cases (default form-json,redirect,html,html-complete)
  --dist build     the build under test (default BENCH_DIST or dist/)
  --base build     the baseline build (default BENCH_BASE or .cache/dist-base)
  --json           the last stdout line is one JSON object
`;

// ------------------------------------------------------------------ server child

const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  pragma: "no-cache",
  "cross-origin-opener-policy": "same-origin",
};
const PAGE = `<!doctype html><html><head><title>Sign in</title></head><body>${"<p>Sign in to continue.</p>".repeat(100)}</body></html>`;

/** Reads the body through its reader, as the authorization server's readCappedText does. */
async function readBodyText(request) {
  if (request.body === null) return "";
  const reader = request.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.byteLength;
  }
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
}

function handlerFor(name, { jsonResponse, NO_STORE, completeResponse, textResponse }) {
  if (name === "form-json") {
    return async (request) => {
      const form = new URLSearchParams(await readBodyText(request));
      const response = jsonResponse(
        {
          access_token: "a".repeat(400),
          token_type: "Bearer",
          expires_in: 3600,
          refresh_token: "r".repeat(43),
          scope: form.get("scope") ?? "notes:read",
        },
        { headers: NO_STORE },
      );
      response.headers.set("x-content-type-options", "nosniff");
      return response;
    };
  }
  if (name === "redirect") {
    return async (request) => {
      const headers = new Headers(SECURITY_HEADERS);
      headers.set(
        "location",
        `https://bench.example/callback?code=${"c".repeat(43)}&state=${request.url.length}`,
      );
      headers.append(
        "set-cookie",
        `__Host-session=${"s".repeat(43)}; Path=/; Secure; HttpOnly; SameSite=Lax`,
      );
      headers.append("set-cookie", "__Host-csrf=; Path=/; Secure; HttpOnly; Max-Age=0");
      return new Response(null, { status: 303, headers });
    };
  }
  const build =
    name === "html-complete" && completeResponse
      ? completeResponse
      : name === "html-text" && textResponse
        ? textResponse
        : (text, init) => new Response(text, init);
  return async () => {
    const headers = new Headers(SECURITY_HEADERS);
    headers.set("content-type", "text/html; charset=utf-8");
    return build(PAGE, { status: 200, headers });
  };
}

const RS_RESOURCE = "http://127.0.0.1/api";
const RS_ISSUER = "https://issuer.bench.example";
const RS_BODY = JSON.stringify({ notes: [{ id: "1", text: "benchmark note" }] });
const RS_HEADERS = { "content-type": "application/json" };

/**
 * The resource-server cases' server for one build: the warm gate in front of a handler answering
 * RS_BODY the way the case names (listening first: the gate's Host allow-list needs the port).
 */
async function rsServer(name, dir, helpers, jwk) {
  const { createResourceServer, cachedVerifier, jwtVerifier } = await import(
    `${dir}/resource-server/index.js`
  );
  const { createServer } = await import("node:http");
  const server = createServer();
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  if (name === "raw") {
    const headers = { ...RS_HEADERS, "content-length": Buffer.byteLength(RS_BODY) };
    server.on("request", (_req, res) => {
      res.writeHead(200, headers);
      res.end(RS_BODY);
    });
    return `http://127.0.0.1:${port}`;
  }
  const gate = createResourceServer({
    resource: RS_RESOURCE,
    authorizationServers: [RS_ISSUER],
    allowedHosts: [`127.0.0.1:${port}`],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: RS_ISSUER, audience: RS_RESOURCE, jwks: { keys: [jwk] }, algorithms: ["ES256"] }),
      { maxEntries: 1000 },
    ),
  });
  const protectedRoute = gate.requireBearer({ scopes: ["notes:read"] });
  let build = (text, init) => new Response(text, init);
  if (name === "rs-warm-json") build = helpers.completeResponse;
  if (name === "rs-warm-text") {
    if (helpers.textResponse) build = helpers.textResponse;
    else console.error(`rs-warm-text: no textResponse in ${dir}, new Response instead`);
  }
  if (name === "node-warm") {
    const { nodeRequireBearer } = await import(`${dir}/http/node.js`);
    const headers = { ...RS_HEADERS, "content-length": Buffer.byteLength(RS_BODY) };
    const route = (_req, res) => {
      res.writeHead(200, headers);
      res.end(RS_BODY);
    };
    server.on("request", nodeRequireBearer(gate, { scopes: ["notes:read"] }, route));
    return `http://127.0.0.1:${port}`;
  }
  const handler = async () => build(RS_BODY, { headers: RS_HEADERS });
  const { toNodeListener } = await import(`${dir}/http/node-listener.js`);
  server.on(
    "request",
    toNodeListener((request) => protectedRoute(request, handler)),
  );
  return `http://127.0.0.1:${port}`;
}

async function serve() {
  const ports = {};
  // One ES256 key and token for the resource-server cases (the same in both builds).
  const jose = await import("jose");
  const { publicKey, privateKey } = await jose.generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await jose.exportJWK(publicKey)), kid: "bench", alg: "ES256" };
  const now = Math.floor(Date.now() / 1000);
  const token = await new jose.SignJWT({ sub: "bench-user", client_id: "bench-client", scope: "notes:read" })
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
    .setIssuer(RS_ISSUER)
    .setAudience(RS_RESOURCE)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(privateKey);
  for (const [build, dir] of Object.entries(BUILDS)) {
    const { listen } = await import(`${dir}/http/node-listener.js`);
    const helpers = {
      ...(await import(`${dir}/shared/http.js`)),
      textResponse: (await import(`${dir}/http/node.js`)).textResponse,
    };
    if (CASES.includes("html-text") && !helpers.textResponse)
      console.error(`html-text: no textResponse in ${dir}, new Response instead`);
    for (const name of CASES) {
      if (name === "raw" || name === "node-warm" || name.startsWith("rs-")) {
        ports[`${build}/${name}`] = await rsServer(name, dir, helpers, jwk);
        continue;
      }
      const running = await listen(handlerFor(name, helpers));
      ports[`${build}/${name}`] = running.url;
    }
  }
  process.send({ token });
  process.on("message", (m) => {
    if (m === "cpu") {
      const { user, system } = process.cpuUsage();
      process.send({ cpu: user + system });
    } else if (m === "exit") process.exit(0);
  });
  process.send({ ports });
}

// ------------------------------------------------------------------ load generator

const FORM = new URLSearchParams({
  grant_type: "authorization_code",
  code: "c".repeat(43),
  code_verifier: "v".repeat(43),
  client_id: "bench-client",
  redirect_uri: "https://bench.example/callback",
  resource: "http://127.0.0.1:9001/mcp",
}).toString();

/** The bearer token the server child signed for the resource-server cases. */
let bearer = "";
/** raw, rs-* and node-warm: the cases issue 25's rows compare (a bearer GET of /api/notes). */
const isResourceCase = (name) => name === "raw" || name === "node-warm" || name.startsWith("rs-");
/** The load generator for the resource cases: "autocannon" (default) or "node" (see the header). */
let generator = "autocannon";
/** autocannon's connections for the resource cases (bench/resource-server.mjs's default). */
let connections = 10;
/**
 * Seconds of autocannon per case, build and round: it runs for a duration, not a request count
 * (with `amount` it stops only at its next one-second tick, which would count idle time as wall time).
 */
let autocannonSeconds = 2;
let autocannon;

/**
 * Bearer GETs of the case's route with autocannon for `seconds`; every answer must be a 200.
 * Answers the number of responses.
 */
async function sendWithAutocannon(base, name, seconds) {
  const result = await autocannon({
    url: base,
    connections,
    pipelining: 1,
    duration: seconds,
    headers: { authorization: `Bearer ${bearer}` },
    requests: [{ method: "GET", path: "/api/notes" }],
  });
  if (result.non2xx + result.errors + result.timeouts > 0)
    throw new Error(
      `${name}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    );
  return result.requests.total;
}

function send(agent, base, name) {
  const rs = isResourceCase(name);
  const url = new URL(
    name === "form-json" ? "/token" : name === "redirect" ? "/authorize?a=1" : rs ? "/api/notes" : "/login",
    base,
  );
  const post = name === "form-json";
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        agent,
        method: post ? "POST" : "GET",
        headers: post
          ? { "content-type": "application/x-www-form-urlencoded", "content-length": Buffer.byteLength(FORM) }
          : rs
            ? { authorization: `Bearer ${bearer}` }
            : { cookie: `__Host-session=${"s".repeat(43)}` },
      },
      (res) => {
        res.on("data", () => {});
        // A resource-server case must pass the gate (200), or it measures a challenge instead.
        res.on("end", () =>
          res.statusCode >= 500 || (rs && res.statusCode !== 200)
            ? reject(new Error(`${name}: ${res.statusCode}`))
            : resolve(),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(post ? FORM : undefined);
  });
}

function childCpu(child) {
  return new Promise((resolve) => {
    child.once("message", (m) => resolve(m.cpu));
    child.send("cpu");
  });
}

/**
 * One case's measurement: the child's CPU µs per request, the requests per second reached, and the
 * share of one core the child used meanwhile (its CPU time / wall time). A share well below 1 means
 * the child waited, for requests (the load generator set the rate) or for its core (other load):
 * then every request also pays the wake-up the server would share among several when saturated,
 * the same µs added to every case, which pulls ratios between cases toward 1.
 */
async function measure(child, agent, base, name, requests, concurrency) {
  const before = await childCpu(child);
  const start = performance.now();
  let done = requests;
  if (generator === "autocannon" && isResourceCase(name))
    done = await sendWithAutocannon(base, name, autocannonSeconds);
  else {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < requests) await send(agent, base, name);
      }),
    );
  }
  const seconds = (performance.now() - start) / 1000;
  const after = await childCpu(child);
  return {
    cpuMicros: (after - before) / done,
    requestsPerSecond: done / seconds,
    serverBusy: (after - before) / 1e6 / seconds,
  };
}

function pinning() {
  if (availableParallelism() < 2) return undefined;
  try {
    execFileSync("taskset", ["-a", "-cp", "1", String(process.pid)], { stdio: "ignore" });
    return "0";
  } catch {
    return undefined;
  }
}

async function main() {
  const args = process.argv.slice(2);
  if (
    helpOrCheckArgs(args, {
      valueOptions: [
        "--requests",
        "--rounds",
        "--concurrency",
        "--connections",
        "--seconds",
        "--generator",
        "--cases",
        "--dist",
        "--base",
      ],
      flagOptions: ["--json"],
      usage: USAGE,
    })
  )
    return;
  const option = (name, fallback) => {
    const i = args.indexOf(name);
    return i === -1 ? fallback : Number(args[i + 1]);
  };
  const requests = option("--requests", 4000);
  const rounds = option("--rounds", 5);
  const concurrency = option("--concurrency", 8);
  connections = option("--connections", 10);
  autocannonSeconds = option("--seconds", 2);
  const generatorArg = args.indexOf("--generator");
  if (generatorArg !== -1) generator = args[generatorArg + 1];
  if (generator !== "autocannon" && generator !== "node")
    throw new Error(`--generator ${generator}: autocannon or node`);

  const json = args.includes("--json");
  const cases = args.indexOf("--cases");
  if (cases !== -1) {
    CASES = args[cases + 1].split(",");
    const unknown = CASES.find((name) => !ALL_CASES.includes(name));
    if (unknown) throw new Error(`unknown case ${unknown} (${ALL_CASES.join(", ")})`);
  }
  if (generator === "autocannon" && CASES.some(isResourceCase))
    autocannon = (await import("autocannon")).default;
  const log = json ? (s) => process.stderr.write(`${s}\n`) : (s) => process.stdout.write(`${s}\n`);

  const core = pinning();
  const command = core ? "taskset" : process.execPath;
  const childArgs = core ? ["-c", core, process.execPath, SELF, "--serve"] : [SELF, "--serve"];
  // The child learns the builds and cases from its environment.
  const child = spawn(command, childArgs, {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: {
      ...process.env,
      BENCH_DIST: BUILDS.candidate,
      BENCH_BASE: BUILDS.base,
      BENCH_CASES: CASES.join(","),
    },
  });
  const { ports } = await new Promise((resolve, reject) => {
    child.on("message", (m) => {
      if (m.token !== undefined) bearer = m.token;
      if (m.ports !== undefined) resolve(m);
    });
    child.once("exit", (code) => reject(new Error(`server child exited with ${code}`)));
  });
  child.removeAllListeners("message");
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    // Warm-up: both builds, every case.
    for (const build of Object.keys(BUILDS)) {
      for (const name of CASES)
        await measure(child, agent, ports[`${build}/${name}`], name, 1000, concurrency);
    }
    const perRound = Object.fromEntries(CASES.map((name) => [name, { candidate: [], base: [] }]));
    // The same rounds' rate and server share (see measure), per case and build.
    const rates = Object.fromEntries(CASES.map((name) => [name, { candidate: [], base: [] }]));
    const busy = Object.fromEntries(CASES.map((name) => [name, { candidate: [], base: [] }]));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ["base", "candidate"] : ["candidate", "base"];
      for (const name of CASES) {
        for (const build of order) {
          const m = await measure(child, agent, ports[`${build}/${name}`], name, requests, concurrency);
          perRound[name][build].push(m.cpuMicros);
          rates[name][build].push(m.requestsPerSecond);
          busy[name][build].push(m.serverBusy);
        }
      }
      log(
        `round ${r + 1}/${rounds}: ${CASES.map((n) => `${n} ${round1(perRound[n].candidate[r])}/${round1(perRound[n].base[r])} µs`).join(", ")}`,
      );
    }
    const result = {
      load: loadavg().map((x) => round3(x)),
      requests,
      rounds,
      concurrency,
      generator,
      connections,
      seconds: autocannonSeconds,
      builds: BUILDS,
      cases: Object.fromEntries(
        CASES.map((name) => {
          const { candidate, base } = perRound[name];
          return [
            name,
            {
              candidateCpuMicros: round1(median(candidate)),
              baseCpuMicros: round1(median(base)),
              ratio: round3(median(candidate.map((c, i) => c / base[i]))),
              candidateRequestsPerSecond: Math.round(median(rates[name].candidate)),
              baseRequestsPerSecond: Math.round(median(rates[name].base)),
              candidateServerBusy: round3(median(busy[name].candidate)),
              baseServerBusy: round3(median(busy[name].base)),
            },
          ];
        }),
      ),
    };
    // Issue 25's row: each resource-server case against the bare route, by CPU per request
    // (raw's CPU / the case's, per round, median), for each build.
    if (perRound.raw) {
      result.vsRaw = {};
      for (const name of CASES.filter((n) => n.startsWith("rs-") || n === "node-warm")) {
        const of = (build) =>
          round3(median(perRound[name][build].map((cpu, i) => perRound.raw[build][i] / cpu)));
        result.vsRaw[name] = { candidate: of("candidate"), base: of("base") };
      }
    }
    log(`\nserver CPU µs per request (median of ${rounds} rounds), load ${result.load.join(" ")}:`);
    for (const [name, c] of Object.entries(result.cases)) {
      const raw = result.vsRaw?.[name];
      log(
        `  ${name.padEnd(13)} build ${c.candidateCpuMicros}  baseline ${c.baseCpuMicros}  ratio ${c.ratio}${raw ? `  raw/case by CPU: build ${raw.candidate}, baseline ${raw.base} (goal >= ${name === "node-warm" ? "0.95" : "0.8"})` : ""}`,
      );
    }
    log("\nrequests/s and server busy (its CPU time / wall time, 1 = one core), medians:");
    for (const [name, c] of Object.entries(result.cases))
      log(
        `  ${name.padEnd(13)} build ${c.candidateRequestsPerSecond}/s busy ${c.candidateServerBusy}  baseline ${c.baseRequestsPerSecond}/s busy ${c.baseServerBusy}`,
      );
    const idle = Object.entries(result.cases).filter(
      ([, c]) => c.candidateServerBusy < 0.9 || c.baseServerBusy < 0.9,
    );
    if (idle.length > 0)
      log(
        `note: the server was busy less than 0.9 of a core in ${idle.map(([n]) => n).join(", ")}: it waited for requests or for its core, so each request's CPU includes wake-ups a saturated server shares, and ratios between cases lean toward 1`,
      );
    if (json) process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    agent.destroy();
    child.send("exit");
  }
}

if (process.argv.includes("--serve")) {
  if (process.env.BENCH_CASES) CASES = process.env.BENCH_CASES.split(",");
  await serve();
} else await main();
