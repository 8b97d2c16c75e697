#!/usr/bin/env node
/**
 * DPoP benchmark (issue 13): what a DPoP request (RFC 9449 §7) costs at the gate against a warm
 * Bearer request to the same server, and Gatehouse's proof verification against a bare jose
 * proof-verification loop, in one run, with autocannon on loopback. Run after `npm run build`:
 *
 *   node bench/dpop.mjs [--json] [--seconds 5] [--rounds 5] [--connections 10] [--warmup 2] [--proofs 60000]
 *
 *   bearer-warm   nodeRequireBearer, policy "allowed", cachedVerifier(jwtVerifier), one unbound
 *                 token sent as Bearer (warm cache): the path DPoP support must not slow down
 *   dpop          the same server and gate, one DPoP-bound token (warm cache) sent with the DPoP
 *                 scheme and a fresh ES256 proof per request, as clients send them (every proof
 *                 signed in advance, each used once: a reused one would be refused as a replay)
 *   jose-loop     bare jose.jwtVerify(proof, EmbeddedJWK) + calculateJwkThumbprint over distinct
 *                 proofs, no HTTP, ten concurrent chains: the least a jose-based gate does per proof
 *
 * Both HTTP cases run in one server child process, measured in interleaved rounds; the jose loop
 * runs in a second child between rounds. Figures are medians over rounds; ratios are medians of
 * per-round ratios, and by server CPU per request. The in-process line gives CPU per call without
 * HTTP: the gate's judgement of a DPoP request, Gatehouse's proof verifier alone, and the jose loop.
 * With --json the last line of stdout is one JSON object.
 */
import { fork } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
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

const RESOURCE = "http://127.0.0.1/api";
const ISSUER = "https://issuer.bench.example";
const PATH = "/api/notes";
const BODY = JSON.stringify({ notes: [{ id: "1", text: "benchmark note" }] });
const BODY_HEADERS = { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) };
/** Proofs are signed before the run, so they must stay acceptable for all of it. */
const IAT_WINDOW_SECONDS = 600;
const JOSE_PROOF_OPTIONS = { typ: "dpop+jwt", algorithms: ["ES256"], maxTokenAge: IAT_WINDOW_SECONDS };

// ---------------------------------------------------------------- children

async function child() {
  const config = await new Promise((resolve) => process.once("message", resolve));
  if (config.caseName === "jose-loop") return joseLoopChild(config);
  const { nodeRequireBearer } = await import("../dist/http/node.js");
  const { createResourceServer, cachedVerifier, jwtVerifier } = await import(
    "../dist/resource-server/index.js"
  );
  const server = createServer();
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = server.address().port;
  const gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [ISSUER],
    allowedHosts: [`127.0.0.1:${port}`],
    verifier: cachedVerifier(
      jwtVerifier({
        issuer: ISSUER,
        audience: RESOURCE,
        jwks: { keys: [config.jwk] },
        algorithms: ["ES256"],
      }),
    ),
    dpop: { policy: "allowed", algorithms: ["ES256"], iatWindowSeconds: IAT_WINDOW_SECONDS },
  });
  server.on(
    "request",
    nodeRequireBearer(gate, { scopes: ["notes:read"] }, (_req, res) => {
      res.writeHead(200, BODY_HEADERS);
      res.end(BODY);
    }),
  );
  process.send({ port });
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

/** The bare jose loop, and the in-process comparison (gate, Gatehouse's verifier, jose) on request. */
async function joseLoopChild({ proofs, inProcessProofs, token, port }) {
  const jose = await import("jose");
  const { dpopProofVerifier } = await import("../dist/shared/index.js");
  const { createResourceServer, cachedVerifier, jwtVerifier } = await import(
    "../dist/resource-server/index.js"
  );
  const verifyWithJose = async (proof) => {
    const { protectedHeader } = await jose.jwtVerify(proof, jose.EmbeddedJWK, JOSE_PROOF_OPTIONS);
    return jose.calculateJwkThumbprint(protectedHeader.jwk, "sha256");
  };
  let i = 0;
  process.on("message", async (m) => {
    if (m === "stop") process.exit(0);
    if (m.inProcess) {
      process.send(await inProcessCosts(m, inProcessProofs, token, port, verifyWithJose));
      return;
    }
    process.send(await concurrentLoop(m.loop, () => proofs[i++ % proofs.length], verifyWithJose));
  });
  process.send({ ready: true });

  async function inProcessCosts({ jwk }, list, accessToken, servedPort) {
    const gate = createResourceServer({
      resource: RESOURCE,
      authorizationServers: [ISSUER],
      allowedHosts: [`127.0.0.1:${servedPort}`],
      verifier: cachedVerifier(
        jwtVerifier({ issuer: ISSUER, audience: RESOURCE, jwks: { keys: [jwk] }, algorithms: ["ES256"] }),
      ),
      dpop: { policy: "allowed", algorithms: ["ES256"], iatWindowSeconds: IAT_WINDOW_SECONDS },
    });
    const judge = gate.judge({ scopes: ["notes:read"] });
    const verifier = dpopProofVerifier({ algorithms: ["ES256"], iatWindowSeconds: IAT_WINDOW_SECONDS });
    const url = `http://127.0.0.1:${servedPort}${PATH}`;
    const authorization = `DPoP ${accessToken}`;
    const headFor = (proof) => ({
      url: PATH,
      host: `127.0.0.1:${servedPort}`,
      method: "GET",
      requestUrl: () => url,
      header: (name) => (name === "authorization" ? authorization : name === "dpop" ? proof : null),
      hasBody: false,
      bodyText: async () => "",
    });
    const cpuPer = async (items, fn) => {
      const before = process.cpuUsage();
      for (const item of items) await fn(item);
      const cpu = process.cpuUsage(before);
      return (cpu.user + cpu.system) / items.length;
    };
    // Alternating chunks, each proof used once by each contender (three disjoint thirds).
    const third = Math.floor(list.length / 3);
    const chunk = 300;
    const sums = { gate: 0, verifier: 0, jose: 0 };
    let measured = 0;
    for (let offset = 0, round = 0; offset + chunk <= third; offset += chunk, round++) {
      const gateCost = await cpuPer(list.slice(offset, offset + chunk), async (proof) => {
        if (!(await judge(headFor(proof))).ok) throw new Error("bench proof refused by the gate");
      });
      const verifierCost = await cpuPer(list.slice(third + offset, third + offset + chunk), (proof) =>
        verifier.verify({ proof, method: "GET", url, accessToken }),
      );
      const joseCost = await cpuPer(
        list.slice(2 * third + offset, 2 * third + offset + chunk),
        verifyWithJose,
      );
      if (round === 0) continue; // warm-up
      sums.gate += gateCost;
      sums.verifier += verifierCost;
      sums.jose += joseCost;
      measured++;
    }
    return {
      gateDPoP: sums.gate / measured,
      proofVerifier: sums.verifier / measured,
      joseProofVerify: sums.jose / measured,
    };
  }
}

// ---------------------------------------------------------------- parent

function startChild(config) {
  const proc = fork(fileURLToPath(import.meta.url), ["--child"], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return childReady(proc, config, `child ${config.caseName}`);
}

const USAGE = `Usage: node bench/dpop.mjs [--json] [--seconds 5] [--rounds 5] [--connections 10] [--warmup 2] [--proofs 60000]

DPoP requests (a fresh proof each) against warm Bearer requests on one gate, and Gatehouse's proof
verifier against a bare jose proof loop. Run after npm run build.
`;

async function parent() {
  const args = process.argv.slice(2);
  const valueOptions = ["--seconds", "--rounds", "--connections", "--warmup", "--proofs"];
  if (helpOrCheckArgs(args, { valueOptions, flagOptions: ["--json"], usage: USAGE })) return;
  const json = args.includes("--json");
  const numberArg = (name, fallback) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const seconds = numberArg("--seconds", 5);
  const rounds = numberArg("--rounds", 5);
  const connections = numberArg("--connections", 10);
  const warmupSeconds = numberArg("--warmup", 2);
  const proofCount = numberArg("--proofs", 60_000);
  const log = (line) => (json ? process.stderr : process.stdout).write(`${line}\n`);

  const autocannon = (await import("autocannon")).default;
  const jose = await import("jose");
  const issuerKeys = await jose.generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await jose.exportJWK(issuerKeys.publicKey)), kid: "bench", alg: "ES256" };
  const clientKeys = await jose.generateKeyPair("ES256", { extractable: true });
  const clientJwk = await jose.exportJWK(clientKeys.publicKey);
  const jkt = await jose.calculateJwkThumbprint(clientJwk, "sha256");
  const now = Math.floor(Date.now() / 1000);
  const accessToken = (cnf) =>
    new jose.SignJWT({ sub: "bench-user", client_id: "bench-client", scope: "notes:read", ...cnf })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "bench" })
      .setIssuer(ISSUER)
      .setAudience(RESOURCE)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(issuerKeys.privateKey);
  const bearerToken = await accessToken({});
  const dpopToken = await accessToken({ cnf: { jkt } });
  // RFC 9449 §4.2: ath is the base64url SHA-256 of the access token.
  const ath = createHash("sha256").update(dpopToken, "ascii").digest("base64url");

  const server = await startChild({ caseName: "server", jwk });
  const htu = `http://127.0.0.1:${server.port}${PATH}`;
  const sign = () =>
    new jose.SignJWT({ jti: crypto.randomUUID(), htm: "GET", htu, ath })
      .setProtectedHeader({ alg: "ES256", typ: "dpop+jwt", jwk: clientJwk })
      .setIssuedAt()
      .sign(clientKeys.privateKey);
  log(`signing ${proofCount} proofs...`);
  const proofs = [];
  for (let i = 0; i < proofCount; i++) proofs.push(await sign());
  // The jose loop and the in-process comparison get proofs of their own (a proof is used once).
  const loopProofs = [];
  for (let i = 0; i < 5000; i++) loopProofs.push(await sign());
  const inProcessProofs = [];
  for (let i = 0; i < 9000; i++) inProcessProofs.push(await sign());

  let next = 0;
  const cases = {
    "bearer-warm": { headers: { authorization: `Bearer ${bearerToken}` } },
    dpop: {
      headers: { authorization: `DPoP ${dpopToken}` },
      headersFor: () => ({ dpop: proofs[next++ % proofs.length] }),
    },
  };
  const run = (c, duration) =>
    autocannon({
      url: `http://127.0.0.1:${server.port}`,
      connections,
      pipelining: 1,
      duration,
      headers: c.headers,
      requests: [
        {
          method: "GET",
          path: PATH,
          ...(c.headersFor
            ? { setupRequest: (req) => ({ ...req, headers: { ...req.headers, ...c.headersFor() } }) }
            : {}),
        },
      ],
    });
  const cpu = async () => (await ask(server.proc, "cpu", (m) => typeof m?.cpuMicros === "number")).cpuMicros;

  const perRound = { "bearer-warm": [], dpop: [], "jose-loop": [] };
  let loop;
  let inProcess;
  try {
    loop = await startChild({
      caseName: "jose-loop",
      proofs: loopProofs,
      inProcessProofs,
      token: dpopToken,
      port: server.port,
    });
    for (const c of Object.values(cases)) await run(c, warmupSeconds);
    await ask(loop.proc, { loop: 0.5 }, (m) => m?.opsPerSecond !== undefined);
    const order = Object.entries(cases);
    const roundSeconds = seconds / rounds;
    for (let round = 0; round < rounds; round++) {
      for (const [name, c] of round % 2 ? [...order].reverse() : order) {
        const before = await cpu();
        const result = await run(c, roundSeconds);
        perRound[name].push({
          requestsPerSecond: result.requests.average,
          p50Ms: result.latency.p50,
          p99Ms: result.latency.p99,
          failures: result.non2xx + result.errors + result.timeouts,
          cpuMicrosPerRequest: ((await cpu()) - before) / Math.max(1, result.requests.total),
        });
      }
      perRound["jose-loop"].push(
        await ask(loop.proc, { loop: roundSeconds }, (m) => m?.opsPerSecond !== undefined),
      );
      log(
        `round ${round + 1}/${rounds}: ${Object.entries(perRound)
          .map(([n, r]) => `${n} ${Math.round(r.at(-1).requestsPerSecond ?? r.at(-1).opsPerSecond)}`)
          .join(", ")}`,
      );
    }
    inProcess = await ask(loop.proc, { inProcess: true, jwk }, (m) => m?.gateDPoP !== undefined);
  } finally {
    server.proc.send("stop");
    loop?.proc.send("stop");
  }

  const results = {};
  for (const name of Object.keys(cases)) {
    const r = perRound[name];
    results[name] = {
      requestsPerSecond: Math.round(median(r.map((x) => x.requestsPerSecond))),
      p50Ms: median(r.map((x) => x.p50Ms)),
      p99Ms: median(r.map((x) => x.p99Ms)),
      cpuMicrosPerRequest: round1(median(r.map((x) => x.cpuMicrosPerRequest))),
      failures: r.reduce((a, x) => a + x.failures, 0),
      rounds: r.map((x) => Math.round(x.requestsPerSecond)),
    };
  }
  results["jose-loop"] = loopSummary(perRound["jose-loop"]);
  const cpuOf = (name) => results[name].cpuMicrosPerRequest ?? results[name].cpuMicrosPerOp;
  const comparisons = [
    ["dpopVsBearerWarm", "dpop / bearer-warm", "dpop", "bearer-warm"],
    ["dpopVsJoseLoop", "dpop (HTTP) / bare jose proof loop", "dpop", "jose-loop"],
  ];
  const ratios = {};
  const cpuRatios = {};
  for (const [name, , a, b] of comparisons) {
    ratios[name] = roundRatio(perRound, a, b);
    cpuRatios[name] = round3(cpuOf(b) / cpuOf(a));
  }
  const inProcessRatios = {
    joseVsProofVerifier: round3(inProcess.joseProofVerify / inProcess.proofVerifier),
    joseVsGateDPoP: round3(inProcess.joseProofVerify / inProcess.gateDPoP),
  };
  const wrapped = next > proofs.length;

  log("");
  log("case              req/s    p50 ms  p99 ms  server CPU µs/req  failures");
  for (const [name, r] of Object.entries(results)) {
    if (r.opsPerSecond !== undefined) {
      log(
        `${name.padEnd(16)}${String(r.opsPerSecond).padStart(7)}  (verifications/s, no HTTP)   ${String(r.cpuMicrosPerOp).padStart(6)} µs/verify`,
      );
    } else {
      log(
        `${name.padEnd(16)}${String(r.requestsPerSecond).padStart(7)}  ${String(r.p50Ms).padStart(6)}  ${String(r.p99Ms).padStart(6)}  ${String(r.cpuMicrosPerRequest).padStart(17)}  ${r.failures}`,
      );
    }
  }
  log("");
  log("ratio                                   by req/s  by CPU");
  for (const [name, label] of comparisons) {
    log(`${label.padEnd(40)}${String(ratios[name]).padEnd(10)}${cpuRatios[name]}`);
  }
  log("");
  log(
    `in-process CPU (no HTTP): gate DPoP request ${inProcess.gateDPoP.toFixed(1)} µs; Gatehouse proof verifier ${inProcess.proofVerifier.toFixed(1)} µs; bare jose proof verify + thumbprint ${inProcess.joseProofVerify.toFixed(1)} µs; jose / verifier = ${inProcessRatios.joseVsProofVerifier}, jose / gate = ${inProcessRatios.joseVsGateDPoP}`,
  );
  if (wrapped)
    log("note: the proof list wrapped: reused proofs were refused as replays (counted as failures)");
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ seconds, rounds, connections, proofs: proofCount, wrapped, results, ratios, cpuRatios, inProcess, inProcessRatios })}\n`,
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
