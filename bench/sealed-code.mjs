#!/usr/bin/env node
/**
 * Sealed-code benchmark (issue 25, "a cheaper sealed code"): what sealing and opening an
 * authorization code costs in process, in the build under test against a baseline build, in one
 * run, and how long the codes are.
 *
 * Every round measures, for each build (the order alternating per round): `seal` of a realistic
 * record N times, and `open` of one of its codes N times, as µs per operation; the summary is the
 * median over rounds of each figure and of the per-round ratio build / baseline (< 1 is cheaper).
 * The build under test also opens the baseline's codes ("open base code"): after an upgrade the
 * codes sealed by the old build in the last minute must still open.
 *
 * Two records: "cimd" (a URL client id, an https redirect, three scopes, a DPoP key, what an MCP
 * client with a Client ID Metadata Document sends) and "dcr" (a registered random client id, a
 * loopback redirect, one scope, no DPoP).
 *
 * Then the parts of the format-1 recipe (JSON positional array, AES-256-GCM with the cached hour
 * key, base64url), each timed on its own in this process, to say what takes the time; and the HKDF
 * of an hour key, which the sealer caches (once per hour and KEK), timed to show what the cache saves.
 *
 *   node bench/sealed-code.mjs [--ops 20000] [--rounds 7] [--dist build] [--base build] [--json]
 *
 * --dist (or BENCH_DIST; default dist/) is the build under test, --base (or BENCH_BASE; default
 * .cache/dist-base) the baseline; both must be builds of this checkout (`npm run build`, or
 * `git archive` of a commit built with tsc). Both sealers get the same key and issuer.
 */
import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { helpOrCheckArgs, median, round3 } from "./lib.mjs";

const USAGE = `node bench/sealed-code.mjs [--ops 20000] [--rounds 7] [--dist build] [--base build] [--json]
`;
const args = process.argv.slice(2);
if (
  helpOrCheckArgs(args, {
    valueOptions: ["--ops", "--rounds", "--dist", "--base"],
    flagOptions: ["--json"],
    usage: USAGE,
  })
) {
  process.exit(0);
}
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const value = (name) => {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
};
const OPS = Number(value("--ops") ?? 20_000);
const ROUNDS = Number(value("--rounds") ?? 7);
const JSON_OUT = args.includes("--json");
const BUILDS = {
  base: resolvePath(value("--base") ?? process.env.BENCH_BASE ?? `${ROOT}.cache/dist-base`),
  dist: resolvePath(value("--dist") ?? process.env.BENCH_DIST ?? `${ROOT}dist`),
};

const ISSUER = "https://auth.example.com";
const KEK = randomBytes(32).toString("base64url");
const NOW = Date.now();
const b64 = (n) => randomBytes(n).toString("base64url");
const RECORDS = {
  cimd: {
    grantId: NOW.toString(36).padStart(9, "0") + b64(16),
    clientId: "https://app.example.com/.well-known/oauth-client.json",
    userId: b64(16),
    redirectUri: "https://app.example.com/oauth/callback",
    redirectUriSent: true,
    scopes: ["notes:read", "notes:write", "offline_access"],
    resource: "https://notes.example.com/mcp",
    codeChallenge: b64(32),
    codeChallengeMethod: "S256",
    refreshAllowed: true,
    sessionHash: b64(32),
    dpopJkt: b64(32),
    createdAt: NOW,
    expiresAt: NOW + 60_000,
  },
  dcr: {
    grantId: NOW.toString(36).padStart(9, "0") + b64(16),
    clientId: b64(16),
    userId: b64(16),
    redirectUri: "http://127.0.0.1:33418/callback",
    redirectUriSent: true,
    scopes: ["notes:read"],
    resource: "https://notes.example.com/mcp",
    codeChallenge: b64(32),
    codeChallengeMethod: "S256",
    refreshAllowed: false,
    sessionHash: b64(32),
    createdAt: NOW,
    expiresAt: NOW + 60_000,
  },
};

/** µs per call of `f` over `n` calls, after a warm-up of n/10. */
function time(n, f) {
  for (let i = 0; i < n / 10; i++) f(i);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f(i);
  return Number(process.hrtime.bigint() - t0) / 1e3 / n;
}

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(" ");
const loadBefore = load();
const sealers = {};
for (const [name, dir] of Object.entries(BUILDS)) {
  const { createCodeSealer } = await import(`${dir}/authorization-server/grants/sealed-code.js`);
  sealers[name] = createCodeSealer(ISSUER, [KEK]);
}
const names = Object.keys(BUILDS);

// Each build opens its own code; the build under test also opens the baseline's.
const codes = {};
for (const [r, record] of Object.entries(RECORDS)) {
  for (const b of names) {
    codes[`${b}.${r}`] = sealers[b].seal(record);
    if (!isDeepStrictEqual(sealers[b].open(codes[`${b}.${r}`], NOW), record)) {
      throw new Error(`${b} does not open its ${r} code to the record`);
    }
  }
  if (!isDeepStrictEqual(sealers.dist.open(codes[`base.${r}`], NOW), record)) {
    throw new Error(`the build under test does not open the baseline's ${r} code`);
  }
}

const cases = [];
for (const r of Object.keys(RECORDS)) {
  for (const op of ["seal", "open"]) cases.push({ r, op });
  cases.push({ r, op: "open base code" });
}
const perRound = [];
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? names : [...names].reverse();
  const figures = {};
  for (const { r, op } of cases) {
    for (const b of order) {
      const sealer = sealers[b];
      const record = RECORDS[r];
      const code = op === "open base code" ? codes[`base.${r}`] : codes[`${b}.${r}`];
      figures[`${b}|${r}|${op}`] =
        op === "seal" ? time(OPS, () => sealer.seal(record)) : time(OPS, () => sealer.open(code, NOW));
    }
  }
  perRound.push(figures);
}

const rows = cases.map(({ r, op }) => {
  const base = median(perRound.map((f) => f[`base|${r}|${op}`]));
  const dist = median(perRound.map((f) => f[`dist|${r}|${op}`]));
  const ratio = median(perRound.map((f) => f[`dist|${r}|${op}`] / f[`base|${r}|${op}`]));
  return { record: r, op, baseUs: round3(base), distUs: round3(dist), ratio: round3(ratio) };
});
const lengths = Object.keys(RECORDS).map((r) => ({
  record: r,
  base: codes[`base.${r}`].length,
  dist: codes[`dist.${r}`].length,
}));

// The parts of the format-1 recipe, on the cimd record.
const rec = RECORDS.cimd;
const positional = () =>
  JSON.stringify([
    1,
    rec.grantId,
    rec.clientId,
    rec.userId,
    rec.redirectUri,
    1,
    rec.scopes,
    rec.resource,
    rec.codeChallenge,
    1,
    rec.sessionHash,
    rec.dpopJkt,
    rec.createdAt,
    rec.expiresAt,
  ]);
const plaintext = Buffer.from(positional());
const codeKey = Buffer.from(hkdfSync("sha256", randomBytes(32), "", "label", 32));
const hourKey = createSecretKey(Buffer.from(hkdfSync("sha256", codeKey, "", "hour x", 32)));
const aad = Buffer.from("gatehouse authorization code v1");
const nonce = randomBytes(12);
const gcmSeal = () => {
  const c = createCipheriv("aes-256-gcm", hourKey, nonce, { authTagLength: 16 });
  c.setAAD(aad);
  return Buffer.concat([nonce, c.update(plaintext), c.final(), c.getAuthTag()]);
};
const body = gcmSeal();
const text = body.toString("base64url");
const parts = {
  "JSON.stringify + Buffer.from": () => Buffer.from(positional()),
  "toString + JSON.parse": () => JSON.parse(plaintext.toString("utf8")),
  "createCipheriv alone": () => createCipheriv("aes-256-gcm", hourKey, nonce, { authTagLength: 16 }),
  "GCM seal (cipher, AAD, update, final, tag, concat)": gcmSeal,
  "GCM open (decipher, AAD, tag, update, final, concat)": () => {
    const d = createDecipheriv("aes-256-gcm", hourKey, body.subarray(0, 12), { authTagLength: 16 });
    d.setAAD(aad);
    d.setAuthTag(body.subarray(body.length - 16));
    return Buffer.concat([d.update(body.subarray(12, body.length - 16)), d.final()]);
  },
  "base64url encode of the body": () => body.toString("base64url"),
  "base64url decode of the body": () => Buffer.from(text, "base64url"),
  "alphabet regex over the body": () => /^[A-Za-z0-9_-]+$/.test(text),
  "HKDF of an hour key (cached: once an hour)": () =>
    createSecretKey(Buffer.from(hkdfSync("sha256", codeKey, "", "hour y", 32))),
};
const partRows = Object.entries(parts).map(([part, f]) => ({
  part,
  us: round3(median(Array.from({ length: 3 }, () => time(Math.max(1000, OPS / 4), f)))),
}));
const loadAfter = load();

const result = {
  ops: OPS,
  rounds: ROUNDS,
  builds: BUILDS,
  load: { before: loadBefore, after: loadAfter },
  rows,
  lengths,
  plaintextBytesFormat1: plaintext.length,
  parts: partRows,
};
if (JSON_OUT) {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} else {
  const out = [];
  out.push(`sealed codes, ${OPS} ops x ${ROUNDS} rounds; load ${loadBefore} -> ${loadAfter}`);
  out.push(`base ${BUILDS.base}`);
  out.push(`dist ${BUILDS.dist}`);
  out.push("");
  out.push(
    `${"record".padEnd(7)}${"op".padEnd(16)}${"base us".padStart(10)}${"dist us".padStart(10)}${"dist/base".padStart(11)}`,
  );
  for (const r of rows) {
    out.push(
      `${r.record.padEnd(7)}${r.op.padEnd(16)}${r.baseUs.toFixed(2).padStart(10)}${r.distUs.toFixed(2).padStart(10)}${r.ratio.toFixed(2).padStart(11)}`,
    );
  }
  out.push("");
  out.push("code length (characters)");
  for (const l of lengths) out.push(`${l.record.padEnd(7)}base ${l.base}  dist ${l.dist}`);
  out.push("");
  out.push(`format-1 parts (cimd record, ${plaintext.length}-byte JSON plaintext), us each`);
  for (const p of partRows) out.push(`${p.part.padEnd(54)}${p.us.toFixed(3).padStart(8)}`);
  process.stdout.write(`${out.join("\n")}\n`);
}
