import { generateKeyPair, generateSecret, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jwtVerifier } from "../../src/resource-server/index.js";
import { GatehouseTypeError, OAuthError } from "../../src/shared/errors.js";
import { newKey, startIssuer, type TestIssuer } from "./fixtures.js";

const AUD = "https://mcp.example.com";
let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.close();
});

async function rejects(promise: Promise<unknown>, code = "invalid_token") {
  try {
    await promise;
    expect.unreachable("expected a rejection");
  } catch (error) {
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).code).toBe(code);
    return error as OAuthError;
  }
}

describe("jwtVerifier (RFC 9068)", () => {
  it("returns AuthInfo for a valid token", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    const token = await issuer.sign({
      sub: "u1",
      client_id: "c1",
      aud: [AUD, "https://other"],
      scope: "a b a",
    });
    const auth = await v.verify(token);
    expect(auth).toMatchObject({
      subject: "u1",
      clientId: "c1",
      scopes: ["a", "b"],
      audience: [AUD, "https://other"],
      issuer: issuer.issuer,
    });
    expect(auth.claims?.sub).toBe("u1");
    expect(JSON.stringify(auth)).not.toContain(token);
  });

  it("exposes the token's jti as tokenId (RFC 9068 §2.2, RFC 7519 §4.1.7), only when it is a string", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    expect((await v.verify(await issuer.sign({ aud: AUD, jti: "grant-7.tok-1" }))).tokenId).toBe(
      "grant-7.tok-1",
    );
    expect((await v.verify(await issuer.sign({ aud: AUD, jti: undefined }))).tokenId).toBeUndefined();
    expect(
      (await v.verify(await issuer.sign({ aud: AUD, jti: 42 as unknown as string }))).tokenId,
    ).toBeUndefined();
  });

  it("rule: typ must be at+jwt (RFC 9068 §4)", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    await rejects(v.verify(await issuer.sign({ aud: AUD }, { typ: "JWT" })));
    await rejects(v.verify(await issuer.sign({ aud: AUD }, { typ: null })));
    expect((await v.verify(await issuer.sign({ aud: AUD }, { typ: "application/at+jwt" }))).audience).toEqual(
      [AUD],
    );
    const lax = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: issuer.jwksUri,
      requireAtJwtType: false,
    });
    expect((await lax.verify(await issuer.sign({ aud: AUD }, { typ: "JWT" }))).audience).toEqual([AUD]);
  });

  it("rule: iss must equal a trusted issuer exactly (no normalisation)", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    await rejects(v.verify(await issuer.sign({ aud: AUD, iss: `${issuer.issuer}/` })));
    await rejects(v.verify(await issuer.sign({ aud: AUD, iss: issuer.issuer.toUpperCase() })));
    await rejects(v.verify(await issuer.sign({ aud: AUD, iss: undefined })));
  });

  it("rule: exp is required; exp and nbf honour the clock tolerance", async () => {
    let now = Date.now();
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: issuer.jwksUri,
      clockToleranceSeconds: 30,
      now: () => now,
    });
    const t = Math.floor(now / 1000);
    const token = await issuer.sign({ aud: AUD, exp: t + 60, nbf: t - 1 });
    now += 80_000; // 20 s past exp: inside the tolerance
    expect((await v.verify(token)).expiresAt).toBe(t + 60);
    now += 20_000; // 40 s past exp
    await rejects(v.verify(token));
    now = Date.now();
    await rejects(v.verify(await issuer.sign({ aud: AUD, nbf: Math.floor(now / 1000) + 120 })));
    expect(
      (await v.verify(await issuer.sign({ aud: AUD, nbf: Math.floor(now / 1000) + 10 }))).audience,
    ).toEqual([AUD]);
    // No exp at all.
    const noExp = await new SignJWT({ iss: issuer.issuer, aud: AUD })
      .setProtectedHeader({ alg: "ES256", kid: "k1", typ: "at+jwt" })
      .sign(issuer.privateKey);
    await rejects(v.verify(noExp));
  });

  it("rule: the algorithm allow-list holds; none and HMAC are refused at set-up", async () => {
    for (const alg of ["none", "HS256", "HS512", "made-up"]) {
      expect(() =>
        jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri, algorithms: [alg] }),
      ).toThrow(GatehouseTypeError);
    }
    const onlyRs = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: issuer.jwksUri,
      algorithms: ["RS256"],
    });
    await rejects(onlyRs.verify(await issuer.sign({ aud: AUD })));
  });

  it("rule: an HMAC token signed with a public key as secret is refused (alg confusion)", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    const secret = new TextEncoder().encode(JSON.stringify(issuer.publicJwk));
    const token = await issuer.sign({ aud: AUD }, { alg: "HS256", key: secret });
    await rejects(v.verify(token));
    const unsigned = `${Buffer.from(JSON.stringify({ alg: "none", typ: "at+jwt" })).toString("base64url")}.${Buffer.from(
      JSON.stringify({ iss: issuer.issuer, aud: AUD, exp: 9e9 }),
    ).toString("base64url")}.`;
    await rejects(v.verify(unsigned));
    // A random secret too.
    await rejects(
      v.verify(
        await issuer.sign(
          { aud: AUD },
          {
            alg: "HS256",
            key: (await generateSecret("HS256", { extractable: true })) as unknown as Uint8Array,
          },
        ),
      ),
    );
  });

  it("fetches the JWKS once, caches it, and refetches on an unknown kid (key rotation)", async () => {
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: issuer.jwksUri,
      jwksCooldownMs: 0,
    });
    const before = issuer.jwksFetches;
    await v.verify(await issuer.sign({ aud: AUD }));
    await v.verify(await issuer.sign({ aud: AUD }));
    expect(issuer.jwksFetches - before).toBe(1);
    const next = await newKey("k2");
    issuer.publish([issuer.publicJwk, next.publicJwk]);
    try {
      const rotated = await issuer.sign({ aud: AUD }, { kid: "k2", key: next.privateKey });
      expect((await v.verify(rotated)).audience).toEqual([AUD]);
      expect(issuer.jwksFetches - before).toBe(2);
    } finally {
      issuer.publish([issuer.publicJwk]);
    }
  });

  it("rule: an unknown kid within the cooldown does not hammer the JWKS endpoint", async () => {
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: issuer.jwksUri,
      jwksCooldownMs: 60_000,
    });
    await v.verify(await issuer.sign({ aud: AUD }));
    const before = issuer.jwksFetches;
    const stranger = await newKey("k-unknown");
    for (let i = 0; i < 5; i++) {
      await rejects(
        v.verify(await issuer.sign({ aud: AUD }, { kid: "k-unknown", key: stranger.privateKey })),
      );
    }
    expect(issuer.jwksFetches - before).toBe(0);
  });

  it("works with local keys (jwks or one key)", async () => {
    const viaJwks = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    expect((await viaJwks.verify(await issuer.sign({ aud: AUD }))).audience).toEqual([AUD]);
    const { publicKey, privateKey } = await generateKeyPair("EdDSA");
    const viaKey = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      key: publicKey,
      algorithms: ["EdDSA"],
    });
    const token = await issuer.sign({ aud: AUD }, { alg: "EdDSA", kid: "x", key: privateKey });
    expect((await viaKey.verify(token)).audience).toEqual([AUD]);
    // The same key is refused when its algorithm is not allowed.
    const esOnly = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      key: publicKey,
      algorithms: ["ES256"],
    });
    await rejects(esOnly.verify(token));
  });

  it("rule: a key is only used for the algorithm it fits (node:crypto path and jose alike)", async () => {
    const { createPublicKey, generateKeyPairSync } = await import("node:crypto");
    const es256 = await issuer.sign({ aud: AUD });
    // An ES256 token against a P-384 key, an Ed25519 key, a 1024-bit RSA key and a private key.
    const p384 = generateKeyPairSync("ec", { namedCurve: "P-384" });
    const ed = generateKeyPairSync("ed25519");
    const rsa1024 = generateKeyPairSync("rsa", { modulusLength: 1024 });
    for (const key of [p384.publicKey, ed.publicKey, rsa1024.publicKey, p384.privateKey]) {
      const v = jwtVerifier({
        issuer: issuer.issuer,
        audience: AUD,
        key,
        algorithms: ["ES256", "EdDSA", "RS256"],
      });
      await rejects(v.verify(es256));
    }
    // A small RSA key refused even when the token is signed with it.
    const rs = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      key: rsa1024.publicKey,
      algorithms: ["RS256"],
    });
    // jose will not sign with it: signed with node:crypto.
    const { sign: nodeSign } = await import("node:crypto");
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const exp = Math.floor(Date.now() / 1000) + 300;
    const input = `${b64({ alg: "RS256", typ: "at+jwt" })}.${b64({ iss: issuer.issuer, aud: AUD, exp })}`;
    const smallSigned = `${input}.${nodeSign("sha256", Buffer.from(input), rsa1024.privateKey).toString("base64url")}`;
    await rejects(rs.verify(smallSigned));
    // The right key, as a node KeyObject and as a WebCrypto key, verifies; a WebCrypto key imported
    // for another algorithm does not.
    const right = createPublicKey({ key: issuer.publicJwk as never, format: "jwk" });
    const asKeyObject = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      key: right,
      algorithms: ["ES256"],
    });
    expect((await asKeyObject.verify(es256)).audience).toEqual([AUD]);
    const { importJWK } = await import("jose");
    const asCryptoKey = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      key: (await importJWK(issuer.publicJwk, "ES256")) as never,
      algorithms: ["ES256"],
    });
    expect((await asCryptoKey.verify(es256)).audience).toEqual([AUD]);
  });

  it("rule: malformed signatures, headers and claims are refused", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    const token = await issuer.sign({ aud: AUD });
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    for (const forged of [
      `${token}AA`, // a signature of the wrong length
      `${header}.${payload}.${signature.slice(0, 43)}`,
      `${header}.${b64({ ...JSON.parse(Buffer.from(payload, "base64url").toString()), scope: "admin" })}.${signature}`,
      `${b64({ alg: "ES256", typ: "at+jwt", kid: "k1", crit: ["exp"] })}.${payload}.${signature}`,
      `${b64({ alg: "none", typ: "at+jwt" })}.${payload}.`,
      `${b64({ alg: "ES256", typ: "at+jwt", kid: "k1" })}.${payload}.${signature}`, // header re-encoded
      `${header}.${payload}`,
      `${header}..${signature}`,
    ]) {
      await rejects(v.verify(forged));
    }
    // Validly signed, but claims that are not an object, or an `iat` that is not a number.
    const { privateKey } = issuer;
    const { CompactSign } = await import("jose");
    const signed = (claims: string) =>
      new CompactSign(new TextEncoder().encode(claims))
        .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "k1" })
        .sign(privateKey);
    const exp = Math.floor(Date.now() / 1000) + 300;
    await rejects(v.verify(await signed("[1]")));
    await rejects(v.verify(await signed(JSON.stringify({ iss: issuer.issuer, aud: AUD, exp, iat: "now" }))));
    expect(
      (await v.verify(await signed(JSON.stringify({ iss: issuer.issuer, aud: AUD, exp })))).audience,
    ).toEqual([AUD]);
    // typ is compared case-insensitively (RFC 7515 §4.1.9), as jose does.
    expect((await v.verify(await issuer.sign({ aud: AUD }, { typ: "AT+JWT" }))).audience).toEqual([AUD]);
  });

  it("verifies algorithms outside the node:crypto set through jose (ES512, RS384)", async () => {
    for (const alg of ["ES512", "RS384"]) {
      const { publicJwk, privateKey } = await newKey("other", alg);
      const v = jwtVerifier({
        issuer: issuer.issuer,
        audience: AUD,
        jwks: { keys: [publicJwk] },
        algorithms: [alg],
      });
      const token = await issuer.sign({ aud: AUD }, { alg, kid: "other", key: privateKey });
      expect((await v.verify(token)).audience).toEqual([AUD]);
      await rejects(v.verify(`${token.slice(0, -10)}${token.at(-10) === "A" ? "B" : "A"}${token.slice(-9)}`));
    }
  });

  it("rule: an unreachable JWKS is temporarily_unavailable (503), not invalid_token", async () => {
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwksUri: "http://127.0.0.1:1/jwks",
      jwksTimeoutMs: 2000,
    });
    const error = await rejects(v.verify(await issuer.sign({ aud: AUD })), "temporarily_unavailable");
    expect(error.status).toBe(503);
  });

  it("rule: the scope claim must be a string of valid scope tokens", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    await rejects(v.verify(await issuer.sign({ aud: AUD, scope: ["a"] })));
    await rejects(v.verify(await issuer.sign({ aud: AUD, scope: 'a "b' })));
    expect((await v.verify(await issuer.sign({ aud: AUD, scp: ["x", "y"] }))).scopes).toEqual(["x", "y"]);
  });

  it("refuses bad options at set-up", () => {
    const base = { issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri };
    expect(() => jwtVerifier({ ...base, issuer: [] })).toThrow(GatehouseTypeError);
    expect(() => jwtVerifier({ ...base, jwksUri: "http://keys.example.com/jwks" })).toThrow(
      GatehouseTypeError,
    );
    expect(() => jwtVerifier({ ...base, jwks: { keys: [] } })).toThrow(GatehouseTypeError);
    expect(() => jwtVerifier({ issuer: issuer.issuer, audience: AUD })).toThrow(GatehouseTypeError);
    expect(() => jwtVerifier({ ...base, clockToleranceSeconds: -1 })).toThrow(GatehouseTypeError);
    expect(() => jwtVerifier({ ...base, audience: "https://h.example/#f" })).toThrow(GatehouseTypeError);
  });

  it("never puts the token in the error", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwksUri: issuer.jwksUri });
    const token = await issuer.sign({ aud: "https://wrong.example" });
    const error = await rejects(v.verify(token));
    expect(`${error.message} ${error.detail} ${error.description}`).not.toContain(token);
  });
});
