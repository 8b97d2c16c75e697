/**
 * Sealed authorization codes: the code handed to the client carries its own record (client,
 * redirect URI, PKCE challenge, resource, scopes, user, sign-in, lifetime), encrypted and
 * authenticated with AES-256-GCM, so issuing a code writes nothing; the store writes the record,
 * already consumed, when the code is redeemed (storage contract `redeemSealedAuthorizationCode`),
 * which is what keeps it single-use (OAuth 2.1 §4.1.2: "MUST NOT be used more than once").
 *
 * Why: a stored code cost a durable write at `/authorize` and another at `/token`; sealed, a code
 * flow makes one (bench/authorization-server.mjs, issue 11).
 *
 * What stays as it was:
 * - Unguessable and unforgeable (RFC 6749 §10.10): without the key no one can make a code that
 *   opens, and a changed one fails authentication; each code has a random 96-bit nonce.
 * - Nothing of the record is readable by the client or in the redirect URL: it is ciphertext.
 * - At rest only the code's SHA-256 (the row's key), as before.
 * - Short-lived (`codeTtlSeconds`, at most 60 s): the sealed expiry is checked at redemption.
 *
 * Keys: a code key is derived (HKDF-SHA256, a label of its own with the issuer) from each
 * configured key-encryption key, so instances configured alike open each other's codes and a KEK
 * rotation keeps the codes of the outgoing key openable; the code names the KEK it was sealed
 * under. Each hour's codes are sealed under a key of their own derived from it (the hour is in the
 * code), because GCM with random 96-bit nonces must stay under 2^32 messages per key (NIST SP
 * 800-38D §8.3): an hour's key would need over a million codes a second to get near. A code names
 * an hour within one of now or it does not open (it has expired anyway: codes live 60 s at most),
 * so a client cannot make the server derive keys for hours of its choosing. Without
 * `keyEncryptionKeys` there is no sealer and codes are stored at issue, as before (instances then
 * share nothing but the store).
 */
import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, type KeyObject } from "node:crypto";
import { keyEncryptionKeyId, parseKeyEncryptionKey } from "../../shared/secret-envelope.js";
import type { AuthorizationCodeRecord } from "../../storage/contract.js";
import type { CodeSealer, SealedCodeRecord } from "../core/context.js";
import { randomBytesFromPool } from "../core/random.js";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Bounded work for a code a client sends: a sealed code of this server is far shorter. */
const MAX_CODE_LENGTH = 4096;
/** The additional authenticated data: a code opens only as a code of this format. */
const AAD = Buffer.from("gatehouse authorization code v1");
const FORMAT = 1;
const HOUR_MS = 3_600_000;
const HOUR_TEXT = /^[0-9a-z]{1,8}$/;

/** The record as a positional array (shorter than an object in the URL), format version first. */
function encode(r: SealedCodeRecord): Buffer {
  return Buffer.from(
    JSON.stringify([
      FORMAT,
      r.grantId,
      r.clientId,
      r.userId,
      r.redirectUri,
      r.redirectUriSent ? 1 : 0,
      r.scopes,
      r.resource,
      r.codeChallenge,
      r.refreshAllowed ? 1 : 0,
      r.sessionHash ?? null,
      r.dpopJkt ?? null,
      r.createdAt,
      r.expiresAt,
    ]),
  );
}

const isText = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isTime = (v: unknown): v is number => Number.isSafeInteger(v);
const isFlag = (v: unknown): v is 0 | 1 => v === 0 || v === 1;

/** The record of an opened code, checked member by member (authenticated, but checked all the same). */
function decode(plaintext: Buffer): SealedCodeRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(plaintext.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 14 || value[0] !== FORMAT) return undefined;
  const [
    ,
    grantId,
    clientId,
    userId,
    redirectUri,
    redirectUriSent,
    scopes,
    resource,
    codeChallenge,
    refreshAllowed,
    sessionHash,
    dpopJkt,
    createdAt,
    expiresAt,
  ] = value as unknown[];
  if (![grantId, clientId, userId, redirectUri, resource, codeChallenge].every(isText)) return undefined;
  if (!isFlag(redirectUriSent) || !isFlag(refreshAllowed) || !isTime(createdAt) || !isTime(expiresAt)) {
    return undefined;
  }
  if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === "string")) return undefined;
  if ((sessionHash !== null && !isText(sessionHash)) || (dpopJkt !== null && !isText(dpopJkt))) {
    return undefined;
  }
  return {
    grantId: grantId as string,
    clientId: clientId as string,
    userId: userId as string,
    redirectUri: redirectUri as string,
    redirectUriSent: redirectUriSent === 1,
    scopes: scopes as string[],
    resource: resource as string,
    codeChallenge: codeChallenge as string,
    codeChallengeMethod: "S256",
    refreshAllowed: refreshAllowed === 1,
    ...(sessionHash === null ? {} : { sessionHash: sessionHash as string }),
    ...(dpopJkt === null ? {} : { dpopJkt: dpopJkt as string }),
    createdAt,
    expiresAt,
  };
}

/**
 * The sealer of `issuer`'s codes over the configured key-encryption keys (the first seals, every
 * one opens), or undefined without any: then codes are stored at issue.
 */
export function createCodeSealer(
  issuer: string,
  keyEncryptionKeys: readonly (string | Uint8Array)[] | undefined,
): CodeSealer | undefined {
  if (keyEncryptionKeys === undefined || keyEncryptionKeys.length === 0) return undefined;
  /** The code key of each KEK, by KEK id; the first seals. */
  const codeKeys = new Map<string, Buffer>();
  for (const [i, value] of keyEncryptionKeys.entries()) {
    const kek = parseKeyEncryptionKey(value, `keyEncryptionKeys[${i}]`);
    const info = `gatehouse authorization code v1\0${issuer}`;
    codeKeys.set(keyEncryptionKeyId(kek), Buffer.from(hkdfSync("sha256", kek, "", info, 32)));
    kek.fill(0);
  }
  const currentId = [...codeKeys.keys()][0]!;
  /** Hour keys derived so far, by `<kek id>.<hour>`; a few hours' worth are kept. */
  const hourKeys = new Map<string, KeyObject>();
  const hourKey = (kekId: string, hour: string): KeyObject | undefined => {
    const name = `${kekId}.${hour}`;
    let key = hourKeys.get(name);
    if (key !== undefined) return key;
    const codeKey = codeKeys.get(kekId);
    if (codeKey === undefined) return undefined;
    key = createSecretKey(Buffer.from(hkdfSync("sha256", codeKey, "", `hour ${hour}`, 32)));
    // At most three hours (the last, this and the next) per KEK are ever asked for.
    if (hourKeys.size >= 4 * codeKeys.size) hourKeys.delete(hourKeys.keys().next().value!);
    hourKeys.set(name, key);
    return key;
  };
  return {
    seal(record) {
      const hour = Math.floor(record.createdAt / HOUR_MS).toString(36);
      const nonce = randomBytesFromPool(NONCE_BYTES);
      const cipher = createCipheriv("aes-256-gcm", hourKey(currentId, hour)!, nonce, {
        authTagLength: TAG_BYTES,
      });
      cipher.setAAD(AAD);
      const body = Buffer.concat([nonce, cipher.update(encode(record)), cipher.final(), cipher.getAuthTag()]);
      return `${currentId}.${hour}.${body.toString("base64url")}`;
    },
    open(code, now) {
      if (code.length > MAX_CODE_LENGTH) return undefined;
      const [kekId, hour, text, extra] = code.split(".", 4);
      if (kekId === undefined || hour === undefined || text === undefined || extra !== undefined)
        return undefined;
      if (!HOUR_TEXT.test(hour) || Math.abs(Number.parseInt(hour, 36) - Math.floor(now / HOUR_MS)) > 1) {
        return undefined;
      }
      const key = hourKey(kekId, hour);
      if (key === undefined) return undefined;
      const body = Buffer.from(text, "base64url");
      // One spelling per code: the decoder skips characters outside the alphabet, takes '+' and
      // '/' and ignores the unused bits of the last character, but the code's SHA-256 is its
      // single-use key at redemption, so only the canonical spelling of the body opens.
      if (body.toString("base64url") !== text) return undefined;
      if (body.length <= NONCE_BYTES + TAG_BYTES) return undefined;
      const decipher = createDecipheriv("aes-256-gcm", key, body.subarray(0, NONCE_BYTES), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(AAD);
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      let plaintext: Buffer;
      try {
        plaintext = Buffer.concat([
          decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)),
          decipher.final(),
        ]);
      } catch {
        // The tag did not verify: altered, or sealed under a key of another server.
        return undefined;
      }
      const record = decode(plaintext);
      // The hour in the clear is the one the record was made in (authenticated through the key).
      return record && Math.floor(record.createdAt / HOUR_MS).toString(36) === hour ? record : undefined;
    },
  };
}
