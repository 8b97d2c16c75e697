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
  const { caseName, jwk, tokens, seconds } = await new Promise((resolve) => process.once("message", resolve));
  const jose = await import("jose");
  const { toNodeListener } = await import("../dist/http/node.js");
  const { createResourceServer, cachedVerifier, jwtVerifier } = await import(
    "../dist/resource-server/index.js"
  );

  if (caseName === "jose-loop") {
    const key = await jose.importJWK(jwk, "ES256");
    const deadline = Date.now() + seconds * 1000;
    let done = 0;
    // Ten concurrent chains, like ten HTTP connections.
    await Promise.all(
      Array.from({ length: 10 }, async (_, chain) => {
        let i = chain;
        while (Date.now() < deadline) {
          await jose.jwtVerify(tokens[i % tokens.length], key, {
            issuer: ISSUER,
            audience: RESOURCE,
            algorithms: ["ES256"],
            typ: "at+jwt",
          });
          i += 10;
          done++;
        }
      }),
    );
    process.send({ opsPerSecond: done / seconds });
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
    if (m === "stop") {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    }
  });
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

async function runAutocannon(autocannon, url, { seconds, connections, headersFor }) {
  const opts = {
    url,
    connections,
    pipelining: 1,
    duration: seconds,
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

  const results = {};
  const measure = async (name, caseName, headersFor, childTokens = []) => {
    const { proc, port } = await startCase(caseName, { jwk, tokens: childTokens }, seconds);
    try {
      const url = `http://127.0.0.1:${port}`;
      // Warm-up (JIT, keep-alive sockets, JWKS import), not recorded.
      await runAutocannon(autocannon, url, {
        seconds: 1,
        connections,
        headersFor: headersFor?.warmup ?? headersFor,
      });
      results[name] = await runAutocannon(autocannon, url, {
        seconds,
        connections,
        headersFor: headersFor?.run ?? headersFor,
      });
      log(
        `${name.padEnd(12)} ${String(results[name].requestsPerSecond).padStart(7)} req/s  p50 ${results[name].p50Ms} ms  p99 ${results[name].p99Ms} ms  failures ${results[name].failures}`,
      );
    } finally {
      proc.send("stop");
    }
  };

  const bearer = { authorization: `Bearer ${warmToken}` };
  await measure("raw", "raw");
  await measure("unprotected", "unprotected");
  await measure("warm", "warm", () => bearer);
  // Distinct: warm-up uses the last tokens, the recorded run starts from the first, so no token
  // of the recorded run has been seen before (until the list wraps; reported below).
  let next = 0;
  let warmupNext = Math.floor(tokenCount / 2);
  await measure("distinct", "distinct", {
    warmup: () => ({ authorization: `Bearer ${tokens[warmupNext++ % tokenCount]}` }),
    run: () => ({ authorization: `Bearer ${tokens[next++ % Math.floor(tokenCount / 2)]}` }),
  });
  const distinctWrapped = next > Math.floor(tokenCount / 2);
  await measure("peer", "peer", () => bearer);

  const loop = await startCase("jose-loop", { jwk, tokens: tokens.slice(0, 10_000) }, seconds);
  results["jose-loop"] = { opsPerSecond: Math.round(loop.opsPerSecond) };
  log(`${"jose-loop".padEnd(12)} ${String(results["jose-loop"].opsPerSecond).padStart(7)} verifications/s`);

  const ratio = (a, b) => Math.round((a / b) * 1000) / 1000;
  const ratios = {
    warmVsUnprotected: ratio(results.warm.requestsPerSecond, results.unprotected.requestsPerSecond),
    warmVsRawNodeHttp: ratio(results.warm.requestsPerSecond, results.raw.requestsPerSecond),
    warmVsPeer: ratio(results.warm.requestsPerSecond, results.peer.requestsPerSecond),
    distinctVsJoseLoop: ratio(results.distinct.requestsPerSecond, results["jose-loop"].opsPerSecond),
  };
  const targets = {
    warmVsUnprotected: ratios.warmVsUnprotected >= 0.95,
    warmVsPeer: ratios.warmVsPeer >= 10,
    distinctVsJoseLoop: ratios.distinctVsJoseLoop >= 0.9,
  };
  log("");
  log(
    `warm / unprotected (toNodeListener)  ${ratios.warmVsUnprotected}  (target >= 0.95: ${targets.warmVsUnprotected ? "met" : "MISSED"})`,
  );
  log(`warm / raw node:http                 ${ratios.warmVsRawNodeHttp}`);
  log(
    `warm / peer (MCP SDK + express)      ${ratios.warmVsPeer}  (target >= 10: ${targets.warmVsPeer ? "met" : "MISSED"})`,
  );
  log(
    `distinct / bare jose verify loop     ${ratios.distinctVsJoseLoop}  (target >= 0.9: ${targets.distinctVsJoseLoop ? "met" : "MISSED"})`,
  );
  if (distinctWrapped)
    log("note: the distinct-token list wrapped during the run; some requests were cache hits");
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ seconds, connections, tokens: tokenCount, distinctWrapped, results, ratios, targets })}\n`,
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
