/**
 * DPoP at the token endpoint (RFC 9449 §5, §8, §10, §11.1): hostile proofs first, then binding of
 * access tokens, codes and refresh tokens, the per-client policy, server nonces and metadata.
 */
import { describe, expect, it } from "vitest";
import { randomToken, sha256Base64url } from "../../src/shared/crypto.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { proof, proofKey, symmetricProof, unsignedProof } from "./dpop-support.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  client,
  codeRequest,
  decodePayload,
  ensureUser,
  ISSUER,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  pkcePair,
  postToken,
  REDIRECT,
  RESOURCE,
  RS_CLIENT,
  RS_SECRET,
  type TestServer,
} from "./helpers.js";

const TOKEN_URL = `${ISSUER}/token`;

/** Redeems a fresh code of the public client with `headers` (a DPoP proof or none). */
async function redeemFresh(t: TestServer, headers: Record<string, string> = {}) {
  const { code, verifier } = await issueCode(t);
  return postToken(t, codeRequest(code, verifier), headers);
}

function refresh(t: TestServer, token: string, headers: Record<string, string> = {}) {
  return postToken(
    t,
    { grant_type: "refresh_token", refresh_token: token, client_id: PUBLIC_CLIENT },
    headers,
  );
}

/** Everything the server logged, as one string (to look for leaked proofs). */
function logText(t: TestServer): string {
  return JSON.stringify(t.log.lines);
}

describe("DPoP proofs the token endpoint refuses (RFC 9449 §4.3)", () => {
  it("refuses a proof for another htu, also when the request's Host names that URL", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const elsewhere = await proof(key, "https://attacker.example/token", t.clock.now);
    const r = await redeemFresh(t, { dpop: elsewhere });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_dpop_proof");
    // htu comes from the configured issuer: a request reaching the server under another Host, with
    // a proof matching that Host, is refused too.
    const other = "https://other-host.example/token";
    const { code, verifier } = await issueCode(t);
    const viaOtherHost = await t.server.fetch(
      new Request(other, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          dpop: await proof(key, other, t.clock.now),
        },
        body: new URLSearchParams(codeRequest(code, verifier)).toString(),
      }),
    );
    expect(viaOtherHost.status).toBe(400);
    expect(((await viaOtherHost.json()) as { error: string }).error).toBe("invalid_dpop_proof");
  });

  it("refuses htm other than POST, a stale or future iat, alg none, HMAC, a wrong typ", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const now = t.clock.now;
    const cases: [string, string][] = [
      ["htm GET", await proof(key, TOKEN_URL, now, { htm: "GET" })],
      ["iat two minutes old", await proof(key, TOKEN_URL, now, { iat: Math.floor(now / 1000) - 120 })],
      ["iat two minutes ahead", await proof(key, TOKEN_URL, now, { iat: Math.floor(now / 1000) + 120 })],
      ["alg none", unsignedProof(key, TOKEN_URL, now)],
      ["HS256", symmetricProof(TOKEN_URL, now)],
      ["typ JWT", await proof(key, TOKEN_URL, now, { typ: "JWT" })],
      ["not a JWT", "not-a-proof"],
    ];
    for (const [name, bad] of cases) {
      const r = await redeemFresh(t, { dpop: bad });
      expect({ name, status: r.status, error: r.body.error }).toEqual({
        name,
        status: 400,
        error: "invalid_dpop_proof",
      });
      expect(r.headers.get("cache-control")).toBe("no-store");
    }
  });

  it("refuses a proof whose header key is not the one that signed it", async () => {
    const t = await makeServer();
    const signer = await proofKey();
    const claimed = await proofKey();
    const r = await redeemFresh(t, {
      dpop: await proof(signer, TOKEN_URL, t.clock.now, { jwk: claimed.publicJwk }),
    });
    expect(r.body.error).toBe("invalid_dpop_proof");
  });

  it("refuses two DPoP header fields", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const { code, verifier } = await issueCode(t);
    const headers = new Headers({ "content-type": "application/x-www-form-urlencoded" });
    headers.append("dpop", await proof(key, TOKEN_URL, t.clock.now));
    headers.append("dpop", await proof(key, TOKEN_URL, t.clock.now));
    const response = await t.server.fetch(
      new Request(TOKEN_URL, {
        method: "POST",
        headers,
        body: new URLSearchParams(codeRequest(code, verifier)),
      }),
    );
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toBe("invalid_dpop_proof");
  });

  it("refuses a replayed proof (jti single use, §11.1) and leaves the code unused", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const once = await proof(key, TOKEN_URL, t.clock.now);
    expect((await redeemFresh(t, { dpop: once })).status).toBe(200);
    const { code, verifier } = await issueCode(t);
    const replay = await postToken(t, codeRequest(code, verifier), { dpop: once });
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe("invalid_dpop_proof");
    // The refused proof was judged before the grant: the code is still good.
    const fresh = await postToken(t, codeRequest(code, verifier), {
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(fresh.status).toBe(200);
    expect(fresh.body.token_type).toBe("DPoP");
  });

  it("refuses a replay at another instance sharing the store", async () => {
    const store = createMemoryStore();
    const a = await makeServer({ store });
    const b = await makeServer({ store });
    const key = await proofKey();
    const once = await proof(key, TOKEN_URL, a.clock.now);
    expect((await redeemFresh(a, { dpop: once })).status).toBe(200);
    const replay = await redeemFresh(b, { dpop: once });
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe("invalid_dpop_proof");
  });

  it("puts neither the proof nor its jti in the answer or the log", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const jti = `secret-jti-${randomToken(8)}`;
    const stale = await proof(key, TOKEN_URL, t.clock.now, {
      jti,
      iat: Math.floor(t.clock.now / 1000) - 600,
    });
    const r = await redeemFresh(t, { dpop: stale });
    expect(r.body.error).toBe("invalid_dpop_proof");
    const answer = JSON.stringify(r.body);
    for (const secret of [stale, jti, stale.split(".")[2]!]) {
      expect(answer).not.toContain(secret);
      expect(logText(t)).not.toContain(secret);
    }
  });
});

describe("DPoP-bound access tokens (RFC 9449 §5, §6.1)", () => {
  it("binds the access token to the proof's key: cnf.jkt and token_type DPoP", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const r = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    expect(r.status).toBe(200);
    expect(r.body.token_type).toBe("DPoP");
    expect(decodePayload(r.body.access_token as string).cnf).toEqual({ jkt: key.jkt });
  });

  it("issues Bearer tokens, without cnf, to a request without a proof", async () => {
    const t = await makeServer();
    const r = await redeemFresh(t);
    expect(r.status).toBe(200);
    expect(r.body.token_type).toBe("Bearer");
    expect(decodePayload(r.body.access_token as string).cnf).toBeUndefined();
  });

  it("binds client_credentials tokens too", async () => {
    const t = await makeServer();
    const key = await proofKey("EdDSA");
    const r = await postToken(
      t,
      {
        grant_type: "client_credentials",
        client_id: RS_CLIENT,
        client_secret: RS_SECRET,
        resource: RESOURCE,
      },
      { dpop: await proof(key, TOKEN_URL, t.clock.now) },
    );
    expect(r.status).toBe(200);
    expect(r.body.token_type).toBe("DPoP");
    expect(decodePayload(r.body.access_token as string).cnf).toEqual({ jkt: key.jkt });
  });

  it("introspection tells a bound token's cnf and token_type DPoP (§6.2)", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const issued = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    const response = await t.server.fetch(
      new Request(`${ISSUER}/introspect`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          token: issued.body.access_token as string,
          client_id: RS_CLIENT,
          client_secret: RS_SECRET,
        }),
      }),
    );
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ active: true, token_type: "DPoP", cnf: { jkt: key.jkt } });
  });

  it("ignores DPoP entirely when it is turned off", async () => {
    const t = await makeServer({ dpop: { enabled: false } });
    const key = await proofKey();
    const r = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    expect(r.body.token_type).toBe("Bearer");
    const metadata = await (
      await t.server.fetch(new Request(`${ISSUER}/.well-known/oauth-authorization-server`))
    ).json();
    expect(metadata).not.toHaveProperty("dpop_signing_alg_values_supported");
  });
});

describe("dpop_jkt binds the authorization code (RFC 9449 §10)", () => {
  async function boundCode(t: TestServer, jkt: string) {
    const { verifier, challenge } = pkcePair();
    const code = randomToken();
    await ensureUser(t.store, "user-1");
    await t.store.insertAuthorizationCode({
      codeHash: sha256Base64url(code),
      grantId: randomToken(16),
      clientId: PUBLIC_CLIENT,
      userId: "user-1",
      redirectUri: REDIRECT,
      redirectUriSent: true,
      scopes: ["notes:read", "offline_access"],
      resource: RESOURCE,
      codeChallenge: challenge,
      codeChallengeMethod: "S256",
      refreshAllowed: true,
      dpopJkt: jkt,
      createdAt: t.clock.now,
      expiresAt: t.clock.now + 60_000,
    });
    return { code, verifier };
  }

  it("refuses a proof of another key, and a request without a proof", async () => {
    const t = await makeServer();
    const bound = await proofKey();
    const other = await proofKey();
    const a = await boundCode(t, bound.jkt);
    const wrongKey = await postToken(t, codeRequest(a.code, a.verifier), {
      dpop: await proof(other, TOKEN_URL, t.clock.now),
    });
    expect(wrongKey.status).toBe(400);
    expect(wrongKey.body.error).toBe("invalid_grant");
    const b = await boundCode(t, bound.jkt);
    const noProof = await postToken(t, codeRequest(b.code, b.verifier));
    expect(noProof.body.error).toBe("invalid_grant");
    // Any redemption attempt consumes the code (SECURITY.md "Token endpoint").
    const late = await postToken(t, codeRequest(a.code, a.verifier), {
      dpop: await proof(bound, TOKEN_URL, t.clock.now),
    });
    expect(late.body.error).toBe("invalid_grant");
  });

  it("accepts a proof of the named key", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const { code, verifier } = await boundCode(t, key.jkt);
    const r = await postToken(t, codeRequest(code, verifier), {
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(r.status).toBe(200);
    expect(decodePayload(r.body.access_token as string).cnf).toEqual({ jkt: key.jkt });
  });
});

describe("DPoP-bound refresh tokens (RFC 9449 §5)", () => {
  it("a public client's refresh token works with the same key only; a refusal leaves it usable", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const other = await proofKey();
    const first = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    const token = first.body.refresh_token as string;
    const grantId = (await t.store.getRefreshToken(sha256Base64url(token)))!.grantId;
    expect((await t.store.getGrant(grantId))?.dpopJkt).toBe(key.jkt);

    const anotherKey = await refresh(t, token, { dpop: await proof(other, TOKEN_URL, t.clock.now) });
    expect(anotherKey.status).toBe(400);
    expect(anotherKey.body.error).toBe("invalid_grant");
    const noProof = await refresh(t, token);
    expect(noProof.status).toBe(400);
    expect(noProof.body.error).toBe("invalid_dpop_proof");

    const same = await refresh(t, token, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    expect(same.status).toBe(200);
    expect(same.body.token_type).toBe("DPoP");
    expect(decodePayload(same.body.access_token as string).cnf).toEqual({ jkt: key.jkt });
    // The grant was not revoked by the refusals.
    expect((await t.store.getGrant(grantId))?.revokedAt).toBeUndefined();
  });

  it("a public client's grant made without a proof stays unbound; a later proof binds only the access token", async () => {
    const t = await makeServer();
    const first = await redeemFresh(t);
    const key = await proofKey();
    const bound = await refresh(t, first.body.refresh_token as string, {
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(bound.body.token_type).toBe("DPoP");
    const bearer = await refresh(t, bound.body.refresh_token as string);
    expect(bearer.status).toBe(200);
    expect(bearer.body.token_type).toBe("Bearer");
  });

  it("a confidential client's refresh token is not bound; the new access token follows the proof", async () => {
    const t = await makeServer();
    const key = await proofKey();
    const { code, verifier } = await issueCode(t, { clientId: CONFIDENTIAL_CLIENT });
    const auth = basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET);
    const first = await postToken(t, codeRequest(code, verifier, { client_id: undefined }), {
      ...auth,
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(first.body.token_type).toBe("DPoP");
    const grantId = (await t.store.getRefreshToken(sha256Base64url(first.body.refresh_token as string)))!
      .grantId;
    expect((await t.store.getGrant(grantId))?.dpopJkt).toBeUndefined();
    const rotated = await proofKey();
    const params = { grant_type: "refresh_token", refresh_token: first.body.refresh_token as string };
    const next = await postToken(t, params, { ...auth, dpop: await proof(rotated, TOKEN_URL, t.clock.now) });
    expect(next.status).toBe(200);
    expect(decodePayload(next.body.access_token as string).cnf).toEqual({ jkt: rotated.jkt });
    const plain = await postToken(t, { ...params, refresh_token: next.body.refresh_token as string }, auth);
    expect(plain.body.token_type).toBe("Bearer");
  });
});

describe("dpop_bound_access_tokens (RFC 9449 §5.2)", () => {
  it("a client registered with it must send a proof with every token request", async () => {
    const t = await makeServer({
      clients: [client({ clientId: "always-dpop", metadata: { dpop_bound_access_tokens: true } })],
    });
    const { code, verifier } = await issueCode(t, { clientId: "always-dpop" });
    const without = await postToken(t, codeRequest(code, verifier, { client_id: "always-dpop" }));
    expect(without.status).toBe(400);
    expect(without.body.error).toBe("invalid_dpop_proof");
    const key = await proofKey();
    const withProof = await postToken(t, codeRequest(code, verifier, { client_id: "always-dpop" }), {
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(withProof.status).toBe(200);
    expect(withProof.body.token_type).toBe("DPoP");
  });

  it("dynamic registration accepts and echoes the field, and refuses a non-boolean", async () => {
    const t = await makeServer();
    const register = (body: Record<string, unknown>) =>
      t.server.fetch(
        new Request(`${ISSUER}/register`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ redirect_uris: [REDIRECT], ...body }),
        }),
      );
    const ok = await register({ dpop_bound_access_tokens: true });
    expect(ok.status).toBe(201);
    const registered = (await ok.json()) as Record<string, unknown>;
    expect(registered.dpop_bound_access_tokens).toBe(true);
    const stored = await t.store.getClient(registered.client_id as string);
    expect(stored?.metadata.dpop_bound_access_tokens).toBe(true);
    const bad = await register({ dpop_bound_access_tokens: "yes" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe("invalid_client_metadata");
  });
});

describe("server nonces (RFC 9449 §8)", () => {
  it("answers use_dpop_nonce with a DPoP-Nonce, accepts the retry and hands a nonce on success", async () => {
    const t = await makeServer({ dpop: { requireNonce: true } });
    const key = await proofKey();
    const { code, verifier } = await issueCode(t);
    const first = await postToken(t, codeRequest(code, verifier), {
      dpop: await proof(key, TOKEN_URL, t.clock.now),
    });
    expect(first.status).toBe(400);
    expect(first.body.error).toBe("use_dpop_nonce");
    const nonce = first.headers.get("dpop-nonce");
    expect(nonce).toMatch(/^[\x21\x23-\x5b\x5d-\x7e]+$/);
    const retry = await postToken(t, codeRequest(code, verifier), {
      dpop: await proof(key, TOKEN_URL, t.clock.now, { nonce: nonce! }),
    });
    expect(retry.status).toBe(200);
    expect(retry.body.token_type).toBe("DPoP");
    expect(retry.headers.get("dpop-nonce")).toBe(nonce);
  });

  it("refuses a made-up nonce and one two lifetimes old, with a fresh nonce to use", async () => {
    const t = await makeServer({ dpop: { requireNonce: true, nonceLifetimeSeconds: 60 } });
    const key = await proofKey();
    const made = await redeemFresh(t, {
      dpop: await proof(key, TOKEN_URL, t.clock.now, { nonce: "made-up" }),
    });
    expect(made.body.error).toBe("use_dpop_nonce");
    const nonce = made.headers.get("dpop-nonce")!;
    t.clock.advance(60);
    const previousWindow = await redeemFresh(t, {
      dpop: await proof(key, TOKEN_URL, t.clock.now, { nonce }),
    });
    expect(previousWindow.status).toBe(200);
    t.clock.advance(60);
    const old = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now, { nonce }) });
    expect(old.body.error).toBe("use_dpop_nonce");
    expect(old.headers.get("dpop-nonce")).not.toBe(nonce);
  });

  it("instances sharing the key-encryption key accept each other's nonces", async () => {
    const store = createMemoryStore();
    const kek = randomToken(32);
    const a = await makeServer({ store, keyEncryptionKeys: [kek], dpop: { requireNonce: true } });
    const b = await makeServer({ store, keyEncryptionKeys: [kek], dpop: { requireNonce: true } });
    const key = await proofKey();
    const challenge = await redeemFresh(a, { dpop: await proof(key, TOKEN_URL, a.clock.now) });
    const nonce = challenge.headers.get("dpop-nonce")!;
    const atB = await redeemFresh(b, { dpop: await proof(key, TOKEN_URL, b.clock.now, { nonce }) });
    expect(atB.status).toBe(200);
  });
});

describe("browser-based clients (CORS)", () => {
  it("a preflight allows the DPoP header and responses expose DPoP-Nonce (RFC 9449 §8)", async () => {
    const t = await makeServer({ dpop: { requireNonce: true } });
    const preflight = await t.server.fetch(
      new Request(TOKEN_URL, {
        method: "OPTIONS",
        headers: { origin: "https://spa.example", "access-control-request-method": "POST" },
      }),
    );
    expect(preflight.headers.get("access-control-allow-headers")?.split(", ")).toContain("dpop");
    const key = await proofKey();
    const challenged = await redeemFresh(t, { dpop: await proof(key, TOKEN_URL, t.clock.now) });
    expect(challenged.body.error).toBe("use_dpop_nonce");
    expect(challenged.headers.get("access-control-expose-headers")?.split(", ")).toContain("dpop-nonce");
  });
});

describe("metadata and options", () => {
  it("advertises exactly the algorithms the token endpoint accepts (§5.1)", async () => {
    const t = await makeServer({ dpop: { signingAlgorithms: ["ES256"] } });
    const metadata = (await (
      await t.server.fetch(new Request(`${ISSUER}/.well-known/oauth-authorization-server`))
    ).json()) as Record<string, unknown>;
    expect(metadata.dpop_signing_alg_values_supported).toEqual(["ES256"]);
    const eddsa = await proofKey("EdDSA");
    const r = await redeemFresh(t, { dpop: await proof(eddsa, TOKEN_URL, t.clock.now) });
    expect(r.body.error).toBe("invalid_dpop_proof");
  });

  it("refuses at start-up an algorithm that is not asymmetric or not known", async () => {
    await expect(makeServer({ dpop: { signingAlgorithms: ["HS256"] } })).rejects.toMatchObject({
      code: "ERR_INVALID_OPTION",
    });
    await expect(makeServer({ dpop: { signingAlgorithms: ["none"] } })).rejects.toMatchObject({
      code: "ERR_INVALID_OPTION",
    });
    await expect(makeServer({ dpop: { iatWindowSeconds: 3600 } })).rejects.toMatchObject({
      code: "ERR_INVALID_OPTION",
    });
  });
});
