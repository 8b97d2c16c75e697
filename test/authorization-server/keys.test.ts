import { createLocalJWKSet, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { createKeyManager, RETIRED_KEY_MARGIN_SECONDS } from "../../src/authorization-server/keys.js";
import { silentLogger } from "../../src/shared/log.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { codeTokens, decodeHeader, ISSUER, makeServer, RESOURCE } from "./helpers.js";

const CLAIMS = {
  sub: "u",
  client_id: "c",
  aud: RESOURCE,
  scope: "a",
  jti: "j1",
  iat: 1_767_225_600,
  exp: 1_767_225_900,
};

function manager(store = createMemoryStore(), clock = { now: 1_767_225_600_000 }, cacheMs?: number) {
  return {
    clock,
    store,
    keys: createKeyManager({
      store,
      issuer: ISSUER,
      now: () => clock.now,
      accessTokenTtlSeconds: 300,
      log: silentLogger,
      ...(cacheMs === undefined ? {} : { cacheMs }),
    }),
  };
}

describe("signing keys", () => {
  it("creates an ES256 key on first start, kid = RFC 7638 thumbprint, JWKS with public parts only", async () => {
    const { keys, store } = manager();
    await keys.ensureSigningKey();
    await keys.ensureSigningKey();
    expect(await store.listSigningKeys()).toHaveLength(1);
    const jwks = await keys.publicJwks();
    expect(jwks.keys).toHaveLength(1);
    const [k] = jwks.keys;
    expect(k).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
    expect(k!.d).toBeUndefined();
    const { calculateJwkThumbprint } = await import("jose");
    expect(k!.kid).toBe(await calculateJwkThumbprint(k as never));
  });

  it("signs RFC 9068 tokens: typ at+jwt, iss added, verifiable against the JWKS", async () => {
    const { keys, clock } = manager();
    const token = await keys.signAccessToken(CLAIMS);
    expect(decodeHeader(token).typ).toBe("at+jwt");
    const { payload } = await jwtVerify(token, createLocalJWKSet((await keys.publicJwks()) as never), {
      issuer: ISSUER,
      audience: RESOURCE,
      typ: "at+jwt",
      currentDate: new Date(clock.now),
    });
    expect(payload).toMatchObject(CLAIMS);
    expect(await keys.verifyAccessToken(token)).toMatchObject({ ...CLAIMS, iss: ISSUER });
  });

  it("rotation: new key signs, the retired one stays published until its tokens expire, then goes", async () => {
    const { keys, clock } = manager();
    const oldToken = await keys.signAccessToken(CLAIMS);
    const oldKid = decodeHeader(oldToken).kid;
    const newKid = await keys.rotate();
    expect(newKid).not.toBe(oldKid);
    const newToken = await keys.signAccessToken(CLAIMS);
    expect(decodeHeader(newToken).kid).toBe(newKid);
    let kids = (await keys.publicJwks()).keys.map((k) => k.kid);
    expect(kids).toEqual(expect.arrayContaining([oldKid, newKid]));
    expect(await keys.verifyAccessToken(oldToken)).toBeDefined();
    clock.now += (300 + RETIRED_KEY_MARGIN_SECONDS + 1) * 1000;
    kids = (await keys.publicJwks()).keys.map((k) => k.kid);
    expect(kids).toEqual([newKid]);
  });

  it("another instance on the same store sees a rotation once its short cache lapses", async () => {
    const store = createMemoryStore();
    const clock = { now: 1_767_225_600_000 };
    const a = manager(store, clock, 5000);
    const b = manager(store, clock, 5000);
    await a.keys.ensureSigningKey();
    const before = decodeHeader(await b.keys.signAccessToken(CLAIMS)).kid;
    const rotated = await a.keys.rotate();
    clock.now += 5001;
    const after = decodeHeader(await b.keys.signAccessToken(CLAIMS)).kid;
    expect(before).not.toBe(rotated);
    expect(after).toBe(rotated);
  });

  it("verifyAccessToken refuses foreign, tampered, expired and wrongly typed tokens", async () => {
    const { keys, clock } = manager();
    const other = manager();
    const token = await keys.signAccessToken(CLAIMS);
    expect(await keys.verifyAccessToken(await other.keys.signAccessToken(CLAIMS))).toBeUndefined();
    const [h, p, s] = token.split(".");
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...CLAIMS, scope: "admin", iss: ISSUER })).toString("base64url")}.${s}`;
    expect(await keys.verifyAccessToken(tampered)).toBeUndefined();
    expect(await keys.verifyAccessToken(`${h}.${p}`)).toBeUndefined();
    expect(await keys.verifyAccessToken("garbage")).toBeUndefined();
    clock.now += 301_000;
    expect(await keys.verifyAccessToken(token)).toBeUndefined();
  });

  it("server.rotateKeys() rotates and the JWKS endpoint publishes both keys", async () => {
    const t = await makeServer();
    const body = await codeTokens(t);
    const kid = await t.server.rotateKeys();
    const r = await t.server.fetch(new Request(`${ISSUER}/jwks.json`));
    expect(r.headers.get("access-control-allow-origin")).toBe("*");
    const jwks = (await r.json()) as { keys: { kid: string; d?: string }[] };
    expect(jwks.keys.map((k) => k.kid)).toEqual(
      expect.arrayContaining([kid, decodeHeader(body.access_token as string).kid]),
    );
    expect(jwks.keys.every((k) => k.d === undefined)).toBe(true);
  });
});
