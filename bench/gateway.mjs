#!/usr/bin/env node
/**
 * Gateway benchmark (issue 24): tools/call round trips through `gatehouse gateway`'s relay
 * (createHttpGateway + the operation gate, a JWT verified through cachedVerifier) against the same
 * MCP server called directly, side by side in one run. Run after `npm run build`:
 *
 *   node bench/gateway.mjs [--json] [--seconds 12] [--rounds 4] [--connections 8] [--dist dist]
 *                          [--layout shared|split] [--cases direct,gateway-web,gateway-node]
 *                          [--baseline-dist other-build/dist] [--baseline-entry web|node]
 *
 * The MCP server is the official SDK v2 (`createMcpHandler`, one `echo` tool, 2026-07-28 JSON
 * answers) on `toNodeListener`, in its own process; each gateway case is another process:
 * `gateway-web` serves `gateway.fetch` through `listen` (the web listener), `gateway-node` serves
 * `gateway.nodeListener()` (node:http objects on the relay path; skipped for a build without it).
 * `--baseline-dist` adds `baseline-web` (or `baseline-node` with `--baseline-entry node`): that
 * case from another build (e.g. the commit before a change), measured in the same rounds, so two
 * builds compare under the same load. The case `bare-proxy` is the floor of any relay on
 * node:http: a server that reads the body and sends it on through a keep-alive agent, and the
 * answer back, with no token, no JSON and no policy (what node's HTTP server and client cost).
 * The load generator (this process) runs --connections concurrent request loops with fetch
 * (keep-alive), in interleaved rounds (the cases rotate, a different one first each round) so load
 * from elsewhere hits all alike.
 *
 * Cores (with `taskset` and two cores or more; BENCH_NO_PIN=1 pins nothing):
 * - `shared` (the default): the MCP server and the gateways on core 0, this process on core 1. The
 *   gateway's CPU then comes out of the server's core, so req/s through it is bounded by the CPU
 *   ratio: what a gateway costs on the server's machine.
 * - `split`: the MCP server on core 0, the gateways on core 1 with this process: a gateway with a
 *   core of its own (sharing it with the load generator), as a gateway on another machine or core.
 * With three cores or more, `split` gives this process the cores from 2 on.
 *
 * Figures are medians over rounds: requests/s, p50 and p99 latency, and server CPU per request
 * (process.cpuUsage of the children: the MCP server's for "direct"; the MCP server's plus the
 * gateway's through a gateway). Ratios per gateway case: gateway / direct by req/s, and by CPU
 * (direct CPU per request / gateway-path CPU per request), each the median of the rounds' ratios.
 * The load generator's own CPU per request is printed too, and per gateway case a model of the
 * ratio on a machine with a core for each party: min(1, c_srv / c_gw) (see `model_own_cores`).
 * The load average (1 min) is printed before and after. A request whose answer is not a 200 with the
 * echoed text counts as a failure (BENCH_DEBUG=1 prints the first, and the gateways' warnings, such
 * as an upstream failure's reason); a run with failures measures something else.
 * BENCH_CHILD_EXEC_ARGV goes to the children (e.g. "--cpu-prof
 * --cpu-prof-dir=/tmp/prof", written when the run ends).
 */
import { fork } from "node:child_process";
import { once } from "node:events";
import { availableParallelism, loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { median, pinProcess } from "./lib.mjs";

const { values: args } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    seconds: { type: "string", default: "12" },
    rounds: { type: "string", default: "4" },
    connections: { type: "string", default: "8" },
    dist: { type: "string", default: process.env.BENCH_DIST ?? "dist" },
    layout: { type: "string", default: "shared" },
    cases: { type: "string", default: "direct,gateway-web,gateway-node" },
    "baseline-dist": { type: "string" },
    "baseline-entry": { type: "string", default: "web" },
    role: { type: "string" },
    entry: { type: "string" },
    upstream: { type: "string" },
    issuer: { type: "string" },
  },
});
const dist = (path) => pathToFileURL(resolve(args.dist, path)).href;

/** Children answer "cpu" with their process.cpuUsage() total in µs. */
function answerCpu() {
  process.on("message", (m) => {
    if (m === "cpu") {
      const { user, system } = process.cpuUsage();
      process.send({ cpu: user + system });
    }
  });
}

async function runUpstream() {
  const { createMcpHandler, McpServer } = await import("@modelcontextprotocol/server");
  const z = await import("zod");
  const { listen } = await import(dist("http/node.js"));
  const mcp = createMcpHandler(() => {
    const server = new McpServer({ name: "bench", version: "1.0.0" });
    server.registerTool("echo", { inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
      content: [{ type: "text", text }],
    }));
    return server;
  });
  const running = await listen((request) => mcp.fetch(request), { host: "127.0.0.1", port: 0 });
  answerCpu();
  process.on("SIGINT", () => process.exit(0));
  process.send({ url: `${running.url}/mcp` });
}

/** The floor: node:http in, node:http out (keep-alive), bodies read whole, nothing judged. */
async function runBareProxy() {
  const { createServer, request, Agent } = await import("node:http");
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const target = new URL(args.upstream);
  const readAll = (message) =>
    new Promise((done, fail) => {
      const chunks = [];
      message.on("data", (c) => chunks.push(c));
      message.once("end", () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
      message.once("error", fail);
    });
  const server = createServer(async (req, res) => {
    const body = await readAll(req);
    const h = req.headers;
    const out = request(
      {
        hostname: target.hostname,
        port: target.port,
        path: target.pathname,
        method: req.method,
        agent,
        headers: [
          "host",
          target.host,
          "content-type",
          h["content-type"],
          "accept",
          h.accept,
          "mcp-protocol-version",
          h["mcp-protocol-version"],
          "mcp-method",
          h["mcp-method"],
          "mcp-name",
          h["mcp-name"],
          "content-length",
          String(body.length),
        ],
      },
      async (answer) => {
        const bytes = await readAll(answer);
        res.writeHead(answer.statusCode, [
          "content-type",
          answer.headers["content-type"],
          "content-length",
          String(bytes.length),
        ]);
        res.end(bytes);
      },
    );
    out.on("error", () => res.writeHead(502).end());
    out.end(body);
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  answerCpu();
  process.on("SIGINT", () => process.exit(0));
  process.send({ url: `http://127.0.0.1:${server.address().port}/mcp` });
}

async function runGateway() {
  const rs = await import(dist("resource-server/index.js"));
  const { createHttpGateway } = await import(dist("gateway/http-gateway.js"));
  const { listen } = await import(dist("http/node.js"));
  const { jsonLogger } = await import(dist("shared/log.js"));
  const { createServer } = await import("node:http");
  const { jwk } = JSON.parse(args.issuer);
  let gateway;
  let running;
  if (args.entry === "node") {
    // The gateway's own node listener, set once the gateway (which needs its URL) exists.
    let listener = (_req, res) => res.writeHead(503).end();
    const server = createServer((req, res) => listener(req, res));
    await new Promise((done) => server.listen(0, "127.0.0.1", done));
    running = {
      url: `http://127.0.0.1:${server.address().port}`,
      setup: () => (listener = gateway.nodeListener()),
    };
  } else {
    let handler = async () => new Response(null, { status: 503 });
    const server = await listen((request) => handler(request), { host: "127.0.0.1", port: 0 });
    running = { url: server.url, setup: () => (handler = (request) => gateway.fetch(request)) };
  }
  const resource = `${running.url}/mcp`;
  const resourceServer = rs.createResourceServer({
    resource,
    authorizationServers: ["https://issuer.bench"],
    verifier: rs.cachedVerifier(
      rs.jwtVerifier({ issuer: "https://issuer.bench", audience: resource, jwks: { keys: [jwk] } }),
    ),
  });
  const gate = rs.createOperationGate(resourceServer, {
    policy: { base: ["mcp:use"], default: "deny", tools: { echo: {} } },
  });
  gateway = createHttpGateway({
    upstream: args.upstream,
    resourceServer,
    gate,
    identityHeaders: { subject: "X-User" },
    // BENCH_DEBUG: the relay's warnings (an upstream failure's reason) on stderr.
    ...(process.env.BENCH_DEBUG && { logger: jsonLogger() }),
  });
  if (args.entry === "node" && typeof gateway.nodeListener !== "function") {
    process.send({ unsupported: true });
    return;
  }
  running.setup();
  answerCpu();
  process.on("SIGINT", () => process.exit(0));
  process.send({ url: resource });
}

function child(role, extra = [], build = args.dist) {
  const execArgv = process.env.BENCH_CHILD_EXEC_ARGV?.split(" ").filter(Boolean) ?? [];
  return fork(new URL(import.meta.url).pathname, ["--role", role, "--dist", build, ...extra], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    execArgv,
  });
}

async function cpuOf(proc) {
  proc.send("cpu");
  const [m] = await once(proc, "message");
  return m.cpu;
}

async function load(url, token, seconds, connections) {
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: {
      name: "echo",
      arguments: { text: "hello" },
      _meta: {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
      },
    },
  });
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "echo",
    authorization: `Bearer ${token}`,
  };
  const latencies = [];
  let failures = 0;
  const end = performance.now() + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end) {
      const started = performance.now();
      const response = await fetch(url, { method: "POST", headers, body });
      const text = await response.text();
      if (response.status !== 200 || !text.includes('"hello"')) {
        failures++;
        if (failures === 1 && process.env.BENCH_DEBUG)
          process.stderr.write(`failure: ${response.status} ${text.slice(0, 300)}\n`);
      }
      latencies.push(performance.now() - started);
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))] ?? 0;
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p50: at(0.5),
    p99: at(0.99),
    failures,
  };
}

/** Which cores each party gets (undefined: not pinned). */
function coresFor(layout) {
  const cores = availableParallelism();
  if (cores < 2) return undefined;
  if (layout === "shared") return { upstream: "0", gateway: "0", driver: "1" };
  if (layout === "split") {
    return { upstream: "0", gateway: "1", driver: cores >= 3 ? `2-${cores - 1}` : "1" };
  }
  throw new Error(`--layout is shared or split, not ${layout}`);
}

async function main() {
  const { generateKeyPair, exportJWK, SignJWT } = await import("jose");
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "bench", alg: "ES256" };
  const layout = coresFor(args.layout);
  const pinned = layout !== undefined && pinProcess(process.pid, layout.driver);
  const upstream = child("upstream");
  const [{ url: upstreamUrl }] = await once(upstream, "message");
  if (pinned) pinProcess(upstream.pid, layout.upstream);
  const wanted = args.cases.split(",");
  const gateways = {};
  const variants = [
    ["gateway-web", "web", args.dist],
    ["gateway-node", "node", args.dist],
    ["bare-proxy", "bare", args.dist],
  ].filter(([name]) => wanted.includes(name));
  if (args["baseline-dist"]) {
    const entry = args["baseline-entry"];
    variants.unshift([`baseline-${entry}`, entry, args["baseline-dist"]]);
  }
  for (const [name, entry, build] of variants) {
    const issuer = JSON.stringify({ jwk });
    const role = entry === "bare" ? "bare-proxy" : "gateway";
    const proc = child(role, ["--entry", entry, "--upstream", upstreamUrl, "--issuer", issuer], build);
    const [m] = await once(proc, "message");
    if (m.unsupported) {
      process.stderr.write(`${name}: this build has no nodeListener; left out\n`);
      proc.kill("SIGINT");
      continue;
    }
    if (pinned) pinProcess(proc.pid, layout.gateway);
    gateways[name] = { proc, url: m.url };
  }
  const sign = (aud) =>
    new SignJWT({ scope: "mcp:use", sub: "bench-user", client_id: "bench" })
      .setProtectedHeader({ alg: "ES256", kid: "bench", typ: "at+jwt" })
      .setIssuer("https://issuer.bench")
      .setAudience(aud)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(privateKey);
  const cases = {};
  // The direct server checks no token; the same header is sent so the requests are the same size.
  if (wanted.includes("direct")) cases.direct = { url: upstreamUrl, token: await sign(upstreamUrl) };
  for (const [name, g] of Object.entries(gateways)) cases[name] = { ...g, token: await sign(g.url) };
  const names = Object.keys(cases);
  if (!names.includes("direct") || names.length < 2)
    throw new Error("--cases needs direct and a gateway case");
  const seconds = Number(args.seconds) / Number(args.rounds);
  const connections = Number(args.connections);
  for (const name of names) await load(cases[name].url, cases[name].token, 1, connections);
  const rounds = Object.fromEntries(names.map((n) => [n, []]));
  const loadBefore = loadavg()[0];
  for (let round = 0; round < Number(args.rounds); round++) {
    // Rotated: each case goes first in turn.
    const order = names.map((_, i) => names[(i + round) % names.length]);
    for (const name of order) {
      const { url, token, proc } = cases[name];
      const before = { up: await cpuOf(upstream), gw: proc ? await cpuOf(proc) : 0 };
      const driverBefore = process.cpuUsage();
      const result = await load(url, token, seconds, connections);
      const driver = process.cpuUsage(driverBefore);
      const after = { up: await cpuOf(upstream), gw: proc ? await cpuOf(proc) : 0 };
      const gatewayCpu = after.gw - before.gw;
      const upstreamCpu = after.up - before.up;
      rounds[name].push({
        ...result,
        cpuPerRequest: (upstreamCpu + gatewayCpu) / result.requests,
        upstreamCpuPerRequest: upstreamCpu / result.requests,
        gatewayCpuPerRequest: gatewayCpu / result.requests,
        driverCpuPerRequest: (driver.user + driver.system) / result.requests,
      });
    }
  }
  const loadAfter = loadavg()[0];
  const summary = {};
  for (const name of names) {
    const rs = rounds[name];
    summary[name] = {
      rps: median(rs.map((r) => r.rps)),
      p50_ms: median(rs.map((r) => r.p50)),
      p99_ms: median(rs.map((r) => r.p99)),
      cpu_us_per_request: median(rs.map((r) => r.cpuPerRequest)),
      mcp_server_cpu_us_per_request: median(rs.map((r) => r.upstreamCpuPerRequest)),
      load_generator_cpu_us_per_request: median(rs.map((r) => r.driverCpuPerRequest)),
      ...(name !== "direct" && { gateway_cpu_us_per_request: median(rs.map((r) => r.gatewayCpuPerRequest)) }),
      rps_rounds: rs.map((r) => Math.round(r.rps)),
      failures: rs.reduce((n, r) => n + r.failures, 0),
    };
  }
  const ratios = {};
  for (const name of names.filter((n) => n !== "direct")) {
    ratios[name] = {
      by_rps: median(rounds[name].map((g, i) => g.rps / rounds.direct[i].rps)),
      by_cpu: median(rounds[name].map((g, i) => rounds.direct[i].cpuPerRequest / g.cpuPerRequest)),
      p99_vs_direct: median(rounds[name].map((g, i) => g.p99 / rounds.direct[i].p99)),
      // A model, not a measurement: what this machine cannot show. With a core each for the MCP
      // server, the gateway and the load generator (enough concurrency to keep them busy, latency
      // ignored), req/s is bounded by the busiest party: min(1/c_srv, 1/c_gw) through the gateway
      // against 1/c_srv direct, so the ratio is min(1, c_srv / c_gw), c_srv the MCP server's CPU
      // per call in the direct rounds and c_gw the gateway's. On one shared core it is the CPU
      // ratio above, c_srv / (c_srv + c_gw).
      server_over_gateway_cpu: median(
        rounds[name].map((g, i) => rounds.direct[i].upstreamCpuPerRequest / g.gatewayCpuPerRequest),
      ),
      model_own_cores: median(
        rounds[name].map((g, i) =>
          Math.min(1, rounds.direct[i].upstreamCpuPerRequest / g.gatewayCpuPerRequest),
        ),
      ),
    };
  }
  const report = {
    ...summary,
    ratios,
    load_average: [loadBefore, loadAfter],
    layout: pinned ? { name: args.layout, ...layout } : "not pinned",
    connections,
    seconds: Number(args.seconds),
    rounds: Number(args.rounds),
  };
  if (args.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    for (const name of names) {
      const s = summary[name];
      const own =
        s.gateway_cpu_us_per_request === undefined
          ? ""
          : ` (gateway ${s.gateway_cpu_us_per_request.toFixed(0)}, MCP server ${s.mcp_server_cpu_us_per_request.toFixed(0)})`;
      process.stdout.write(
        `${name.padEnd(12)} ${s.rps.toFixed(0).padStart(6)} req/s  p50 ${s.p50_ms.toFixed(2)} ms  p99 ${s.p99_ms.toFixed(2)} ms  ${s.cpu_us_per_request.toFixed(0)} µs server CPU/request${own}  load generator ${s.load_generator_cpu_us_per_request.toFixed(0)} µs  failures ${s.failures}  rounds ${s.rps_rounds.join(" ")}\n`,
      );
    }
    for (const [name, r] of Object.entries(ratios)) {
      process.stdout.write(
        `${name} / direct: ${r.by_rps.toFixed(2)} by req/s, ${r.by_cpu.toFixed(2)} by CPU, p99 x${r.p99_vs_direct.toFixed(2)} (goal 0.9 by req/s); model, a core each: ${r.model_own_cores.toFixed(2)} (c_srv / c_gw ${r.server_over_gateway_cpu.toFixed(2)})\n`,
      );
    }
    process.stdout.write(
      `layout ${pinned ? `${args.layout} (server core ${layout.upstream}, gateways ${layout.gateway}, load generator ${layout.driver})` : "not pinned"}; load average ${loadBefore.toFixed(2)} -> ${loadAfter.toFixed(2)}\n`,
    );
  }
  // SIGINT lets a profiled child write its profile on the way out.
  upstream.kill("SIGINT");
  for (const g of Object.values(gateways)) g.proc.kill("SIGINT");
}

if (args.role === "upstream") await runUpstream();
else if (args.role === "gateway") await runGateway();
else if (args.role === "bare-proxy") await runBareProxy();
else await main();
