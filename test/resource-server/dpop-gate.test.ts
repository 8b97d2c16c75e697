import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateSecret } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDPoPKey, DPoPSigner } from "../../src/client/protocol/dpop.js";
import { listen } from "../../src/http/node.js";
import {
  type AuthInfo,
  createResourceServer,
  introspectionVerifier,
  jwtVerifier,
  type ResourceServer,
  type ResourceServerOptions,
} from "../../src/resource-server/index.js";
import { memoryReplayGuard, storeReplayGuard } from "../../src/shared/dpop-proof.js";
import { type Challenge, parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../storage/postgres-support.js";
import { craftProof, type ProofKey, proofKey, unsignedProof } from "./dpop-support.js";
import { startIssuer, type TestIssuer } from "./fixtures.js";

const RESOURCE = "https://mcp.example.com";
const URL_ = `${RESOURCE}/notes`;
const RM = `${RESOURCE}/.well-known/oauth-protected-resource`;

let issuer: TestIssuer;
let key: ProofKey;
beforeAll(async () => {
  issuer = await startIssuer();
  key = await proofKey();
});
afterAll(async () => {
  await issuer.close();
});

function gateWith(dpop: ResourceServerOptions["dpop"], extra: Partial<ResourceServerOptions> = {}) {
  return createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    scopesSupported: ["notes:read", "notes:write"],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwks: { keys: [issuer.publicJwk] } }),
    dpop,
    ...extra,
  });
}

/** A DPoP-bound token (cnf.jkt, RFC 9449 §6.1) for `bound`, or an unbound one. */
function token(bound: ProofKey | null = key, scope = "notes:read"): Promise<string> {
  return issuer.sign({ aud: RESOURCE, sub: "alice", scope, ...(bound ? { cnf: { jkt: bound.jkt } } : {}) });
}

interface Answer {
  status: number;
  challenges: Challenge[];
  /** The challenge of one scheme, by lowercase name. */
  scheme(name: string): Challenge | undefined;
  headers: Headers;
  auth?: AuthInfo;
}

async function call(
  gate: ResourceServer,
  headers: [string, string][],
  init: { method?: string; url?: string; scopes?: string[] } = {},
): Promise<Answer> {
  const h = new Headers();
  for (const [name, value] of headers) h.append(name, value);
  const request = new Request(init.url ?? URL_, { method: init.method ?? "GET", headers: h });
  let auth: AuthInfo | undefined;
  const response = await gate.requireBearer({ scopes: init.scopes ?? ["notes:read"] })(
    request,
    async (_r, a) => {
      auth = a;
      return new Response("ok");
    },
  );
  const challenges = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
  return {
    status: response.status,
    challenges,
    scheme: (name) => challenges.find((c) => c.scheme.toLowerCase() === name),
    headers: response.headers,
    auth,
  };
}

async function dpopCall(
  gate: ResourceServer,
  accessToken: string,
  proof: string | string[],
  init: { method?: string; url?: string; scopes?: string[] } = {},
): Promise<Answer> {
  const proofs = Array.isArray(proof) ? proof : [proof];
  return call(
    gate,
    [["authorization", `DPoP ${accessToken}`], ...proofs.map((p): [string, string] => ["dpop", p])],
    init,
  );
}

/** A refusal whose error is in the DPoP challenge, which names the accepted algorithms. */
function expectDPoPError(answer: Answer, error: string, status = 401) {
  expect(answer.status).toBe(status);
  expect(answer.auth).toBeUndefined();
  const dpop = answer.scheme("dpop");
  expect(dpop?.params.error).toBe(error);
  expect(dpop?.params.algs).toBe("ES256 EdDSA RS256 PS256");
  expect(dpop?.params.resource_metadata).toBe(RM);
  expect(answer.scheme("bearer")?.params.error).toBeUndefined();
}

describe("DPoP at the gate, policy allowed: hostile requests", () => {
  const gate = () => gateWith({ policy: "allowed" });

  it("refuses the DPoP scheme without a proof", async () => {
    const at = await token();
    expectDPoPError(await call(gate(), [["authorization", `DPoP ${at}`]]), "invalid_dpop_proof");
  });

  it("refuses two DPoP header fields", async () => {
    const at = await token();
    const g = gate();
    const answer = await dpopCall(g, at, [
      await craftProof(key, { url: URL_, accessToken: at }),
      await craftProof(key, { url: URL_, accessToken: at }),
    ]);
    expectDPoPError(answer, "invalid_dpop_proof");
  });

  it("refuses a proof for another method or another URL", async () => {
    const at = await token();
    const g = gate();
    expectDPoPError(
      await dpopCall(g, at, await craftProof(key, { method: "POST", url: URL_, accessToken: at })),
      "invalid_dpop_proof",
    );
    expectDPoPError(
      await dpopCall(g, at, await craftProof(key, { url: `${RESOURCE}/other`, accessToken: at })),
      "invalid_dpop_proof",
    );
    expectDPoPError(
      await dpopCall(
        g,
        at,
        await craftProof(key, { url: "https://evil.example.com/notes", accessToken: at }),
      ),
      "invalid_dpop_proof",
    );
  });

  it("refuses a stale and a future iat", async () => {
    const at = await token();
    const now = Math.floor(Date.now() / 1000);
    const g = gate();
    for (const iat of [now - 600, now + 600]) {
      const proof = await craftProof(key, { url: URL_, accessToken: at, claims: { iat } });
      expectDPoPError(await dpopCall(g, at, proof), "invalid_dpop_proof");
    }
  });

  it("refuses a replayed proof at the same gate", async () => {
    const at = await token();
    const g = gate();
    const proof = await craftProof(key, { url: URL_, accessToken: at });
    expect((await dpopCall(g, at, proof)).status).toBe(200);
    expectDPoPError(await dpopCall(g, at, proof), "invalid_dpop_proof");
  });

  it("refuses a replay at a second gate instance sharing a store-backed guard, or a shared guard object", async () => {
    const at = await token();
    const store = createMemoryStore();
    const shared = memoryReplayGuard();
    for (const replayGuard of [storeReplayGuard(store), shared]) {
      const a = gateWith({ policy: "allowed", replayGuard });
      const b = gateWith({ policy: "allowed", replayGuard });
      const proof = await craftProof(key, { url: URL_, accessToken: at });
      expect((await dpopCall(a, at, proof)).status).toBe(200);
      expectDPoPError(await dpopCall(b, at, proof), "invalid_dpop_proof");
    }
  });

  /** Two gates, each on its own connection to one database (as two processes would be). */
  async function replayAcross(first: AuthorizationStore, second: AuthorizationStore) {
    await first.migrate();
    await second.migrate();
    const a = gateWith({ policy: "required", replayGuard: storeReplayGuard(first) });
    const b = gateWith({ policy: "required", replayGuard: storeReplayGuard(second) });
    const at = await token();
    const proof = await craftProof(key, { url: URL_, accessToken: at });
    expect((await dpopCall(b, at, proof)).status).toBe(200);
    expectDPoPError(await dpopCall(a, at, proof), "invalid_dpop_proof");
    // Concurrent first uses of one proof at both instances: exactly one is admitted.
    const raced = await craftProof(key, { url: URL_, accessToken: at });
    const answers = await Promise.all([dpopCall(a, at, raced), dpopCall(b, at, raced)]);
    expect(answers.map((x) => x.status).sort()).toEqual([200, 401]);
  }

  it("refuses a replay at a second instance on its own SQLite connection to the same file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gatehouse-dpop-replay-"));
    const path = join(dir, "gatehouse.sqlite");
    const first = createSqliteStore({ path });
    const second = createSqliteStore({ path });
    try {
      await replayAcross(first, second);
    } finally {
      await first.close();
      await second.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a replay at a second instance on its own PostgreSQL pool, same schema", async () => {
    await requirePostgres();
    const schemas = schemaNamer("dpop_replay");
    const schema = schemas.next();
    const first = createPostgresStore({ connectionString: POSTGRES_URL, schema });
    const second = createPostgresStore({ connectionString: POSTGRES_URL, schema });
    try {
      await replayAcross(first, second);
    } finally {
      await first.close();
      await second.close();
      await schemas.dropSchemas();
    }
  });

  it("answers 503 without a challenge when the replay guard cannot answer (the proof was not judged)", async () => {
    const g = gateWith({
      policy: "allowed",
      replayGuard: async () => {
        throw new Error("store down");
      },
    });
    const at = await token();
    const answer = await dpopCall(g, at, await craftProof(key, { url: URL_, accessToken: at }));
    expect(answer.status).toBe(503);
    expect(answer.headers.get("retry-after")).toBe("5");
    expect(answer.challenges).toEqual([]);
  });

  it("refuses a proof whose ath is another token's, or missing", async () => {
    const at = await token();
    const other = await token();
    const g = gate();
    expectDPoPError(
      await dpopCall(g, at, await craftProof(key, { url: URL_, accessToken: other })),
      "invalid_dpop_proof",
    );
    expectDPoPError(await dpopCall(g, at, await craftProof(key, { url: URL_ })), "invalid_dpop_proof");
  });

  it("refuses a proof by another key than the token's cnf.jkt with invalid_token (RFC 9449 §7.1)", async () => {
    const at = await token(key);
    const thief = await proofKey();
    const g = gate();
    const proof = await craftProof(thief, { url: URL_, accessToken: at });
    expectDPoPError(await dpopCall(g, at, proof), "invalid_token");
    // The thief's refused proof was not recorded: a mismatch cannot fill the replay guard.
  });

  it("refuses alg none, HS256, alg confusion and a private key in the jwk header", async () => {
    const at = await token();
    const g = gate();
    const iat = Math.floor(Date.now() / 1000);
    const claims = { jti: "n1", htm: "GET", htu: URL_, iat };
    expectDPoPError(await dpopCall(g, at, unsignedProof(key, claims)), "invalid_dpop_proof");
    const hs = await craftProof(key, {
      url: URL_,
      accessToken: at,
      alg: "HS256",
      signingKey: await generateSecret("HS256"),
    });
    expectDPoPError(await dpopCall(g, at, hs), "invalid_dpop_proof");
    const rsa = await proofKey("RS256");
    const confused = await craftProof(rsa, { url: URL_, accessToken: at, header: { jwk: key.publicJwk } });
    expectDPoPError(await dpopCall(g, at, confused), "invalid_dpop_proof");
    const leaky = await craftProof(key, { url: URL_, accessToken: at, header: { jwk: key.privateJwk } });
    expectDPoPError(await dpopCall(g, at, leaky), "invalid_dpop_proof");
  });

  it("refuses a DPoP-bound token sent as Bearer (RFC 9449 §7.2), with the error in the Bearer challenge", async () => {
    const at = await token();
    const answer = await call(gate(), [["authorization", `Bearer ${at}`]]);
    expect(answer.status).toBe(401);
    expect(answer.scheme("bearer")?.params.error).toBe("invalid_token");
    expect(answer.scheme("dpop")?.params.algs).toBe("ES256 EdDSA RS256 PS256");
    expect(answer.scheme("dpop")?.params.error).toBeUndefined();
  });

  it("refuses an unbound token sent with the DPoP scheme", async () => {
    const at = await token(null);
    const proof = await craftProof(key, { url: URL_, accessToken: at });
    expectDPoPError(await dpopCall(gate(), at, proof), "invalid_token");
  });

  it("refuses a malformed cnf claim", async () => {
    const at = await issuer.sign({ aud: RESOURCE, scope: "notes:read", cnf: { jkt: "short" } });
    const answer = await dpopCall(gate(), at, await craftProof(key, { url: URL_, accessToken: at }));
    expectDPoPError(answer, "invalid_token");
  });

  it("never echoes the token or the proof in the answer", async () => {
    const at = await token();
    const proof = await craftProof(key, { url: URL_, accessToken: at, method: "POST" });
    const answer = await dpopCall(gate(), at, proof);
    const text = [...answer.headers.values()].join("\n");
    expect(text).not.toContain(at);
    expect(text).not.toContain(proof);
  });
});

describe("DPoP at the gate, policy allowed: accepted requests", () => {
  it("takes a bound token with a valid proof (jose signer), and says it was sender-constrained", async () => {
    const at = await token();
    const answer = await dpopCall(
      gateWith({ policy: "allowed" }),
      at,
      await craftProof(key, { url: `${URL_}?q=1`, accessToken: at }),
      {
        url: `${URL_}?q=1`,
      },
    );
    expect(answer.status).toBe(200);
    expect(answer.auth?.dpopJkt).toBe(key.jkt);
    expect(answer.auth?.subject).toBe("alice");
  });

  it("takes proofs from Gatehouse's own client signer, request after request", async () => {
    const signer = new DPoPSigner(await createDPoPKey(issuer.issuer, "client-1"));
    const jkt = await signer.thumbprint();
    const at = await issuer.sign({ aud: RESOURCE, scope: "notes:read", cnf: { jkt } });
    const g = gateWith({ policy: "allowed" });
    for (let i = 0; i < 3; i++) {
      const answer = await dpopCall(g, at, await signer.proof("GET", URL_, at));
      expect(answer.status).toBe(200);
      expect(answer.auth?.dpopJkt).toBe(jkt);
    }
  });

  it("still takes unbound bearer tokens; the 401 offers both schemes", async () => {
    const g = gateWith({ policy: "allowed" });
    const ok = await call(g, [["authorization", `Bearer ${await token(null)}`]]);
    expect(ok.status).toBe(200);
    expect(ok.auth?.dpopJkt).toBeUndefined();
    const none = await call(g, []);
    expect(none.status).toBe(401);
    expect(none.challenges.map((c) => c.scheme)).toEqual(["Bearer", "DPoP"]);
    expect(none.scheme("bearer")?.params).toEqual({ resource_metadata: RM, scope: "notes:read" });
    expect(none.scheme("dpop")?.params.algs).toBe("ES256 EdDSA RS256 PS256");
    expect(none.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate, DPoP-Nonce");
  });

  it("advertises the algorithms in its metadata, without requiring bound tokens", () => {
    const g = gateWith({ policy: "allowed", algorithms: ["ES256"] });
    expect(g.metadata.dpop_signing_alg_values_supported).toEqual(["ES256"]);
    expect(g.metadata.dpop_bound_access_tokens_required).toBeUndefined();
  });

  it.each(["2026-07-28", "2025-11-25"] as const)(
    "answers too few scopes on a DPoP request with a DPoP insufficient_scope challenge (%s)",
    async (revision) => {
      const at = await token(key, "notes:read");
      const g = gateWith({ policy: "allowed" }, { revision });
      const answer = await dpopCall(g, at, await craftProof(key, { url: URL_, accessToken: at }), {
        scopes: ["notes:write"],
      });
      expectDPoPError(answer, "insufficient_scope", 403);
      // 2026-07-28 lists what is needed; 2025-11-25 also repeats the relevant granted scopes.
      expect(answer.scheme("dpop")?.params.scope).toBe(
        revision === "2026-07-28" ? "notes:write" : "notes:write notes:read",
      );
    },
  );
});

describe("DPoP through authenticate and challengeResponse", () => {
  it("verifies the proof in authenticate, and answers in the scheme the request used", async () => {
    const g = gateWith({ policy: "allowed" });
    const at = await token();
    const good = new Request(URL_, {
      headers: { authorization: `DPoP ${at}`, dpop: await craftProof(key, { url: URL_, accessToken: at }) },
    });
    await expect(g.authenticate(good, ["notes:read"])).resolves.toMatchObject({ dpopJkt: key.jkt });
    const stolen = new Request(URL_, {
      headers: {
        authorization: `DPoP ${at}`,
        dpop: await craftProof(await proofKey(), { url: URL_, accessToken: at }),
      },
    });
    const error = await g.authenticate(stolen, ["notes:read"]).catch((e: unknown) => e);
    const response = g.challengeResponse(error, ["notes:read"], stolen);
    expect(response.status).toBe(401);
    const challenges = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenges.map((c) => [c.scheme, c.params.error])).toEqual([
      ["DPoP", "invalid_token"],
      ["Bearer", undefined],
    ]);
  });
});

describe("DPoP at the gate, policy required", () => {
  const gate = () => gateWith({ policy: "required" });

  it("refuses a bearer token with invalid_token in a DPoP-only challenge", async () => {
    const answer = await call(gate(), [["authorization", `Bearer ${await token(null)}`]]);
    expect(answer.status).toBe(401);
    expect(answer.challenges.map((c) => c.scheme)).toEqual(["DPoP"]);
    expect(answer.scheme("dpop")?.params.error).toBe("invalid_token");
  });

  it("challenges a request without credentials with DPoP only, naming the metadata and scopes", async () => {
    const answer = await call(gate(), []);
    expect(answer.status).toBe(401);
    expect(answer.challenges).toEqual([
      {
        scheme: "DPoP",
        params: { resource_metadata: RM, scope: "notes:read", algs: "ES256 EdDSA RS256 PS256" },
      },
    ]);
  });

  it("takes a bound token with a valid proof", async () => {
    const at = await token();
    const answer = await dpopCall(gate(), at, await craftProof(key, { url: URL_, accessToken: at }));
    expect(answer.status).toBe(200);
    expect(answer.auth?.dpopJkt).toBe(key.jkt);
  });

  it("says so in its metadata", () => {
    expect(gate().metadata).toMatchObject({
      dpop_signing_alg_values_supported: ["ES256", "EdDSA", "RS256", "PS256"],
      dpop_bound_access_tokens_required: true,
    });
  });
});

describe("DPoP at the gate, policy bearer (the default)", () => {
  it("does not recognise the DPoP scheme and does not mention DPoP", async () => {
    for (const g of [gateWith(undefined), gateWith({ policy: "bearer" })]) {
      const at = await token();
      const answer = await dpopCall(g, at, await craftProof(key, { url: URL_, accessToken: at }));
      expect(answer.status).toBe(401);
      expect(answer.challenges).toEqual([
        { scheme: "Bearer", params: { resource_metadata: RM, scope: "notes:read" } },
      ]);
      expect(g.metadata.dpop_signing_alg_values_supported).toBeUndefined();
      expect(answer.headers.get("access-control-expose-headers")).toBe("WWW-Authenticate");
    }
  });

  it("still refuses a DPoP-bound token sent as Bearer", async () => {
    const answer = await call(gateWith(undefined), [["authorization", `Bearer ${await token()}`]]);
    expect(answer.status).toBe(401);
    expect(answer.challenges[0]?.params.error).toBe("invalid_token");
  });

  it("refuses an unknown policy at start-up", () => {
    expect(() => gateWith({ policy: "sometimes" as "allowed" })).toThrow(/dpop.policy/);
  });
});

describe("DPoP nonces at the gate (RFC 9449 §9)", () => {
  it("answers use_dpop_nonce with a DPoP-Nonce header, then accepts the retried proof", async () => {
    const nonce = { secret: "a shared secret of at least 32 bytes!!" };
    const g = gateWith({ policy: "allowed", nonce });
    const at = await token();
    const first = await dpopCall(g, at, await craftProof(key, { url: URL_, accessToken: at }));
    expectDPoPError(first, "use_dpop_nonce");
    const value = first.headers.get("dpop-nonce");
    expect(value).toMatch(/^[A-Za-z0-9_-]+$/);
    const retry = await dpopCall(
      g,
      at,
      await craftProof(key, { url: URL_, accessToken: at, claims: { nonce: value } }),
    );
    expect(retry.status).toBe(200);
    // Another instance with the same secret accepts the same nonce (no shared state).
    const other = gateWith({ policy: "allowed", nonce });
    const there = await dpopCall(
      other,
      at,
      await craftProof(key, { url: URL_, accessToken: at, claims: { nonce: value } }),
    );
    expect(there.status).toBe(200);
  });

  it("works with Gatehouse's client signer, which picks the nonce up from the answer", async () => {
    const signer = new DPoPSigner(await createDPoPKey(issuer.issuer, "client-2"));
    const at = await issuer.sign({
      aud: RESOURCE,
      scope: "notes:read",
      cnf: { jkt: await signer.thumbprint() },
    });
    const g = gateWith({ policy: "required", nonce: { secret: "another shared secret, 32 bytes or more" } });
    const request = async () => {
      const proof = await signer.proof("GET", URL_, at);
      const response = await g.requireBearer({ scopes: ["notes:read"] })(
        new Request(URL_, { headers: { authorization: `DPoP ${at}`, dpop: proof } }),
        async () => new Response("ok"),
      );
      signer.observe(URL_, response);
      return response.status;
    };
    expect(await request()).toBe(401);
    expect(await request()).toBe(200);
  });
});

describe("DPoP with token introspection (RFC 9449 §6.2)", () => {
  it("takes cnf.jkt from the introspection response; token_type DPoP without it is refused", async () => {
    let answer: Record<string, unknown> = {};
    const server = await listen(async () => Response.json(answer));
    try {
      const g = gateWith(
        { policy: "allowed" },
        {
          verifier: introspectionVerifier({
            endpoint: `${server.url}/introspect`,
            clientId: "rs",
            clientSecret: "rs-secret",
            audience: RESOURCE,
          }),
        },
      );
      const exp = Math.floor(Date.now() / 1000) + 300;
      answer = {
        active: true,
        aud: RESOURCE,
        scope: "notes:read",
        exp,
        token_type: "DPoP",
        cnf: { jkt: key.jkt },
      };
      const ok = await dpopCall(
        g,
        "opaque-token-1",
        await craftProof(key, { url: URL_, accessToken: "opaque-token-1" }),
      );
      expect(ok.status).toBe(200);
      expect(ok.auth?.dpopJkt).toBe(key.jkt);
      const asBearer = await call(g, [["authorization", "Bearer opaque-token-1"]]);
      expect(asBearer.scheme("bearer")?.params.error).toBe("invalid_token");
      answer = { active: true, aud: RESOURCE, scope: "notes:read", exp, token_type: "DPoP" };
      const unbound = await dpopCall(
        g,
        "opaque-token-2",
        await craftProof(key, { url: URL_, accessToken: "opaque-token-2" }),
      );
      expectDPoPError(unbound, "invalid_token");
    } finally {
      await server.close();
    }
  });
});
