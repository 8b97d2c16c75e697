#!/usr/bin/env node
/**
 * Gateway benchmark (issue 24): tools/call round trips through `gatehouse gateway`'s relay
 * (createHttpGateway + the operation gate, a JWT verified through cachedVerifier) against the same
 * MCP server called directly, side by side in one run. Run after `npm run build`:
 *
 *   node bench/gateway.mjs [--json] [--seconds 12] [--rounds 4] [--connections 8] [--dist dist]
 *
 * The MCP server is the official SDK v2 (`createMcpHandler`, one `echo` tool, 2026-07-28 JSON
 * answers) on `toNodeListener`, in its own process; the gateway is another process. The load
 * generator (this process) runs --connections concurrent request loops with fetch (keep-alive),
 * in interleaved rounds (direct and gateway alternate, a different one first each round) so load
 * from elsewhere hits both alike. Figures are medians over rounds: requests/s, p99 latency, and
 * server CPU per request (process.cpuUsage of the children: the MCP server's for "direct"; the MCP
 * server's plus the gateway's through the gateway). Ratios: gateway / direct by req/s, and by CPU
 * (direct CPU per request / gateway-path CPU per request). The load average is printed with them.
 * A request whose answer is not a 200 with the echoed text counts as a failure (BENCH_DEBUG=1 prints
 * the first); a run with failures measures something else. BENCH_CHILD_EXEC_ARGV goes to the children.
 */
import { fork } from "node:child_process";
import { once } from "node:events";
import { loadavg } from "node:os";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    json: { type: "boolean", default: false },
    seconds: { type: "string", default: "12" },
    rounds: { type: "string", default: "4" },
    connections: { type: "string", default: "8" },
    dist: { type: "string", default: process.env.BENCH_DIST ?? "dist" },
    role: { type: "string" },
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

async function runGateway() {
  const rs = await import(dist("resource-server/index.js"));
  const { createHttpGateway } = await import(dist("gateway/http-gateway.js"));
  const { listen } = await import(dist("http/node.js"));
  const { jwk } = JSON.parse(args.issuer);
  let handler = async () => new Response(null, { status: 503 });
  const running = await listen((request) => handler(request), { host: "127.0.0.1", port: 0 });
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
  const gateway = createHttpGateway({
    upstream: args.upstream,
    resourceServer,
    gate,
    identityHeaders: { subject: "X-User" },
  });
  handler = (request) => gateway.fetch(request);
  answerCpu();
  process.on("SIGINT", () => process.exit(0));
  process.send({ url: resource });
}

function child(role, extra = []) {
  // BENCH_CHILD_EXEC_ARGV (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") goes to the children, for profiles.
  const execArgv = process.env.BENCH_CHILD_EXEC_ARGV?.split(" ").filter(Boolean) ?? [];
  const proc = fork(new URL(import.meta.url).pathname, ["--role", role, "--dist", args.dist, ...extra], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    execArgv,
  });
  return proc;
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
  return {
    requests: latencies.length,
    rps: latencies.length / seconds,
    p99: latencies[Math.floor(latencies.length * 0.99)] ?? 0,
    failures,
  };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const { generateKeyPair, exportJWK, SignJWT } = await import("jose");
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "bench", alg: "ES256" };
  const upstream = child("upstream");
  const [{ url: upstreamUrl }] = await once(upstream, "message");
  const gatewayProc = child("gateway", ["--upstream", upstreamUrl, "--issuer", JSON.stringify({ jwk })]);
  const [{ url: gatewayUrl }] = await once(gatewayProc, "message");
  const sign = (aud) =>
    new SignJWT({ scope: "mcp:use", sub: "bench-user", client_id: "bench" })
      .setProtectedHeader({ alg: "ES256", kid: "bench", typ: "at+jwt" })
      .setIssuer("https://issuer.bench")
      .setAudience(aud)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(privateKey);
  const gatewayToken = await sign(gatewayUrl);
  // The direct server checks no token; the same header is sent so the requests are the same size.
  const directToken = await sign(upstreamUrl);
  const seconds = Number(args.seconds) / Number(args.rounds);
  const connections = Number(args.connections);
  await load(upstreamUrl, directToken, 1, connections);
  await load(gatewayUrl, gatewayToken, 1, connections);
  const rounds = { direct: [], gateway: [] };
  const loadBefore = loadavg()[0];
  for (let round = 0; round < Number(args.rounds); round++) {
    const order = round % 2 ? ["gateway", "direct"] : ["direct", "gateway"];
    for (const which of order) {
      const before = { up: await cpuOf(upstream), gw: await cpuOf(gatewayProc) };
      const result = await load(
        which === "direct" ? upstreamUrl : gatewayUrl,
        which === "direct" ? directToken : gatewayToken,
        seconds,
        connections,
      );
      const after = { up: await cpuOf(upstream), gw: await cpuOf(gatewayProc) };
      const cpu = after.up - before.up + (which === "gateway" ? after.gw - before.gw : 0);
      rounds[which].push({ ...result, cpuPerRequest: cpu / result.requests });
    }
  }
  const summary = {};
  for (const which of ["direct", "gateway"]) {
    const rs = rounds[which];
    summary[which] = {
      rps: median(rs.map((r) => r.rps)),
      p99_ms: median(rs.map((r) => r.p99)),
      cpu_us_per_request: median(rs.map((r) => r.cpuPerRequest)),
      failures: rs.reduce((n, r) => n + r.failures, 0),
    };
  }
  const ratios = {
    by_rps: median(rounds.gateway.map((g, i) => g.rps / rounds.direct[i].rps)),
    by_cpu: median(rounds.gateway.map((g, i) => rounds.direct[i].cpuPerRequest / g.cpuPerRequest)),
  };
  const report = {
    ...summary,
    ratios,
    load_average: [loadBefore, loadavg()[0]],
    connections,
    seconds: Number(args.seconds),
  };
  if (args.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else {
    for (const which of ["direct", "gateway"]) {
      const s = summary[which];
      process.stdout.write(
        `${which.padEnd(8)} ${s.rps.toFixed(0).padStart(6)} req/s  p99 ${s.p99_ms.toFixed(2)} ms  ${s.cpu_us_per_request.toFixed(0)} µs server CPU/request  failures ${s.failures}\n`,
      );
    }
    process.stdout.write(
      `gateway / direct: ${ratios.by_rps.toFixed(2)} by req/s, ${ratios.by_cpu.toFixed(2)} by CPU (goal 0.9); load average ${loadBefore.toFixed(2)} -> ${loadavg()[0].toFixed(2)}\n`,
    );
  }
  // SIGINT lets a profiled child write its profile on the way out.
  upstream.kill("SIGINT");
  gatewayProc.kill("SIGINT");
}

if (args.role === "upstream") await runUpstream();
else if (args.role === "gateway") await runGateway();
else await main();
