/**
 * The signing keys: creates, rotates and publishes them (`/jwks.json`), signs access tokens
 * (RFC 9068) and verifies this server's own tokens for revocation and introspection.
 */
import { createPrivateKey, type JsonWebKey, type KeyObject, sign as signWithKey } from "node:crypto";
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  jwtVerify,
  SignJWT,
} from "jose";
import type { Logger } from "../../shared/log.js";
import type { KeyEncryptionKeyring } from "../../shared/secret-envelope.js";
import type { AuthorizationStore, SigningKeyRecord } from "../../storage/contract.js";
import type { AccessTokenClaims, KeyManager } from "../core/context.js";
import {
  openPrivateJwk,
  privateKeyProtection,
  SigningKeyDecryptionError,
  sealPrivateJwk,
} from "./signing-key-envelope.js";

/** How long a retired key stays published beyond the longest access token (clock skew, JWKS caches). */
export const RETIRED_KEY_MARGIN_SECONDS = 300;

export interface KeyManagerDeps {
  store: AuthorizationStore;
  issuer: string;
  now(): number;
  accessTokenTtlSeconds: number;
  log: Logger;
  /** How long the key list is cached in memory before storage is read again (default 5 s). */
  cacheMs?: number;
  /**
   * Key-encryption keys: new private keys are stored sealed under the current one
   * (./signing-key-envelope.ts). Without a keyring they are stored unencrypted.
   */
  keyring?: KeyEncryptionKeyring;
}

export interface ServerKeyManager extends KeyManager {
  /** Creates the first signing key when storage holds none that can sign. */
  ensureSigningKey(): Promise<void>;
  /**
   * Start-up: decrypts every stored private key (a `SigningKeyDecryptionError` naming the key id
   * when one cannot be read: wrong or missing key-encryption key, altered envelope), warns about
   * keys stored unencrypted, then {@link ensureSigningKey}.
   */
  prepareSigningKeys(): Promise<void>;
}

async function newKeyRecord(
  now: number,
  keyring: KeyEncryptionKeyring | undefined,
): Promise<SigningKeyRecord> {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const privateJwk = await exportJWK(privateKey);
  // RFC 7638 thumbprint as `kid`: stable, derived from the key, never guessable in advance.
  const kid = await calculateJwkThumbprint(publicJwk);
  const fullPrivateJwk = { ...privateJwk, kid, alg: "ES256" };
  return {
    kid,
    alg: "ES256",
    publicJwk: { ...publicJwk, kid, alg: "ES256", use: "sig" },
    privateJwk: keyring ? { ...(await sealPrivateJwk(keyring, kid, fullPrivateJwk)) } : fullPrivateJwk,
    createdAt: now,
  };
}

/**
 * How node:crypto signs for a JWS `alg` (RFC 7518 §3.4, RFC 8037 §3.1): ES256 is ECDSA P-256 over
 * SHA-256 with the signature as the raw 64-byte R || S (IEEE P1363), never DER; EdDSA hashes
 * internally (no digest name). Other algorithms are signed by jose.
 */
const NODE_SIGNERS: Record<string, { digest: string | null; dsaEncoding?: "ieee-p1363" }> = {
  ES256: { digest: "sha256", dsaEncoding: "ieee-p1363" },
  EdDSA: { digest: null },
};

/** A private key ready to sign: a node:crypto KeyObject for {@link NODE_SIGNERS}, else jose's. */
type ImportedKey = { kind: "node"; key: KeyObject } | { kind: "jose"; key: CryptoKey | Uint8Array };

/**
 * A compact JWS (RFC 7515 §7.1) signed synchronously by node:crypto: the same bytes as jose's
 * `SignJWT` (header and payload JSON, base64url without padding) without WebCrypto's asynchronous
 * job per signature, the largest fixed cost of issuing a token.
 */
function signCompact(ready: ReadySigner, payload: Record<string, unknown>): string {
  const input = `${ready.headerSegment}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}`;
  // The input is base64url, ASCII only: latin1 gives the same bytes as UTF-8 without the scan.
  const signature = signWithKey(ready.digest, Buffer.from(input, "latin1"), ready.signingKey);
  return `${input}.${signature.toString("base64url")}`;
}

/**
 * The current signing key made ready for {@link signCompact}: its protected header already encoded
 * (the same for every token it signs) and the sign options built once.
 */
interface ReadySigner {
  record: SigningKeyRecord;
  headerSegment: string;
  digest: string | null;
  signingKey: KeyObject | { key: KeyObject; dsaEncoding: "ieee-p1363" };
}

/** RFC 9068 §2.1: the access token's protected header (`typ: at+jwt`). */
function accessTokenHeader(record: SigningKeyRecord): { alg: string; typ: string; kid: string } {
  return { alg: record.alg, typ: "at+jwt", kid: record.kid };
}

function readySigner(record: SigningKeyRecord, key: KeyObject): ReadySigner {
  const signer = NODE_SIGNERS[record.alg];
  if (!signer) throw new Error(`no node:crypto signer for ${record.alg}`);
  return {
    record,
    headerSegment: Buffer.from(JSON.stringify(accessTokenHeader(record))).toString("base64url"),
    digest: signer.digest,
    signingKey: signer.dsaEncoding ? { key, dsaEncoding: signer.dsaEncoding } : key,
  };
}

/** The newest key not yet retired: every instance reading the same rows picks the same signer. */
function currentSigner(keys: readonly SigningKeyRecord[]): SigningKeyRecord | undefined {
  let best: SigningKeyRecord | undefined;
  for (const k of keys) {
    if (k.retiredAt !== undefined) continue;
    if (!best || k.createdAt > best.createdAt || (k.createdAt === best.createdAt && k.kid > best.kid))
      best = k;
  }
  return best;
}

/**
 * Signing keys over the store: ES256, `kid` = JWK thumbprint, access tokens as RFC 9068 `at+jwt`.
 * The key list is cached for a few seconds and re-read, so several instances sharing a database
 * see a rotation quickly; a retired key stays in the JWKS until every token it signed has expired.
 */
export function createKeyManager(deps: KeyManagerDeps): ServerKeyManager {
  const cacheMs = deps.cacheMs ?? 5000;
  /**
   * The key list as last read, and (`ready`) its current signer prepared for node:crypto: while the
   * list is fresh a token is signed without a promise turn for the list or the key. A new list
   * (re-read, rotation, a key created) is a new object, so it never keeps a stale signer.
   */
  let cached: { keys: SigningKeyRecord[]; readAt: number; ready?: ReadySigner } | undefined;

  /** The list while it is fresh (cacheMs, and never from a clock that went back). */
  function freshCache() {
    const t = deps.now();
    return cached && t - cached.readAt < cacheMs && t >= cached.readAt ? cached : undefined;
  }
  const imported = new Map<string, ImportedKey>();

  async function keys(): Promise<SigningKeyRecord[]> {
    const fresh = freshCache();
    if (fresh) return fresh.keys;
    const t = deps.now();
    const list = await deps.store.listSigningKeys();
    cached = { keys: list, readAt: t };
    return list;
  }

  function published(list: readonly SigningKeyRecord[]): SigningKeyRecord[] {
    const t = deps.now();
    return list.filter((k) => k.retiredAt === undefined || (k.expiresAt !== undefined && k.expiresAt > t));
  }

  /**
   * Keys this instance could not open, by kid, with the envelope that failed: said once each, and
   * not tried again unless the row changes (`gatehouse keys rewrap` re-seals it).
   */
  const unreadable = new Map<string, string>();

  /**
   * The key to sign with from `list` and its private key: the current signer; when that cannot be
   * opened (sealed under a key-encryption key this instance lacks: issue 26), the newest key still
   * published that can, so tokens keep verifying against the JWKS while the operator fixes the
   * configuration. Undefined when no published key can be opened.
   */
  async function chooseSigner(
    list: readonly SigningKeyRecord[],
  ): Promise<{ record: SigningKeyRecord; key: ImportedKey } | undefined> {
    const current = currentSigner(list);
    if (!current) return undefined;
    const older = published(list)
      .filter((k) => k !== current)
      .sort((a, b) => b.createdAt - a.createdAt || (a.kid < b.kid ? 1 : -1));
    const failed: { record: SigningKeyRecord; error: SigningKeyDecryptionError }[] = [];
    let chosen: { record: SigningKeyRecord; key: ImportedKey } | undefined;
    for (const record of [current, ...older]) {
      if (unreadable.get(record.kid) === JSON.stringify(record.privateJwk)) continue;
      try {
        chosen = { record, key: await privateKey(record) };
        break;
      } catch (error) {
        if (!(error instanceof SigningKeyDecryptionError)) throw error;
        failed.push({ record, error });
      }
    }
    for (const { record, error } of failed) {
      unreadable.set(record.kid, JSON.stringify(record.privateJwk));
      deps.log.error("signing_key_unreadable", {
        message: chosen
          ? `Signing key ${record.kid} cannot be opened by this server: signing with the older key ${chosen.record.kid} while it is published. Configure the key-encryption key it is sealed under (or rotate again with the servers' key).`
          : `Signing key ${record.kid} cannot be opened by this server, and no published key can: it cannot sign access tokens. Configure the key-encryption key it is sealed under.`,
        kid: record.kid,
        kek: error.kekId,
        reason: error.code,
        ...(chosen ? { signingWith: chosen.record.kid } : {}),
        ...(chosen?.record.expiresAt !== undefined
          ? { publishedUntil: new Date(chosen.record.expiresAt).toISOString() }
          : {}),
      });
    }
    return chosen;
  }

  /** The signer chosen from the current key list, and that list's cache entry (to keep it ready). */
  async function signer(): Promise<{ record: SigningKeyRecord; key: ImportedKey; from: typeof cached }> {
    let list = await keys();
    if (!currentSigner(list)) {
      cached = undefined;
      await manager.ensureSigningKey();
      list = await keys();
    }
    const from = cached?.keys === list ? cached : undefined;
    const chosen = await chooseSigner(list);
    if (!chosen) throw new Error("no signing key this server can open is published");
    return { ...chosen, from };
  }

  /** The record's private key, opened (signing-key-envelope.ts) and imported once per `kid`. */
  async function privateKey(record: SigningKeyRecord): Promise<ImportedKey> {
    let key = imported.get(record.kid);
    if (!key) {
      const jwk = await openPrivateJwk(record, deps.keyring);
      key =
        record.alg in NODE_SIGNERS
          ? { kind: "node", key: createPrivateKey({ key: jwk as JsonWebKey, format: "jwk" }) }
          : { kind: "jose", key: await importJWK(jwk, record.alg) };
      imported.set(record.kid, key);
    }
    return key;
  }

  const manager: ServerKeyManager = {
    async prepareSigningKeys() {
      const list = await deps.store.listSigningKeys();
      const plaintext: string[] = [];
      // Every stored key, retired ones included: a key that cannot be read is a configuration
      // error to fix now, not a failure at the next rotation or on the first request.
      for (const record of list) {
        await openPrivateJwk(record, deps.keyring);
        if (privateKeyProtection(record).kind === "plaintext") plaintext.push(record.kid);
      }
      if (!deps.keyring) {
        deps.log.warn("signing_keys_unencrypted", {
          message:
            "No key-encryption key is configured: signing private keys are stored UNENCRYPTED. Set keyEncryptionKeys (gatehouse serve: GATEHOUSE_KEY_ENCRYPTION_KEY or --key-encryption-key-file).",
        });
      } else if (plaintext.length) {
        deps.log.warn("signing_keys_plaintext", {
          message:
            "Some signing private keys are stored unencrypted: run `gatehouse keys rewrap` to encrypt them.",
          kids: plaintext,
        });
      }
      await manager.ensureSigningKey();
    },

    async ensureSigningKey() {
      const list = await deps.store.listSigningKeys();
      if (currentSigner(list)) {
        cached = { keys: list, readAt: deps.now() };
        return;
      }
      // Two instances starting together may both add a key; both stay valid and the newest signs.
      const record = await newKeyRecord(deps.now(), deps.keyring);
      await deps.store.addSigningKey(record);
      deps.log.info("signing_key_created", { kid: record.kid });
      cached = undefined;
    },

    /** RFC 9068 §2.2: iss, exp, aud, sub, client_id, iat, jti (and scope); header `typ: at+jwt`. */
    async signAccessToken(claims: AccessTokenClaims) {
      const payload = { ...claims, iss: deps.issuer };
      const ready = freshCache()?.ready;
      if (ready) return signCompact(ready, payload);
      const { record, key, from } = await signer();
      if (key.kind !== "node")
        return new SignJWT(payload).setProtectedHeader(accessTokenHeader(record)).sign(key.key);
      const prepared = readySigner(record, key.key);
      // Kept only on the list it was chosen from, and only while that list is still the one held.
      if (from && freshCache() === from) from.ready = prepared;
      return signCompact(prepared, payload);
    },

    async signingStatus() {
      const list = await keys();
      const current = currentSigner(list);
      // No key yet: the next signature creates one (ensureSigningKey).
      if (!current) return "ok";
      const chosen = await chooseSigner(list);
      if (!chosen) return "unavailable";
      return chosen.record === current ? "ok" : "degraded";
    },

    async publicJwks() {
      return { keys: published(await keys()).map((k) => ({ ...k.publicJwk })) };
    },

    async rotate() {
      const record = await newKeyRecord(deps.now(), deps.keyring);
      const t = deps.now();
      await deps.store.addSigningKey(record, {
        retiredAt: t,
        // Old tokens live at most accessTokenTtlSeconds; keep their key published past that.
        expiresAt: t + (deps.accessTokenTtlSeconds + RETIRED_KEY_MARGIN_SECONDS) * 1000,
      });
      cached = undefined;
      deps.log.info("signing_key_rotated", { kid: record.kid });
      return record.kid;
    },

    async verifyAccessToken(token) {
      if (typeof token !== "string" || token.split(".").length !== 3) return undefined;
      const jwks = createLocalJWKSet((await manager.publicJwks()) as { keys: JWK[] });
      try {
        const { payload } = await jwtVerify(token, jwks, {
          issuer: deps.issuer,
          typ: "at+jwt",
          algorithms: ["ES256", "EdDSA"],
          currentDate: new Date(deps.now()),
          requiredClaims: ["exp", "iat", "jti", "sub", "aud", "client_id"],
        });
        if (
          typeof payload.jti !== "string" ||
          typeof payload.sub !== "string" ||
          typeof payload.aud !== "string" ||
          typeof payload.client_id !== "string" ||
          typeof payload.exp !== "number" ||
          typeof payload.iat !== "number"
        ) {
          return undefined;
        }
        return {
          iss: deps.issuer,
          sub: payload.sub,
          aud: payload.aud,
          client_id: payload.client_id,
          scope: typeof payload.scope === "string" ? payload.scope : "",
          jti: payload.jti,
          iat: payload.iat,
          exp: payload.exp,
          // RFC 9449 §6.1: a DPoP-bound token's key thumbprint, for introspection (§6.2).
          ...(typeof (payload.cnf as { jkt?: unknown } | undefined)?.jkt === "string"
            ? { cnf: { jkt: (payload.cnf as { jkt: string }).jkt } }
            : {}),
        };
      } catch {
        return undefined;
      }
    },
  };
  return manager;
}
