// Client benchmark: HTTP round trips (counted on the servers) and wall time from the first 401 to
// the first authorized response, cold (nothing cached) and warm (metadata and registration
// cached, no token), for Gatehouse's createAuthFetch and the MCP SDK client's auth().
// Usage: node bench/client.mjs [--json] [--runs N] [--sdk-first] [--trace]
// Both contenders get one untimed warm-up pass first; --sdk-first swaps the measuring order (to
// see order effects); --trace prints the gap before each request the servers receive.
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { auth } from "@modelcontextprotocol/sdk/client/auth.js";
import { AuthClient, MemoryTokenStore } from "../dist/client/index.js";

const json = process.argv.includes("--json");
const runsArg = process.argv.indexOf("--runs");
let runs = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 20;

const trace = process.argv.includes("--trace");
const order = process.argv.includes("--sdk-first") ? "sdk-first" : "gatehouse-first";

function startServers() {
  let count = 0;
  let last = 0;
  let base = "";
  const codes = new Map();
  const tokens = new Set();
  const server = createServer(async (req, res) => {
    count++;
    const url = new URL(req.url, base);
    if (trace) {
      const now = performance.now();
      console.error(`  +${(now - (last || now)).toFixed(2)} ms ${req.method} ${url.pathname}`);
      last = now;
    }
    let body = "";
    for await (const c of req) body += c;
    const send = (s, v, h = {}) =>
      res.writeHead(s, { "content-type": "application/json", ...h }).end(JSON.stringify(v));
    const prm = `${base}/.well-known/oauth-protected-resource/mcp`;
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp")
      return send(200, {
        resource: `${base}/mcp`,
        authorization_servers: [base],
        scopes_supported: ["read"],
      });
    if (url.pathname === "/.well-known/oauth-authorization-server")
      return send(200, {
        issuer: base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        registration_endpoint: `${base}/register`,
        response_types_supported: ["code"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        authorization_response_iss_parameter_supported: true,
      });
    if (url.pathname === "/register")
      return send(201, { client_id: `c-${count}`, token_endpoint_auth_method: "none", ...JSON.parse(body) });
    if (url.pathname === "/authorize") {
      const code = `code-${count}`;
      codes.set(code, url.searchParams.get("code_challenge"));
      const to = new URL(url.searchParams.get("redirect_uri"));
      to.searchParams.set("code", code);
      to.searchParams.set("state", url.searchParams.get("state") ?? "");
      to.searchParams.set("iss", base);
      return res.writeHead(302, { location: to.href }).end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(body);
      const challenge = codes.get(form.get("code"));
      const ok =
        challenge &&
        createHash("sha256")
          .update(form.get("code_verifier") ?? "")
          .digest("base64url") === challenge;
      if (!ok) return send(400, { error: "invalid_grant" });
      const t = `at-${count}`;
      tokens.add(t);
      return send(200, { access_token: t, token_type: "Bearer", expires_in: 3600 });
    }
    if (url.pathname === "/mcp") {
      const t = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      if (!tokens.has(t))
        return res
          .writeHead(401, { "www-authenticate": `Bearer resource_metadata="${prm}", scope="read"` })
          .end();
      return send(200, { ok: true });
    }
    send(404, {});
  });
  return new Promise((r) =>
    server.listen(0, "127.0.0.1", () => {
      base = `http://127.0.0.1:${server.address().port}`;
      r({
        base,
        count: () => count,
        reset: () => {
          count = 0;
          last = 0;
          tokens.clear();
        },
        close: () =>
          new Promise((c) => {
            server.closeAllConnections();
            server.close(c);
          }),
      });
    }),
  );
}

async function follow(url) {
  const r = await fetch(url, { redirect: "manual" });
  await r.body?.cancel();
  return r.headers.get("location");
}

async function gatehouse(s, store) {
  const client = new AuthClient({ store, redirectUri: "http://127.0.0.1:9/cb", userAgent: follow });
  const r = await client.fetch(`${s.base}/mcp`);
  if (r.status !== 200) throw new Error(`gatehouse: ${r.status}`);
}

function sdkProvider(state) {
  return {
    get redirectUrl() {
      return "http://127.0.0.1:9/cb";
    },
    get clientMetadata() {
      return {
        client_name: "bench",
        redirect_uris: ["http://127.0.0.1:9/cb"],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      };
    },
    clientInformation: () => state.client,
    saveClientInformation: (c) => {
      state.client = c;
    },
    tokens: () => state.tokens,
    saveTokens: (t) => {
      state.tokens = t;
    },
    redirectToAuthorization: (u) => {
      state.authUrl = u;
    },
    saveCodeVerifier: (v) => {
      state.verifier = v;
    },
    codeVerifier: () => state.verifier,
    state: () => "bench-state",
  };
}

async function sdk(s, state) {
  // The same sequence an SDK client runs: request → 401 → auth() → user agent → auth(code) → retry.
  const first = await fetch(`${s.base}/mcp`);
  await first.body?.cancel();
  const provider = sdkProvider(state);
  const www = first.headers.get("www-authenticate") ?? "";
  const resourceMetadataUrl = new URL(/resource_metadata="([^"]+)"/.exec(www)[1]);
  const result = await auth(provider, { serverUrl: `${s.base}/mcp`, resourceMetadataUrl, scope: "read" });
  if (result !== "REDIRECT") throw new Error(`sdk: ${result}`);
  const code = new URL(await follow(state.authUrl)).searchParams.get("code");
  await auth(provider, { serverUrl: `${s.base}/mcp`, resourceMetadataUrl, authorizationCode: code });
  const r = await fetch(`${s.base}/mcp`, {
    headers: { authorization: `Bearer ${state.tokens.access_token}` },
  });
  if (r.status !== 200) throw new Error(`sdk retry: ${r.status}`);
  await r.body?.cancel();
}

async function measure(name, prepare, run) {
  const out = { cold: { roundTrips: [], ms: [] }, warm: { roundTrips: [], ms: [] } };
  for (let i = 0; i < runs; i++) {
    const s = await startServers();
    const ctx = prepare();
    for (const phase of ["cold", "warm"]) {
      s.reset();
      if (phase === "warm") await ctx.forgetTokens();
      if (trace) console.error(`${name} ${phase}`);
      const t0 = performance.now();
      await run(s, ctx.value);
      out[phase].ms.push(performance.now() - t0);
      out[phase].roundTrips.push(s.count());
    }
    await s.close();
  }
  const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return {
    name,
    cold: { roundTrips: median(out.cold.roundTrips), medianMs: +median(out.cold.ms).toFixed(2) },
    warm: { roundTrips: median(out.warm.roundTrips), medianMs: +median(out.warm.ms).toFixed(2) },
  };
}

const contenders = [
  () =>
    measure(
      "gatehouse createAuthFetch",
      () => {
        const store = new MemoryTokenStore();
        return {
          value: store,
          forgetTokens: async () => {
            for (const [k] of await store.list("tokens")) await store.delete("tokens", k);
          },
        };
      },
      gatehouse,
    ),
  () =>
    measure(
      "@modelcontextprotocol/sdk auth()",
      () => {
        const state = {};
        return {
          value: state,
          forgetTokens: () => {
            state.tokens = undefined;
          },
        };
      },
      sdk,
    ),
];
// Warm-up: one untimed pass of each, so neither pays for loading and compiling the HTTP stack
// (undici, crypto) on its first measured run, whichever goes first.
const measuredRuns = runs;
runs = 1;
for (const c of contenders) await c();
runs = measuredRuns;
const results = [];
for (const c of order === "sdk-first" ? [...contenders].reverse() : contenders) results.push(await c());
if (order === "sdk-first") results.reverse();
const summary = {
  runs,
  note: "round trips counted on the local servers from the first request (401) to the first 200; the user agent's hop to /authorize counts as one. Warm = metadata and registration cached, no token. Spec minimum: cold 7 (401, PRM, AS metadata, register, authorize, token, retry), warm 4 when metadata is cached (401, authorize, token, retry).",
  results,
};
if (!json)
  for (const r of results)
    console.log(
      `${r.name}: cold ${r.cold.roundTrips} round trips ${r.cold.medianMs} ms; warm ${r.warm.roundTrips} round trips ${r.warm.medianMs} ms`,
    );
console.log(JSON.stringify(summary));
