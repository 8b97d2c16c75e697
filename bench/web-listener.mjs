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
 *   it has one (a build without it falls back to `new Response(text)`).
 *
 * One child process (pinned to core 0 with `taskset` when there are two cores) serves every case for
 * both builds on loopback; this process (core 1) sends the requests over keep-alive connections.
 * Each round measures every case × build once, the build order alternating per round, and the
 * child's process.cpuUsage() (user + system) is read before and after each; the summary is the median
 * over rounds of the CPU µs per request and of the per-round ratio build/baseline (< 1 is cheaper).
 * The handler's own work (parsing the form, JSON.stringify) is in both figures alike.
 *
 *   node bench/web-listener.mjs [--requests 4000] [--rounds 5] [--concurrency 8] [--cases a,b] [--json]
 *
 * BENCH_DIST=/abs/build (default dist/) is the build under test, BENCH_BASE=/abs/build (default
 * .cache/dist-base) the baseline; both must be builds of this checkout.
 */
import { execFileSync, spawn } from "node:child_process";
import { Agent, request as httpRequest } from "node:http";
import { availableParallelism, loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { helpOrCheckArgs, median, round1, round3 } from "./lib.mjs";

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BUILDS = {
  candidate: process.env.BENCH_DIST ?? `${ROOT}dist`,
  base: process.env.BENCH_BASE ?? `${ROOT}.cache/dist-base`,
};
const ALL_CASES = ["form-json", "redirect", "html", "html-complete"];
let CASES = ALL_CASES;

const USAGE = `usage: node bench/web-listener.mjs [--requests N] [--rounds N] [--concurrency N] [--cases a,b] [--json]

Server CPU per request of toNodeListener for a form POST -> JSON, a GET -> 303 with Set-Cookie and a
GET -> HTML page (built with new Response, and with completeResponse where the build has it), the
build under test (BENCH_DIST, default dist/) against a baseline build (BENCH_BASE, default
.cache/dist-base), measured alternately in one run; prints each build's median
CPU µs per request and the median per-round ratio build/baseline (< 1 is cheaper).

  --requests N     requests per case, build and round (default 4000)
  --rounds N       rounds (default 5)
  --concurrency N  keep-alive connections (default 8)
  --cases a,b      only these cases (default form-json,redirect,html,html-complete)
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

function handlerFor(name, { jsonResponse, NO_STORE, completeResponse }) {
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
      : (text, init) => new Response(text, init);
  return async () => {
    const headers = new Headers(SECURITY_HEADERS);
    headers.set("content-type", "text/html; charset=utf-8");
    return build(PAGE, { status: 200, headers });
  };
}

async function serve() {
  const ports = {};
  for (const [build, dir] of Object.entries(BUILDS)) {
    const { listen } = await import(`${dir}/http/node-listener.js`);
    const helpers = await import(`${dir}/shared/http.js`);
    for (const name of CASES) {
      const running = await listen(handlerFor(name, helpers));
      ports[`${build}/${name}`] = running.url;
    }
  }
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

function send(agent, base, name) {
  const url = new URL(
    name === "form-json" ? "/token" : name === "redirect" ? "/authorize?a=1" : "/login",
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
          : { cookie: `__Host-session=${"s".repeat(43)}` },
      },
      (res) => {
        res.on("data", () => {});
        res.on("end", () =>
          res.statusCode >= 500 ? reject(new Error(`${name}: ${res.statusCode}`)) : resolve(),
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

async function measure(child, agent, base, name, requests, concurrency) {
  const before = await childCpu(child);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < requests) await send(agent, base, name);
    }),
  );
  const after = await childCpu(child);
  return (after - before) / requests;
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
      valueOptions: ["--requests", "--rounds", "--concurrency", "--cases"],
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
  const json = args.includes("--json");
  const cases = args.indexOf("--cases");
  if (cases !== -1) {
    CASES = args[cases + 1].split(",");
    const unknown = CASES.find((name) => !ALL_CASES.includes(name));
    if (unknown) throw new Error(`unknown case ${unknown} (${ALL_CASES.join(", ")})`);
  }
  const log = json ? (s) => process.stderr.write(`${s}\n`) : (s) => process.stdout.write(`${s}\n`);

  const core = pinning();
  const command = core ? "taskset" : process.execPath;
  const childArgs = core ? ["-c", core, process.execPath, SELF, "--serve"] : [SELF, "--serve"];
  const child = spawn(command, childArgs, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const { ports } = await new Promise((resolve, reject) => {
    child.once("message", resolve);
    child.once("exit", (code) => reject(new Error(`server child exited with ${code}`)));
  });
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    // Warm-up: both builds, every case.
    for (const build of Object.keys(BUILDS)) {
      for (const name of CASES)
        await measure(child, agent, ports[`${build}/${name}`], name, 1000, concurrency);
    }
    const perRound = Object.fromEntries(CASES.map((name) => [name, { candidate: [], base: [] }]));
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ["base", "candidate"] : ["candidate", "base"];
      for (const name of CASES) {
        for (const build of order) {
          perRound[name][build].push(
            await measure(child, agent, ports[`${build}/${name}`], name, requests, concurrency),
          );
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
            },
          ];
        }),
      ),
    };
    log(`\nserver CPU µs per request (median of ${rounds} rounds), load ${result.load.join(" ")}:`);
    for (const [name, c] of Object.entries(result.cases)) {
      log(
        `  ${name.padEnd(10)} build ${c.candidateCpuMicros}  baseline ${c.baseCpuMicros}  ratio ${c.ratio}`,
      );
    }
    if (json) process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    agent.destroy();
    child.send("exit");
  }
}

if (process.argv.includes("--serve")) await serve();
else await main();
