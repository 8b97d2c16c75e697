/**
 * Hostile cases for the cold (cache-miss) path of jwtVerifier: whatever it remembers between
 * verifications (the decision on a protected header, the key a local key set gave for it) must
 * never let one token ride on another's verification. Real keys, real signatures, a real JWKS
 * server on loopback; each case is run twice over so a remembered decision is exercised.
 */
import { sign as nodeSign } from "node:crypto";
import { CompactSign, type CryptoKey, exportJWK, generateKeyPair, type JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedVerifier, jwtVerifier } from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";
import { newKey, startIssuer, type TestIssuer } from "./fixtures.js";

const AUD = "https://mcp.example.com";
let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.close();
});

async function refused(promise: Promise<unknown>, code = "invalid_token"): Promise<OAuthError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).code).toBe(code);
    return error as OAuthError;
  }
  return expect.unreachable("expected a rejection");
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A compact JWS of `claims` under exactly `header`, signed by `key`. */
function signed(header: Record<string, unknown>, claims: Record<string, unknown>, key: CryptoKey) {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader(header as { alg: string })
    .sign(key);
}

describe("jwtVerifier cold path: nothing remembered lets another token through", () => {
  it("the same header with another payload or signature is checked in full every time", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    const good = await issuer.sign({ aud: AUD, scope: "read" });
    const [header, payload, signature] = good.split(".") as [string, string, string];
    const other = await issuer.sign({ aud: AUD, scope: "write" });
    const [, otherPayload, otherSignature] = other.split(".") as [string, string, string];
    for (let pass = 0; pass < 2; pass++) {
      expect((await v.verify(good)).scopes).toEqual(["read"]);
      // The header's decision is remembered: the payload and signature never are.
      await refused(v.verify(`${header}.${otherPayload}.${signature}`));
      await refused(v.verify(`${header}.${payload}.${otherSignature}`));
      await refused(
        v.verify(
          `${header}.${b64({ iss: issuer.issuer, aud: AUD, exp: nowSeconds() + 60, scope: "admin" })}.${signature}`,
        ),
      );
      // A signature one byte off, of the wrong length, or missing.
      const flipped = Buffer.from(signature, "base64url");
      flipped[10] = flipped[10]! ^ 1;
      await refused(v.verify(`${header}.${payload}.${flipped.toString("base64url")}`));
      await refused(v.verify(`${header}.${payload}.${signature}AA`));
      await refused(v.verify(`${header}.${payload}.${signature.slice(0, 42)}`));
      await refused(v.verify(`${header}.${payload}.`));
      expect((await v.verify(other)).scopes).toEqual(["write"]);
    }
  });

  it("a key set's key is the one its header names: kid and alg are part of what is remembered", async () => {
    const a = await newKey("a");
    const b = await newKey("b");
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwks: { keys: [a.publicJwk, b.publicJwk] },
    });
    const claims = () => ({ iss: issuer.issuer, aud: AUD, exp: nowSeconds() + 60 });
    const byA = await signed({ alg: "ES256", typ: "at+jwt", kid: "a" }, claims(), a.privateKey);
    const byB = await signed({ alg: "ES256", typ: "at+jwt", kid: "b" }, claims(), b.privateKey);
    // Signed by b but naming a (and the reverse), or naming a key the set does not hold.
    const bNamingA = await signed({ alg: "ES256", typ: "at+jwt", kid: "a" }, claims(), b.privateKey);
    const aNamingB = await signed({ alg: "ES256", typ: "at+jwt", kid: "b" }, claims(), a.privateKey);
    const unknownKid = await signed({ alg: "ES256", typ: "at+jwt", kid: "c" }, claims(), a.privateKey);
    for (let pass = 0; pass < 2; pass++) {
      expect((await v.verify(byA)).audience).toEqual([AUD]);
      await refused(v.verify(bNamingA));
      expect((await v.verify(byB)).audience).toEqual([AUD]);
      await refused(v.verify(aNamingB));
      await refused(v.verify(unknownKid));
    }
  });

  it("a header refused once is refused every time, and a refused header changes nothing for a good one", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    const good = await issuer.sign({ aud: AUD });
    const [, payload, signature] = good.split(".") as [string, string, string];
    const badHeaders = [
      { alg: "ES256", typ: "jwt", kid: "k1" }, // RFC 9068 §4: typ at+jwt
      { alg: "ES256", kid: "k1" },
      { alg: "ES384", typ: "at+jwt", kid: "k1" }, // not allowed here
      { alg: "HS256", typ: "at+jwt", kid: "k1" },
      { alg: "none", typ: "at+jwt" },
      { alg: "ES256", typ: "at+jwt", kid: "k1", crit: ["exp"] },
      { alg: "ES256", typ: "at+jwt", kid: "k1", b64: false, crit: ["b64"] },
      { alg: ["ES256"], typ: "at+jwt", kid: "k1" },
    ];
    for (let pass = 0; pass < 3; pass++) {
      for (const header of badHeaders) await refused(v.verify(`${b64(header)}.${payload}.${signature}`));
      // Not JSON, not an object, not base64url JSON at all.
      await refused(v.verify(`${Buffer.from("{").toString("base64url")}.${payload}.${signature}`));
      await refused(v.verify(`${b64([1])}.${payload}.${signature}`));
      await refused(v.verify(`e30.${payload}.${signature}`));
      expect((await v.verify(good)).audience).toEqual([AUD]);
    }
  });

  it("many distinct headers (a flood of kids) cannot crowd out or corrupt a good header's decision", async () => {
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    const good = await issuer.sign({ aud: AUD });
    const [, payload, signature] = good.split(".") as [string, string, string];
    expect((await v.verify(good)).audience).toEqual([AUD]);
    for (let i = 0; i < 300; i++) {
      await refused(
        v.verify(`${b64({ alg: "ES256", typ: "at+jwt", kid: `k${i}` })}.${payload}.${signature}`),
      );
      // kid k1 with other members: a different header string, judged on its own.
      await refused(
        v.verify(`${b64({ alg: "ES256", typ: "at+jwt", kid: "k1", n: i })}.${payload}.${signature}`),
      );
    }
    expect((await v.verify(good)).audience).toEqual([AUD]);
    // A huge header (far beyond any real one) is refused, and so is one with a huge payload.
    await refused(
      v.verify(
        `${b64({ alg: "ES256", typ: "at+jwt", kid: "k1", pad: "x".repeat(100_000) })}.${payload}.${signature}`,
      ),
    );
    await refused(v.verify(`${good.split(".")[0]}.${b64({ pad: "x".repeat(1_000_000) })}.${signature}`));
  });

  it("one verifier's remembered decisions are its own (another key set, another allow-list)", async () => {
    const other = await newKey("k1"); // same kid, another key
    const mine = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } });
    const theirs = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [other.publicJwk] } });
    const edOnly = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwks: { keys: [issuer.publicJwk] },
      algorithms: ["EdDSA"],
    });
    const token = await issuer.sign({ aud: AUD });
    for (let pass = 0; pass < 2; pass++) {
      expect((await mine.verify(token)).audience).toEqual([AUD]);
      await refused(theirs.verify(token));
      await refused(edOnly.verify(token));
    }
  });

  it("a single configured key: the header decides nothing about which key verifies", async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
    const v = jwtVerifier({ issuer: issuer.issuer, audience: AUD, key: publicKey, algorithms: ["ES256"] });
    const claims = () => ({ iss: issuer.issuer, aud: AUD, exp: nowSeconds() + 60 });
    const good = await signed({ alg: "ES256", typ: "at+jwt", kid: "k1" }, claims(), privateKey);
    const wrongKey = await signed({ alg: "ES256", typ: "at+jwt", kid: "k1" }, claims(), issuer.privateKey);
    for (let pass = 0; pass < 2; pass++) {
      expect((await v.verify(good)).audience).toEqual([AUD]);
      await refused(v.verify(wrongKey));
    }
  });

  it("claims are checked for every token under a remembered header (iss, aud, exp, nbf, iat, scope)", async () => {
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwks: { keys: [issuer.publicJwk] },
      clockToleranceSeconds: 5,
    });
    const now = nowSeconds();
    const header = { alg: "ES256", typ: "at+jwt", kid: "k1" };
    const base = { iss: issuer.issuer, aud: AUD, exp: now + 60 };
    expect((await v.verify(await signed(header, base, issuer.privateKey))).audience).toEqual([AUD]);
    for (const claims of [
      { ...base, iss: `${issuer.issuer}/` },
      { ...base, aud: "https://mcp.example.com/" },
      { ...base, exp: now - 10 },
      { ...base, exp: undefined },
      { ...base, exp: "soon" },
      { ...base, nbf: now + 60 },
      { ...base, iat: "now" },
      { ...base, scope: "a\u0000b" },
      { ...base, cnf: { jkt: "short" } },
    ]) {
      await refused(v.verify(await signed(header, claims, issuer.privateKey)));
    }
    await refused(
      v.verify(await signed(header, [1] as unknown as Record<string, unknown>, issuer.privateKey)),
    );
  });

  it("an RSA key below 2048 bits and a key of another curve stay refused on repeats", async () => {
    const { generateKeyPairSync } = await import("node:crypto");
    const rsa1024 = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const jwk = { ...(rsa1024.publicKey.export({ format: "jwk" }) as JWK), kid: "r", alg: "RS256" };
    const v = jwtVerifier({
      issuer: issuer.issuer,
      audience: AUD,
      jwks: { keys: [jwk] },
      algorithms: ["RS256"],
    });
    const input = `${b64({ alg: "RS256", typ: "at+jwt", kid: "r" })}.${b64({ iss: issuer.issuer, aud: AUD, exp: nowSeconds() + 60 })}`;
    const token = `${input}.${nodeSign("sha256", Buffer.from(input), rsa1024.privateKey).toString("base64url")}`;
    const p384 = await generateKeyPair("ES384", { extractable: true });
    const p384Jwk = { ...(await exportJWK(p384.publicKey)), kid: "k1", alg: "ES256" };
    const curveMismatch = jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [p384Jwk] } });
    const es256 = await issuer.sign({ aud: AUD });
    for (let pass = 0; pass < 2; pass++) {
      await refused(v.verify(token));
      await refused(curveMismatch.verify(es256));
    }
  });

  it("behind the cache: a hit only for the exact token verified, misses verified in full", async () => {
    const v = cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: AUD, jwks: { keys: [issuer.publicJwk] } }),
      { maxEntries: 4 },
    );
    const tokens = await Promise.all(
      Array.from({ length: 12 }, (_, i) => issuer.sign({ aud: AUD, sub: `u${i}` })),
    );
    for (let pass = 0; pass < 2; pass++) {
      for (const [i, token] of tokens.entries()) {
        expect((await v.verify(token)).subject).toBe(`u${i}`);
        const [header, payload, signature] = token.split(".") as [string, string, string];
        // Same ending (signature) as a cached token, another payload: never a hit.
        await refused(
          v.verify(
            `${header}.${b64({ iss: issuer.issuer, aud: AUD, exp: nowSeconds() + 60, sub: "admin" })}.${signature}`,
          ),
        );
        const flipped = Buffer.from(signature, "base64url");
        flipped[20] = flipped[20]! ^ 0x80;
        await refused(v.verify(`${header}.${payload}.${flipped.toString("base64url")}`));
      }
    }
    expect(v.size).toBeLessThanOrEqual(4);
  });
});
