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
 *   opens, and a changed one fails authentication; each code has a random 96-bit nonce. A code
 *   opens under one spelling only (its SHA-256 is its single-use key at redemption).
 * - Nothing of the record is readable by the client or in the redirect URL: it is ciphertext
 *   (docs/security.md "Sealed codes: what the code carries" says why every member stays sealed).
 * - At rest only the code's SHA-256 (the row's key), as before.
 * - Short-lived (`codeTtlSeconds`, at most 60 s): the sealed expiry is checked at redemption.
 *
 * Format 2 (sealed since issue 25): `base64url(2 ‖ KEK id ‖ hour ‖ nonce ‖ ciphertext ‖ tag)`, the
 * first 13 bytes the GCM additional data, the record positional and binary (flags, times as offsets,
 * base64url members such as the PKCE challenge as their bytes): about a quarter shorter than
 * format 1, `<KEK id>.<hour>.<base64url(nonce ‖ ciphertext ‖ tag)>` over a JSON array, which still
 * opens (a code sealed by the previous release in its last minute). What a code costs is almost all
 * the cipher's own calls (bench/sealed-code.mjs); an HMAC beside a smaller encryption would be two
 * of them, so every member stays encrypted.
 *
 * Keys: a code key is derived (HKDF-SHA256, a label of its own with the issuer) from each
 * configured key-encryption key, so instances configured alike open each other's codes and a KEK
 * rotation keeps the codes of the outgoing key openable; the code names the KEK it was sealed
 * under. Each hour's codes are sealed under a key of their own derived from it (the hour is in the
 * code; both formats share the hour keys, and their additional data differ), because GCM with
 * random 96-bit nonces must stay under 2^32 messages per key (NIST SP 800-38D §8.3): an hour's key
 * would need over a million codes a second to get near. The hour keys are cached (HKDF costs more
 * than a whole seal). A code names an hour within one of now or it does not open (it has expired
 * anyway: codes live 60 s at most), so a client cannot make the server derive keys for hours of its
 * choosing. Without `keyEncryptionKeys` there is no sealer and codes are stored at issue, as before
 * (instances then share nothing but the store).
 */
import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, type KeyObject } from "node:crypto";
import { keyEncryptionKeyId, parseKeyEncryptionKey } from "../../shared/secret-envelope.js";
import type { CodeSealer, SealedCodeRecord } from "../core/context.js";
import { randomBytesFromPool } from "../core/random.js";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Bounded work for a code a client sends: a sealed code of this server is far shorter. */
const MAX_CODE_LENGTH = 4096;
const HOUR_MS = 3_600_000;

/** Format 1: the additional authenticated data, a code opens only as a code of this format. */
const AAD_1 = Buffer.from("gatehouse authorization code v1");
/** Format 1's records were JSON arrays with this first (sealed up to issue 25; opened still). */
const FORMAT_1 = 1;
const HOUR_TEXT = /^[0-9a-z]{1,8}$/;

/** Format 2: version byte, KEK id (9 bytes), hour (3 bytes, big-endian; up to the year 3883). */
const FORMAT_2 = 2;
const KEK_ID_BYTES = 9;
const HEADER_BYTES = 1 + KEK_ID_BYTES + 3;
const MAX_HOUR = 0xff_ffff;
/** Flags of a format-2 record. */
const REDIRECT_URI_SENT = 1;
const REFRESH_ALLOWED = 2;
const HAS_SESSION = 4;
const HAS_DPOP_JKT = 8;
/** The grant id is a sortable id (core/ids.ts): 9 base-36 digits of time, then 16 random bytes. */
const SORTABLE_GRANT = 16;
const KNOWN_FLAGS = 31;
const SORTABLE = /^[0-9a-z]{9}[A-Za-z0-9_-]{22}$/;
const SORTABLE_TIME_BYTES = 6;
const SORTABLE_RANDOM_BYTES = 16;
/** Offset in the hour (3 bytes) and lifetime in ms (4 bytes). */
const MAX_LIFETIME_MS = 0xffff_ffff;

const isText = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isTime = (v: unknown): v is number => Number.isSafeInteger(v);
const isFlag = (v: unknown): v is 0 | 1 => v === 0 || v === 1;

/** The record of an opened format-1 code, checked member by member (authenticated, but checked all the same). */
function decode1(plaintext: Buffer): SealedCodeRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(plaintext.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length !== 14 || value[0] !== FORMAT_1) return undefined;
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

/** Where records are written before encryption (a fresh buffer per seal cost a tenth of its time). */
const SCRATCH = Buffer.alloc(1024);

/**
 * Writes format-2 records: each text member is a length header (LEB128 of `bytes * 2 + raw`) then
 * its bytes, `raw` when the text is the canonical base64url of those bytes (a PKCE challenge, a
 * thumbprint, a session hash, a random id: three quarters of the text's length), else UTF-8.
 */
class RecordWriter {
  /** The module's scratch buffer unless a record outgrows it (sealing is synchronous). */
  buffer = SCRATCH;
  at = 0;

  /** Room for `bytes` more (grown, never truncated: Buffer#write would cut a member short). */
  room(bytes: number): void {
    if (this.at + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buffer.length, this.at + bytes));
    this.buffer.copy(grown, 0, 0, this.at);
    this.buffer = grown;
  }

  uint(value: number, bytes: number): void {
    this.room(bytes);
    this.buffer.writeUIntBE(value, this.at, bytes);
    this.at += bytes;
  }

  varint(value: number): void {
    this.room(5);
    this.put(value);
  }

  /** LEB128 of `value` at `at`, room already made. */
  private put(value: number): void {
    let v = value;
    while (v >= 0x80) {
      this.buffer[this.at++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buffer[this.at++] = v;
  }

  text(value: string): void {
    const n = value.length;
    // The header takes one byte below 64 bytes of member; longer members are moved up once written.
    this.room(4 + 3 * n);
    const buffer = this.buffer;
    const start = this.at + 1;
    // One pass in JS (a native call per member cost more than JSON.stringify of the whole record):
    // is the member ASCII, and is it canonical base64url (every character of the alphabet, not a
    // length the alphabet cannot end on, no unused bit of the last character set)?
    let ascii = true;
    let raw = n > 0 && n % 4 !== 1;
    for (let i = 0; i < n; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) {
        ascii = false;
        raw = false;
        break;
      }
      if (raw && SEXTET[c]! < 0) raw = false;
    }
    if (raw && n % 4 !== 0) raw = (SEXTET[value.charCodeAt(n - 1)]! & (n % 4 === 2 ? 15 : 3)) === 0;
    let bytes: number;
    if (raw) {
      bytes = Math.floor((n * 3) / 4);
      let bits = 0;
      let held = 0;
      let out = start;
      for (let i = 0; i < n; i++) {
        bits = (bits << 6) | SEXTET[value.charCodeAt(i)]!;
        held += 6;
        if (held >= 8) {
          held -= 8;
          buffer[out++] = (bits >> held) & 0xff;
        }
      }
    } else if (ascii) {
      bytes = n;
      for (let i = 0; i < n; i++) buffer[start + i] = value.charCodeAt(i);
    } else bytes = buffer.write(value, start, "utf8");
    const header = bytes * 2 + (raw ? 1 : 0);
    if (header < 0x80) {
      buffer[this.at] = header;
      this.at = start + bytes;
      return;
    }
    const headerBytes = header < 0x4000 ? 2 : header < 0x20_0000 ? 3 : 4;
    // Room was made for a 4-byte header.
    buffer.copyWithin(this.at + headerBytes, start, start + bytes);
    this.put(header);
    this.at += bytes;
  }
}

/** The value of each base64url character by its code (-1 for any other ASCII character). */
const SEXTET = new Int8Array(128).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"].entries()) {
  SEXTET[c.charCodeAt(0)] = i;
}

/** Reads format-2 records; any read past the end or malformed header makes `ok` false. */
class RecordReader {
  at = 0;
  ok = true;
  constructor(readonly buffer: Buffer) {}

  uint(bytes: number): number {
    if (this.at + bytes > this.buffer.length) {
      this.ok = false;
      return 0;
    }
    const v = this.buffer.readUIntBE(this.at, bytes);
    this.at += bytes;
    return v;
  }

  /** The start of the next `bytes` bytes, passed over. */
  skip(bytes: number): number {
    const start = this.at;
    if (start + bytes > this.buffer.length) this.ok = false;
    else this.at += bytes;
    return start;
  }

  varint(): number {
    let value = 0;
    for (let shift = 1, i = 0; i < 4; i++, shift *= 0x80) {
      if (this.at >= this.buffer.length) break;
      const byte = this.buffer[this.at++]!;
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
    }
    this.ok = false;
    return 0;
  }

  text(): string {
    const header = this.varint();
    const bytes = Math.floor(header / 2);
    if (!this.ok || this.at + bytes > this.buffer.length) {
      this.ok = false;
      return "";
    }
    const start = this.at;
    this.at += bytes;
    return this.buffer.toString(header % 2 === 1 ? "base64url" : "utf8", start, this.at);
  }
}

/** The record as format-2 plaintext: flags, times, then the members in a fixed order. */
function encode2(r: SealedCodeRecord, hour: number): Buffer {
  const w = new RecordWriter();
  const offset = r.createdAt - hour * HOUR_MS;
  const lifetime = r.expiresAt - r.createdAt;
  if (!Number.isSafeInteger(r.createdAt) || !Number.isSafeInteger(lifetime)) {
    throw new RangeError("sealed code: createdAt and expiresAt must be integers (ms)");
  }
  if (lifetime < 0 || lifetime > MAX_LIFETIME_MS) {
    throw new RangeError("sealed code: a code lives between 0 ms and 49 days");
  }
  // Flags first; the sortable-id flag is set below once the id round-trips.
  w.uint(
    (r.redirectUriSent ? REDIRECT_URI_SENT : 0) |
      (r.refreshAllowed ? REFRESH_ALLOWED : 0) |
      (r.sessionHash === undefined ? 0 : HAS_SESSION) |
      (r.dpopJkt === undefined ? 0 : HAS_DPOP_JKT),
    1,
  );
  w.uint(offset, 3);
  w.uint(lifetime, 4);
  if (!sortableGrantId(w, r.grantId)) w.text(r.grantId);
  w.text(r.clientId);
  w.text(r.userId);
  w.text(r.redirectUri);
  w.text(r.resource);
  w.text(r.codeChallenge);
  if (r.sessionHash !== undefined) w.text(r.sessionHash);
  if (r.dpopJkt !== undefined) w.text(r.dpopJkt);
  w.varint(r.scopes.length);
  for (const scope of r.scopes) w.text(scope);
  return w.buffer.subarray(0, w.at);
}

/**
 * Writes `grantId` as a sortable id (22 bytes instead of 31) and sets its flag, when it is one
 * that reads back the same (lower-case time digits, a canonical random part); else writes nothing.
 */
function sortableGrantId(w: RecordWriter, grantId: string): boolean {
  if (!SORTABLE.test(grantId)) return false;
  const start = w.at;
  w.uint(Number.parseInt(grantId.slice(0, 9), 36), SORTABLE_TIME_BYTES);
  w.room(SORTABLE_RANDOM_BYTES);
  const random = grantId.slice(9);
  w.at += w.buffer.write(random, w.at, "base64url");
  if (w.buffer.toString("base64url", w.at - SORTABLE_RANDOM_BYTES, w.at) !== random) {
    w.at = start;
    return false;
  }
  w.buffer[0]! |= SORTABLE_GRANT;
  return true;
}

/** The record of an opened format-2 code, every read bounded, the members checked as in format 1. */
function decode2(plaintext: Buffer, hour: number): SealedCodeRecord | undefined {
  const r = new RecordReader(plaintext);
  const flags = r.uint(1);
  const createdAt = hour * HOUR_MS + r.uint(3);
  const expiresAt = createdAt + r.uint(4);
  let grantId: string;
  if (flags & SORTABLE_GRANT) {
    const time = r.uint(SORTABLE_TIME_BYTES);
    const start = r.skip(SORTABLE_RANDOM_BYTES);
    if (!r.ok) return undefined;
    grantId = time.toString(36).padStart(9, "0") + plaintext.toString("base64url", start, r.at);
    if (grantId.length !== 31) return undefined;
  } else grantId = r.text();
  const clientId = r.text();
  const userId = r.text();
  const redirectUri = r.text();
  const resource = r.text();
  const codeChallenge = r.text();
  const sessionHash = flags & HAS_SESSION ? r.text() : undefined;
  const dpopJkt = flags & HAS_DPOP_JKT ? r.text() : undefined;
  const count = r.varint();
  if (!r.ok || count > plaintext.length) return undefined;
  const scopes: string[] = [];
  for (let i = 0; i < count; i++) scopes.push(r.text());
  if (
    !r.ok ||
    r.at !== plaintext.length ||
    (flags & ~KNOWN_FLAGS) !== 0 ||
    createdAt >= (hour + 1) * HOUR_MS
  ) {
    return undefined;
  }
  if (![grantId, clientId, userId, redirectUri, resource, codeChallenge].every(isText)) return undefined;
  if ((sessionHash !== undefined && !isText(sessionHash)) || (dpopJkt !== undefined && !isText(dpopJkt))) {
    return undefined;
  }
  return {
    grantId,
    clientId,
    userId,
    redirectUri,
    redirectUriSent: (flags & REDIRECT_URI_SENT) !== 0,
    scopes,
    resource,
    codeChallenge,
    codeChallengeMethod: "S256",
    refreshAllowed: (flags & REFRESH_ALLOWED) !== 0,
    ...(sessionHash === undefined ? {} : { sessionHash }),
    ...(dpopJkt === undefined ? {} : { dpopJkt }),
    createdAt,
    expiresAt,
  };
}

/** One configured KEK: its id (text and bytes) and the code key derived from it. */
interface CodeKey {
  id: string;
  idBytes: Buffer;
  key: Buffer;
  /** Hour keys derived so far, by hour; at most four are kept (the last, this and the next hour). */
  hours: Map<number, KeyObject>;
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
  const codeKeys: CodeKey[] = [];
  for (const [i, value] of keyEncryptionKeys.entries()) {
    const kek = parseKeyEncryptionKey(value, `keyEncryptionKeys[${i}]`);
    const info = `gatehouse authorization code v1\0${issuer}`;
    const id = keyEncryptionKeyId(kek);
    // The same KEK listed twice: the first derivation serves.
    if (!codeKeys.some((k) => k.id === id)) {
      const key = Buffer.from(hkdfSync("sha256", kek, "", info, 32));
      codeKeys.push({ id, idBytes: Buffer.from(id, "base64url"), key, hours: new Map() });
    }
    kek.fill(0);
  }
  const current = codeKeys[0]!;
  /** The key of `hour` under `codeKey` (the same derivation for both formats). */
  const hourKey = (codeKey: CodeKey, hour: number): KeyObject => {
    let key = codeKey.hours.get(hour);
    if (key !== undefined) return key;
    key = createSecretKey(Buffer.from(hkdfSync("sha256", codeKey.key, "", `hour ${hour.toString(36)}`, 32)));
    // At most three hours (the last, this and the next) are ever asked for.
    if (codeKey.hours.size >= 4) codeKey.hours.delete(codeKey.hours.keys().next().value!);
    codeKey.hours.set(hour, key);
    return key;
  };
  const nearNow = (hour: number, now: number) => Math.abs(hour - Math.floor(now / HOUR_MS)) <= 1;

  /** A format-1 code: `<kek id>.<hour base 36>.<base64url(nonce ‖ ciphertext ‖ tag)>`. */
  const open1 = (code: string, now: number): SealedCodeRecord | undefined => {
    const [kekId, hourText, text, extra] = code.split(".", 4);
    if (kekId === undefined || hourText === undefined || text === undefined || extra !== undefined) {
      return undefined;
    }
    if (!HOUR_TEXT.test(hourText)) return undefined;
    const hour = Number.parseInt(hourText, 36);
    // One spelling of the hour too (no leading zeros).
    if (hour.toString(36) !== hourText || !nearNow(hour, now)) return undefined;
    const codeKey = codeKeys.find((k) => k.id === kekId);
    if (codeKey === undefined) return undefined;
    const body = Buffer.from(text, "base64url");
    // One spelling per code: the decoder skips characters outside the alphabet, takes '+' and
    // '/' and ignores the unused bits of the last character, but the code's SHA-256 is its
    // single-use key at redemption, so only the canonical spelling of the body opens.
    if (body.toString("base64url") !== text) return undefined;
    if (body.length <= NONCE_BYTES + TAG_BYTES) return undefined;
    const plaintext = decrypt(hourKey(codeKey, hour), body, 0, AAD_1);
    const record = plaintext && decode1(plaintext);
    // The hour in the clear is the one the record was made in (authenticated through the key).
    return record && Math.floor(record.createdAt / HOUR_MS) === hour ? record : undefined;
  };

  return {
    seal(record) {
      const hour = Math.floor(record.createdAt / HOUR_MS);
      if (!(hour >= 0 && hour <= MAX_HOUR)) throw new RangeError("sealed code: createdAt out of range");
      const plaintext = encode2(record, hour);
      const body = Buffer.allocUnsafe(HEADER_BYTES + NONCE_BYTES + plaintext.length + TAG_BYTES);
      body[0] = FORMAT_2;
      current.idBytes.copy(body, 1);
      body.writeUIntBE(hour, 1 + KEK_ID_BYTES, 3);
      const nonce = randomBytesFromPool(NONCE_BYTES);
      nonce.copy(body, HEADER_BYTES);
      const cipher = createCipheriv("aes-256-gcm", hourKey(current, hour), nonce, {
        authTagLength: TAG_BYTES,
      });
      // The header is the additional data: the version, KEK and hour it names are authenticated.
      cipher.setAAD(body.subarray(0, HEADER_BYTES));
      const at = HEADER_BYTES + NONCE_BYTES;
      const written = cipher.update(plaintext).copy(body, at);
      // The record's plaintext does not linger in the scratch buffer.
      plaintext.fill(0);
      cipher.final();
      cipher.getAuthTag().copy(body, at + written);
      return body.toString("base64url");
    },
    open(code, now) {
      if (code.length > MAX_CODE_LENGTH) return undefined;
      if (code.includes(".")) return open1(code, now);
      const body = Buffer.from(code, "base64url");
      // One spelling per code (see open1).
      if (body.length <= HEADER_BYTES + NONCE_BYTES + TAG_BYTES || body.toString("base64url") !== code) {
        return undefined;
      }
      if (body[0] !== FORMAT_2) return undefined;
      const codeKey = codeKeys.find(
        (k) => body.compare(k.idBytes, 0, KEK_ID_BYTES, 1, 1 + KEK_ID_BYTES) === 0,
      );
      const hour = body.readUIntBE(1 + KEK_ID_BYTES, 3);
      if (codeKey === undefined || !nearNow(hour, now)) return undefined;
      const plaintext = decrypt(hourKey(codeKey, hour), body, HEADER_BYTES, body.subarray(0, HEADER_BYTES));
      return plaintext && decode2(plaintext, hour);
    },
  };
}

/** The plaintext of `body` (nonce at `at`, then ciphertext, then tag), or undefined if the tag fails. */
function decrypt(key: KeyObject, body: Buffer, at: number, aad: Buffer): Buffer | undefined {
  const decipher = createDecipheriv("aes-256-gcm", key, body.subarray(at, at + NONCE_BYTES), {
    authTagLength: TAG_BYTES,
  });
  decipher.setAAD(aad);
  decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
  try {
    // GCM is a stream mode: update returns the whole plaintext; final checks the tag.
    const plaintext = decipher.update(body.subarray(at + NONCE_BYTES, body.length - TAG_BYTES));
    decipher.final();
    return plaintext;
  } catch {
    // The tag did not verify: altered, or sealed under a key of another server.
    return undefined;
  }
}
