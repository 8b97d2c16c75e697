import { generateKeyPairSync, sign } from "node:crypto";
import { generateSecret, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { createDPoPKey, DPoPSigner } from "../../src/client/protocol/dpop.js";
import {
  DPoPKeyMismatchError,
  type DPoPProofRequest,
  dpopProofVerifier,
  memoryReplayGuard,
  normalizedHtu,
  storeReplayGuard,
} from "../../src/shared/dpop-proof.js";
import { GatehouseTypeError, OAuthError } from "../../src/shared/errors.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { craftProof, proofKey, unsignedProof } from "../resource-server/dpop-support.js";

const URL_ = "https://rs.example.com/api";
const TOKEN = "access-token-abc.def";

async function refused(promise: Promise<unknown>, code = "invalid_dpop_proof", detail?: RegExp) {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).code).toBe(code);
    if (detail) expect((error as OAuthError).detail).toMatch(detail);
    // Never the proof or token on the wire.
    expect(JSON.stringify((error as OAuthError).toJSON())).not.toContain(TOKEN);
    return error as OAuthError;
  }
  return expect.unreachable("expected a refusal");
}

function request(proof: string | null, over: Partial<DPoPProofRequest> = {}): DPoPProofRequest {
  return { proof, method: "GET", url: URL_, ...over };
}

describe("dpopProofVerifier: hostile proofs", () => {
  it("refuses a missing or empty DPoP header", async () => {
    const v = dpopProofVerifier();
    await refused(v.verify(request(null)), "invalid_dpop_proof", /missing/);
    await refused(v.verify(request("")), "invalid_dpop_proof", /missing/);
  });

  it("refuses two DPoP header fields (joined with a comma)", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    const a = await craftProof(key);
    const b = await craftProof(key);
    await refused(v.verify(request(`${a}, ${b}`)), "invalid_dpop_proof", /compact JWS/);
  });

  it("refuses an over-long header without parsing it", async () => {
    const v = dpopProofVerifier();
    const huge = `${"a".repeat(5000)}.${"b".repeat(5000)}.c`;
    await refused(v.verify(request(huge)), "invalid_dpop_proof", /too long/);
  });

  it("refuses a wrong or missing typ", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    await refused(v.verify(request(await craftProof(key, { header: { typ: "JWT" } }))), undefined, /typ/);
    await refused(v.verify(request(await craftProof(key, { header: { typ: undefined } }))), undefined, /typ/);
  });

  it("refuses alg none, HS256 and an algorithm outside the configured list", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier({ algorithms: ["ES256"] });
    const claims = { jti: "j1", htm: "GET", htu: URL_, iat: Math.floor(Date.now() / 1000) };
    await refused(v.verify(request(unsignedProof(key, claims))), undefined, /compact JWS|alg/);
    const hs = await craftProof(key, { alg: "HS256", signingKey: await generateSecret("HS256") });
    await refused(v.verify(request(hs)), undefined, /alg not accepted/);
    const ed = await proofKey("EdDSA");
    await refused(v.verify(request(await craftProof(ed))), undefined, /alg not accepted/);
  });

  it("refuses alg confusion: a key of another type than alg", async () => {
    const ec = await proofKey("ES256");
    const rsa = await proofKey("RS256");
    const v = dpopProofVerifier();
    // RS256 header naming an EC key, and ES256 naming an RSA key.
    await refused(
      v.verify(request(await craftProof(rsa, { header: { jwk: ec.publicJwk } }))),
      undefined,
      /kty/,
    );
    await refused(
      v.verify(request(await craftProof(ec, { header: { jwk: rsa.publicJwk } }))),
      undefined,
      /kty/,
    );
    // HS256 keyed with the public key's own bytes (the classic confusion) is not even considered.
    const confused = await new SignJWT({
      jti: "x",
      htm: "GET",
      htu: URL_,
      iat: Math.floor(Date.now() / 1000),
    })
      .setProtectedHeader({ alg: "HS256", typ: "dpop+jwt", jwk: ec.publicJwk })
      .sign(new TextEncoder().encode(JSON.stringify(ec.publicJwk)));
    await refused(v.verify(request(confused)), undefined, /alg not accepted/);
    // ES384 header over a P-256 key.
    const v384 = dpopProofVerifier({ algorithms: ["ES256", "ES384"] });
    await refused(
      v384.verify(
        request(await craftProof(ec, { alg: "ES384", signingKey: (await proofKey("ES384")).privateKey })),
      ),
      undefined,
      /crv/,
    );
  });

  it("refuses a jwk header carrying a private key", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    const proof = await craftProof(key, { header: { jwk: key.privateJwk } });
    await refused(v.verify(request(proof)), undefined, /private/);
  });

  it("refuses a signature from another key than the jwk header's", async () => {
    const victim = await proofKey();
    const attacker = await proofKey();
    const v = dpopProofVerifier();
    const proof = await craftProof(attacker, { header: { jwk: victim.publicJwk } });
    await refused(v.verify(request(proof)), undefined, /signature does not verify/);
    // A tampered payload under a valid signature.
    const good = await craftProof(victim);
    const [h, , s] = good.split(".");
    const forged = Buffer.from(JSON.stringify({ jti: "z", htm: "POST", htu: URL_, iat: 1 })).toString(
      "base64url",
    );
    await refused(v.verify(request(`${h}.${forged}.${s}`)), undefined, /signature/);
  });

  it("refuses a jwk that is not a point on the curve", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    const bad = { ...key.publicJwk, y: key.publicJwk.x };
    await refused(
      v.verify(request(await craftProof(key, { header: { jwk: bad } }))),
      undefined,
      /usable|signature/,
    );
  });

  it("refuses RSA keys below 2048 bits", async () => {
    // jose will not sign with a 1024-bit key: the proof is signed with node:crypto by hand.
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const input = `${enc({ alg: "RS256", typ: "dpop+jwt", jwk: small.publicKey.export({ format: "jwk" }) })}.${enc({ jti: "j", htm: "GET", htu: URL_, iat: Math.floor(Date.now() / 1000) })}`;
    const proof = `${input}.${sign("sha256", Buffer.from(input), small.privateKey).toString("base64url")}`;
    await refused(dpopProofVerifier().verify(request(proof)), undefined, /RSA key size/);
  });

  it("refuses a crit header", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    const proof = await craftProof(key, { header: { crit: ["exp"] } }).catch(() => undefined);
    // jose refuses to sign an unknown crit; build the case by hand if it did.
    if (proof !== undefined) await refused(v.verify(request(proof)), undefined, /crit/);
    else {
      const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
      const bad = `${enc({ alg: "ES256", typ: "dpop+jwt", jwk: key.publicJwk, crit: ["x"], x: 1 })}.${enc({})}.${"A".repeat(86)}`;
      await refused(v.verify(request(bad)), undefined, /crit/);
    }
  });

  it("refuses a wrong htm and a wrong htu", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    await refused(v.verify(request(await craftProof(key, { method: "POST" }))), undefined, /htm/);
    await refused(v.verify(request(await craftProof(key, { method: "get" }))), undefined, /htm/);
    for (const htu of [
      "https://rs.example.com/api/other",
      "https://evil.example.com/api",
      "http://rs.example.com/api",
      "https://rs.example.com:8443/api",
      "https://user@rs.example.com/api",
      "urn:x:y",
    ]) {
      await refused(v.verify(request(await craftProof(key, { url: htu }))), undefined, /htu/);
    }
    await refused(v.verify(request(await craftProof(key, { claims: { htu: 42 } }))), undefined, /htu/);
  });

  it("refuses a stale, a future and a malformed iat", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier({ iatWindowSeconds: 60 });
    const now = Math.floor(Date.now() / 1000);
    await refused(v.verify(request(await craftProof(key, { claims: { iat: now - 120 } }))), undefined, /old/);
    await refused(
      v.verify(request(await craftProof(key, { claims: { iat: now + 120 } }))),
      undefined,
      /future/,
    );
    await refused(
      v.verify(request(await craftProof(key, { claims: { iat: String(now) } }))),
      undefined,
      /iat/,
    );
    await refused(v.verify(request(await craftProof(key, { claims: { iat: undefined } }))), undefined, /iat/);
  });

  it("refuses a missing or over-long jti", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    await refused(v.verify(request(await craftProof(key, { claims: { jti: undefined } }))), undefined, /jti/);
    await refused(
      v.verify(request(await craftProof(key, { claims: { jti: "j".repeat(300) } }))),
      undefined,
      /jti/,
    );
  });

  it("refuses a replayed proof, and the same jti is free under another key", async () => {
    const key = await proofKey();
    const other = await proofKey();
    const v = dpopProofVerifier();
    const proof = await craftProof(key, { claims: { jti: "same" } });
    await expect(v.verify(request(proof))).resolves.toMatchObject({ jkt: key.jkt, jti: "same" });
    await refused(v.verify(request(proof)), undefined, /replayed/);
    await expect(
      v.verify(request(await craftProof(other, { claims: { jti: "same" } }))),
    ).resolves.toBeDefined();
  });

  it("refuses a replay at a second instance sharing a store-backed guard", async () => {
    const store = createMemoryStore();
    const a = dpopProofVerifier({ replayGuard: storeReplayGuard(store) });
    const b = dpopProofVerifier({ replayGuard: storeReplayGuard(store) });
    const key = await proofKey();
    const proof = await craftProof(key);
    await expect(a.verify(request(proof))).resolves.toMatchObject({ jkt: key.jkt });
    await refused(b.verify(request(proof)), undefined, /replayed/);
    // Concurrent use at both: exactly one is accepted.
    const twice = await craftProof(key);
    const results = await Promise.allSettled([a.verify(request(twice)), b.verify(request(twice))]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  it("refuses a wrong or missing ath when an access token is sent", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    await refused(
      v.verify(request(await craftProof(key, { accessToken: "another-token" }), { accessToken: TOKEN })),
      undefined,
      /ath/,
    );
    await refused(v.verify(request(await craftProof(key), { accessToken: TOKEN })), undefined, /ath/);
    await expect(
      v.verify(request(await craftProof(key, { accessToken: TOKEN }), { accessToken: TOKEN })),
    ).resolves.toBeDefined();
  });

  it("refuses a key other than the binding's before recording the proof", async () => {
    const key = await proofKey();
    const bound = await proofKey();
    const v = dpopProofVerifier();
    const proof = await craftProof(key);
    const error = await refused(v.verify(request(proof, { jkt: bound.jkt })), "invalid_dpop_proof");
    expect(error).toBeInstanceOf(DPoPKeyMismatchError);
    // Not recorded: the key's owner can still use it.
    await expect(v.verify(request(proof, { jkt: key.jkt }))).resolves.toMatchObject({ jkt: key.jkt });
  });

  it("answers a replay guard failure with temporarily_unavailable, not a refusal of the proof", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier({
      replayGuard: async () => {
        throw new Error("database down");
      },
    });
    const error = await refused(v.verify(request(await craftProof(key))), "temporarily_unavailable");
    expect(error.status).toBe(503);
  });
});

describe("dpopProofVerifier: accepted proofs", () => {
  it.each(["ES256", "EdDSA", "RS256", "PS256"])(
    "verifies %s and returns the RFC 7638 thumbprint",
    async (alg) => {
      const key = await proofKey(alg);
      const v = dpopProofVerifier();
      const now = Math.floor(Date.now() / 1000);
      const proof = await craftProof(key, { method: "POST", accessToken: TOKEN, claims: { iat: now } });
      const verified = await v.verify(request(proof, { method: "POST", accessToken: TOKEN }));
      expect(verified).toEqual({ jkt: key.jkt, jti: expect.any(String), iat: now });
    },
  );

  it("ignores query and fragment and compares htu after RFC 3986 normalisation", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    const url = "https://rs.example.com/a/b/~x%2f?q=1";
    for (const htu of [
      "https://rs.example.com/a/b/~x%2f",
      "HTTPS://RS.Example.COM:443/a/./c/../b/%7Ex%2F",
      "https://rs.example.com/a/b/~x%2f?other=2#frag",
    ]) {
      await expect(v.verify(request(await craftProof(key, { url: htu }), { url }))).resolves.toBeDefined();
    }
    expect(normalizedHtu("https://h/%41%2a")).toBe("https://h/A%2A");
    expect(normalizedHtu("https://h")).toBe("https://h/");
  });

  it("verifies proofs from Gatehouse's own client signer", async () => {
    const signer = new DPoPSigner(await createDPoPKey("https://as.example.com", "client-1"));
    const v = dpopProofVerifier();
    const proof = await signer.proof("post", `${URL_}?page=2`, TOKEN);
    const verified = await v.verify(request(proof, { method: "POST", accessToken: TOKEN }));
    expect(verified.jkt).toBe(await signer.thumbprint());
  });

  it("accepts the application/dpop+jwt spelling of typ", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier();
    await expect(
      v.verify(request(await craftProof(key, { header: { typ: "application/dpop+jwt" } }))),
    ).resolves.toBeDefined();
  });
});

describe("dpopProofVerifier: server nonces", () => {
  const secret = "0123456789abcdef0123456789abcdef";

  it("asks for a nonce with use_dpop_nonce and a DPoP-Nonce header, then accepts the proof carrying it", async () => {
    const key = await proofKey();
    const v = dpopProofVerifier({ nonce: { secret } });
    const first = await refused(v.verify(request(await craftProof(key))), "use_dpop_nonce");
    const nonce = first.headers?.["dpop-nonce"];
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(v.currentNonce()).toBe(nonce);
    await refused(
      v.verify(request(await craftProof(key, { claims: { nonce: "made-up" } }))),
      "use_dpop_nonce",
    );
    await expect(v.verify(request(await craftProof(key, { claims: { nonce } })))).resolves.toBeDefined();
  });

  it("agrees across instances sharing the secret; other secrets and contexts disagree", async () => {
    const key = await proofKey();
    const a = dpopProofVerifier({ nonce: { secret, context: "https://rs.example.com/api" } });
    const b = dpopProofVerifier({ nonce: { secret, context: "https://rs.example.com/api" } });
    const otherContext = dpopProofVerifier({ nonce: { secret, context: "https://as.example.com/token" } });
    const otherSecret = dpopProofVerifier({
      nonce: { secret: `${secret}!`, context: "https://rs.example.com/api" },
    });
    const nonce = a.currentNonce()!;
    expect(b.currentNonce()).toBe(nonce);
    await expect(b.verify(request(await craftProof(key, { claims: { nonce } })))).resolves.toBeDefined();
    await refused(
      otherContext.verify(request(await craftProof(key, { claims: { nonce } }))),
      "use_dpop_nonce",
    );
    await refused(
      otherSecret.verify(request(await craftProof(key, { claims: { nonce } }))),
      "use_dpop_nonce",
    );
  });

  it("rotates: the previous window's nonce is accepted, an older one is not", async () => {
    const key = await proofKey();
    let clock = Date.now();
    const v = dpopProofVerifier({ nonce: { secret, lifetimeSeconds: 60 }, now: () => clock });
    const old = v.currentNonce()!;
    clock += 60_000;
    expect(v.currentNonce()).not.toBe(old);
    const iat = Math.floor(clock / 1000);
    await expect(
      v.verify(request(await craftProof(key, { claims: { nonce: old, iat } }))),
    ).resolves.toBeDefined();
    clock += 60_000;
    const stale = await refused(
      v.verify(request(await craftProof(key, { claims: { nonce: old, iat: Math.floor(clock / 1000) } }))),
      "use_dpop_nonce",
    );
    expect(stale.headers?.["dpop-nonce"]).toBe(v.currentNonce());
  });
});

describe("memoryReplayGuard", () => {
  it("forgets expired entries and refuses when full of live ones", () => {
    let clock = 1_000;
    const guard = memoryReplayGuard({ maxEntries: 2, now: () => clock });
    expect(guard("a", 2_000)).toBe(true);
    expect(guard("a", 2_000)).toBe(false);
    expect(guard("b", 3_000)).toBe(true);
    expect(() => guard("c", 3_000)).toThrow(OAuthError);
    clock = 2_000;
    // "a" expired: room again, and "a" may be used again (its proof is stale by now anyway).
    expect(guard("c", 3_000)).toBe(true);
    expect(() => guard("d", 4_000)).toThrow(OAuthError);
    clock = 3_000;
    expect(guard("a", 4_000)).toBe(true);
    expect(guard("a", 4_000)).toBe(false);
  });
});

describe("dpopProofVerifier options", () => {
  it("refuses none, HMAC and unknown algorithms, bad windows and short nonce secrets at set-up", () => {
    for (const algorithms of [["none"], ["HS256"], ["ES256", "RS512"], []]) {
      expect(() => dpopProofVerifier({ algorithms })).toThrow(GatehouseTypeError);
    }
    expect(() => dpopProofVerifier({ iatWindowSeconds: 0 })).toThrow(GatehouseTypeError);
    expect(() => dpopProofVerifier({ iatWindowSeconds: 3600 })).toThrow(GatehouseTypeError);
    expect(() => dpopProofVerifier({ nonce: { secret: "short" } })).toThrow(GatehouseTypeError);
    expect(() => memoryReplayGuard({ maxEntries: 0 })).toThrow(GatehouseTypeError);
  });
});
