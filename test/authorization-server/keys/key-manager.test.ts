import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createLocalJWKSet, jwtVerify } from "jose";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { contextOf } from "../../../src/authorization-server/context-of.js";
import {
  createKeyManager,
  RETIRED_KEY_MARGIN_SECONDS,
} from "../../../src/authorization-server/keys/key-manager.js";
import {
  openPrivateJwk,
  rewrappedPrivateJwk,
  SigningKeyDecryptionError,
} from "../../../src/authorization-server/keys/signing-key-envelope.js";
import { silentLogger } from "../../../src/shared/log.js";
import {
  createKeyEncryptionKeyring,
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../../../src/shared/secret-envelope.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { codeTokens, decodeHeader, ISSUER, makeServer, RESOURCE, type TestServer } from "../helpers.js";

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

  it("ES256 signatures are raw R || S (64 bytes, RFC 7518 §3.4), not DER, and verify with node:crypto too", async () => {
    const { keys } = manager();
    const token = await keys.signAccessToken(CLAIMS);
    const [h, p, s] = token.split(".");
    const signature = Buffer.from(s!, "base64url");
    expect(signature).toHaveLength(64);
    const [jwk] = (await keys.publicJwks()).keys;
    const { createPublicKey, verify } = await import("node:crypto");
    const publicKey = createPublicKey({ key: jwk as never, format: "jwk" });
    const input = Buffer.from(`${h}.${p}`);
    expect(verify("sha256", input, { key: publicKey, dsaEncoding: "ieee-p1363" }, signature)).toBe(true);
    const flipped = Buffer.from(signature);
    flipped[10]! ^= 1;
    expect(verify("sha256", input, { key: publicKey, dsaEncoding: "ieee-p1363" }, flipped)).toBe(false);
  });

  it("an EdDSA key stored beside the ES256 one signs when it is the newest (RFC 8037), verifiable against the JWKS", async () => {
    const { keys, store, clock } = manager(createMemoryStore(), undefined, 0);
    await keys.ensureSigningKey();
    const { calculateJwkThumbprint, exportJWK, generateKeyPair } = await import("jose");
    const pair = await generateKeyPair("EdDSA", { extractable: true });
    const publicJwk = await exportJWK(pair.publicKey);
    const kid = await calculateJwkThumbprint(publicJwk);
    await store.addSigningKey({
      kid,
      alg: "EdDSA",
      publicJwk: { ...publicJwk, kid, alg: "EdDSA", use: "sig" },
      privateJwk: { ...(await exportJWK(pair.privateKey)), kid, alg: "EdDSA" },
      createdAt: clock.now + 1,
    });
    const token = await keys.signAccessToken(CLAIMS);
    expect(decodeHeader(token)).toMatchObject({ alg: "EdDSA", typ: "at+jwt", kid });
    const { payload } = await jwtVerify(token, createLocalJWKSet((await keys.publicJwks()) as never), {
      issuer: ISSUER,
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

  it("a signer kept ready between tokens never outlives its key list: rotation elsewhere, a clock set back", async () => {
    const store = createMemoryStore();
    const clock = { now: 1_767_225_600_000 };
    const a = manager(store, clock, 5000);
    const b = manager(store, clock, 5000);
    await a.keys.ensureSigningKey();
    // Two tokens from the same fresh list: the second from the prepared signer, same header, both valid.
    const first = await b.keys.signAccessToken(CLAIMS);
    const second = await b.keys.signAccessToken({ ...CLAIMS, jti: "second" });
    expect(second.split(".")[0]).toBe(first.split(".")[0]);
    expect((await b.keys.verifyAccessToken(second))?.jti).toBe("second");
    const rotated = await a.keys.rotate();
    // Within b's cache the old key still signs (as before: the list is cached for cacheMs)...
    expect(decodeHeader(await b.keys.signAccessToken(CLAIMS)).kid).not.toBe(rotated);
    // ...but a clock set back makes the list stale at once, and the rotation is seen.
    clock.now -= 1;
    expect(decodeHeader(await b.keys.signAccessToken(CLAIMS)).kid).toBe(rotated);
    // The same instance's rotation is seen by the very next token.
    const again = await b.keys.rotate();
    expect(decodeHeader(await b.keys.signAccessToken(CLAIMS)).kid).toBe(again);
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

describe("signing private keys at rest (AES-256-GCM under a key-encryption key)", () => {
  const KEK_A = generateKeyEncryptionKey();
  const KEK_B = generateKeyEncryptionKey();
  const KEK_A_ID = keyEncryptionKeyId(parseKeyEncryptionKey(KEK_A, "a"));
  const KEK_B_ID = keyEncryptionKeyId(parseKeyEncryptionKey(KEK_B, "b"));
  let dir: string;
  let path: string;
  const opened: { close(): unknown }[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "gatehouse-kek-"));
    path = join(dir, "gatehouse.sqlite");
  });
  afterEach(async () => {
    for (const o of opened.splice(0)) await o.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** A server on the SQLite file with these KEKs (none: the option is left out). */
  async function start(keyEncryptionKeys?: string[]) {
    const store = createSqliteStore({ path });
    opened.push(store);
    const t = await makeServer({ store, ...(keyEncryptionKeys ? { keyEncryptionKeys } : {}) });
    opened.push(t.server);
    return t;
  }

  /** What start-up throws, with the store closed again. */
  async function startFailure(keyEncryptionKeys?: string[]): Promise<SigningKeyDecryptionError> {
    const error = await start(keyEncryptionKeys).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SigningKeyDecryptionError);
    return error as SigningKeyDecryptionError;
  }

  /** The rows as SQLite holds them, read over a connection of our own (not through the store). */
  function rows(): { kid: string; private_jwk: string }[] {
    const db = new Database(path, { readonly: true });
    try {
      return db.prepare("SELECT kid, private_jwk FROM signing_keys ORDER BY created_at, kid").all() as {
        kid: string;
        private_jwk: string;
      }[];
    } finally {
      db.close();
    }
  }

  function updateRow(kid: string, privateJwk: string): void {
    const db = new Database(path);
    try {
      db.prepare("UPDATE signing_keys SET private_jwk = ? WHERE kid = ?").run(privateJwk, kid);
    } finally {
      db.close();
    }
  }

  /** An access token signed by the server's current key. */
  function sign(t: TestServer): Promise<string> {
    return contextOf(t.server).keys.signAccessToken(CLAIMS);
  }

  async function closeAll() {
    for (const o of opened.splice(0)) await o.close();
  }

  it("the stored row is an envelope naming its KEK, without the private scalar d; tokens round-trip", async () => {
    const t = await start([KEK_A]);
    const token = await sign(t);
    const [row] = rows();
    const stored = JSON.parse(row!.private_jwk) as Record<string, unknown>;
    expect(Object.keys(stored).sort()).toEqual(["ct", "enc", "iv", "kek"]);
    expect(stored).toMatchObject({ enc: "A256GCM", kek: KEK_A_ID });
    expect(stored.d).toBeUndefined();
    // The private scalar itself appears nowhere in the row, in any spelling JSON could give it.
    const keyring = await createKeyEncryptionKeyring([KEK_A]);
    const [record] = await t.store.listSigningKeys();
    const jwk = await openPrivateJwk(record!, keyring);
    expect(typeof jwk.d).toBe("string");
    expect(row!.private_jwk).not.toContain(jwk.d);
    expect(row!.private_jwk).not.toContain(KEK_A);
    expect(decodeHeader(token).kid).toBe(row!.kid);

    // A restart with the same KEK decrypts the stored key and keeps signing with it.
    await closeAll();
    const again = await start([KEK_A]);
    const next = await sign(again);
    expect(decodeHeader(next).kid).toBe(row!.kid);
    expect(await contextOf(again.server).keys.verifyAccessToken(token)).toBeDefined();
    expect(again.log.lines.filter((l) => l.level === "warn").map((l) => l.event)).not.toContain(
      "signing_keys_plaintext",
    );
  });

  it("a wrong KEK stops start-up with an error naming the key id and KEK id, never key material", async () => {
    await start([KEK_A]);
    const [row] = rows();
    await closeAll();
    const error = await startFailure([KEK_B]);
    expect(error.code).toBe("ERR_KEK_UNKNOWN");
    expect(error.kid).toBe(row!.kid);
    expect(error.message).toContain(row!.kid);
    expect(error.message).toContain(KEK_A_ID);
    expect(error.message).toContain(KEK_B_ID);
    const envelope = JSON.parse(row!.private_jwk) as { ct: string };
    for (const secret of [KEK_A, KEK_B, envelope.ct]) expect(error.message).not.toContain(secret);
  });

  it("an encrypted store and no KEK configured: start-up refused, naming the key", async () => {
    await start([KEK_A]);
    const [row] = rows();
    await closeAll();
    const error = await startFailure(undefined);
    expect(error.code).toBe("ERR_KEK_NOT_CONFIGURED");
    expect(error.message).toContain(row!.kid);
  });

  it("tampered ciphertext or nonce is refused (GCM tag), naming the key", async () => {
    await start([KEK_A]);
    const [row] = rows();
    await closeAll();
    const envelope = JSON.parse(row!.private_jwk) as Record<string, string>;
    const flip = (s: string) =>
      s[5] === "A" ? `${s.slice(0, 5)}B${s.slice(6)}` : `${s.slice(0, 5)}A${s.slice(6)}`;
    for (const member of ["ct", "iv"]) {
      updateRow(row!.kid, JSON.stringify({ ...envelope, [member]: flip(envelope[member]!) }));
      const error = await startFailure([KEK_A]);
      expect(error.code).toBe("ERR_ENVELOPE_AUTHENTICATION");
      expect(error.kid).toBe(row!.kid);
      await closeAll();
    }
    // A truncated ciphertext (no room for the tag) and a non-envelope are refused too.
    updateRow(row!.kid, JSON.stringify({ ...envelope, ct: envelope.ct!.slice(0, 10) }));
    expect((await startFailure([KEK_A])).code).toBe("ERR_ENVELOPE_MALFORMED");
  });

  it("envelopes swapped between two keys' rows do not open (AAD binds each to its kid)", async () => {
    const t = await start([KEK_A]);
    await t.server.rotateKeys();
    const [first, second] = rows();
    await closeAll();
    updateRow(first!.kid, second!.private_jwk);
    updateRow(second!.kid, first!.private_jwk);
    const error = await startFailure([KEK_A]);
    expect(error.code).toBe("ERR_ENVELOPE_AUTHENTICATION");
    expect([first!.kid, second!.kid]).toContain(error.kid);
  });

  it("KEK rotation: new KEK first, old one after; re-encrypting each key lets the new KEK stand alone", async () => {
    const t = await start([KEK_A]);
    const oldToken = await sign(t);
    await closeAll();
    // Both configured: the key sealed under A still opens; keys created now are sealed under B.
    const both = await start([KEK_B, KEK_A]);
    const firstKid = decodeHeader(oldToken).kid as string;
    const rotatedKid = await both.server.rotateKeys();
    const kekOf = () =>
      Object.fromEntries(rows().map((r) => [r.kid, (JSON.parse(r.private_jwk) as { kek: string }).kek]));
    expect(kekOf()).toEqual({ [firstKid]: KEK_A_ID, [rotatedKid]: KEK_B_ID });
    // What `gatehouse keys rewrap` does for each row (test/cli covers the command itself).
    const keyring = await createKeyEncryptionKeyring([KEK_B, KEK_A]);
    for (const record of await both.store.listSigningKeys()) {
      const next = await rewrappedPrivateJwk(record, keyring);
      // Already under the current KEK: nothing to rewrite.
      if (record.kid === rotatedKid) expect(next).toBeUndefined();
      if (next) updateRow(record.kid, JSON.stringify(next));
    }
    await closeAll();
    const only = await start([KEK_B]);
    expect(rows().every((r) => (JSON.parse(r.private_jwk) as { kek: string }).kek === KEK_B_ID)).toBe(true);
    expect(await contextOf(only.server).keys.verifyAccessToken(oldToken)).toBeDefined();
    await closeAll();
    expect((await startFailure([KEK_A])).code).toBe("ERR_KEK_UNKNOWN");
  });

  it("rows written before encryption still work, are named in a warning, and rewrap encrypts them", async () => {
    const plain = await start(undefined);
    expect(plain.log.lines.map((l) => l.event)).toContain("signing_keys_unencrypted");
    const token = await sign(plain);
    const [row] = rows();
    expect(JSON.parse(row!.private_jwk)).toHaveProperty("d");
    await closeAll();

    const t = await start([KEK_A]);
    const warning = t.log.lines.find((l) => l.event === "signing_keys_plaintext");
    expect(warning?.fields).toMatchObject({ kids: [row!.kid] });
    expect(decodeHeader(await sign(t)).kid).toBe(row!.kid);
    const keyring = await createKeyEncryptionKeyring([KEK_A]);
    const [record] = await t.store.listSigningKeys();
    updateRow(row!.kid, JSON.stringify(await rewrappedPrivateJwk(record!, keyring)));
    await closeAll();
    const after = await start([KEK_A]);
    expect(JSON.parse(rows()[0]!.private_jwk)).not.toHaveProperty("d");
    expect(await contextOf(after.server).keys.verifyAccessToken(token)).toBeDefined();
  });

  it("a private key that is not the pair of its public key is refused", async () => {
    await start(undefined);
    const [row] = rows();
    const jwk = JSON.parse(row!.private_jwk) as Record<string, string>;
    updateRow(row!.kid, JSON.stringify({ ...jwk, x: jwk.y, y: jwk.x }));
    await closeAll();
    expect((await startFailure([KEK_A])).code).toBe("ERR_KEY_MISMATCH");
  });

  it("keyEncryptionKeys is checked at start-up: empty, malformed, short and repeated keys are refused", async () => {
    const bad: unknown[][] = [
      [],
      ["not-a-key"],
      [KEK_A.slice(0, 42)],
      [`${KEK_A}A`],
      [new Uint8Array(16)],
      [KEK_A, KEK_A],
      // The same key in two spellings is still the same key.
      [KEK_A, Buffer.from(KEK_A, "base64url").toString("base64")],
    ];
    for (const keyEncryptionKeys of bad) {
      const error = await makeServer({ keyEncryptionKeys: keyEncryptionKeys as string[] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, JSON.stringify(keyEncryptionKeys)).toMatchObject({ code: "ERR_INVALID_OPTION" });
      expect((error as Error).message).not.toContain(KEK_A);
    }
    // Raw bytes and padded standard base64 (`openssl rand -base64 32`) are accepted.
    await makeServer({ keyEncryptionKeys: [new Uint8Array(32).fill(7)] });
    await makeServer({ keyEncryptionKeys: [Buffer.from(KEK_B, "base64url").toString("base64")] });
  });

  it("envelopes: a fresh nonce every time; a changed kek member or AAD does not open", async () => {
    const keyring = await createKeyEncryptionKeyring([KEK_A, KEK_B]);
    const plain = new TextEncoder().encode("secret");
    const one = await keyring.seal(plain, "row-1");
    const two = await keyring.seal(plain, "row-1");
    expect(one.iv).not.toBe(two.iv);
    expect(one.ct).not.toBe(two.ct);
    expect(new TextDecoder().decode(await keyring.open(one, "row-1"))).toBe("secret");
    await expect(keyring.open(one, "row-2")).rejects.toMatchObject({ code: "ERR_ENVELOPE_AUTHENTICATION" });
    await expect(keyring.open({ ...one, kek: KEK_B_ID }, "row-1")).rejects.toMatchObject({
      code: "ERR_ENVELOPE_AUTHENTICATION",
    });
    await expect(keyring.open({ ...one, kek: "nope" }, "row-1")).rejects.toMatchObject({
      code: "ERR_KEK_UNKNOWN",
    });
  });
});
