/**
 * Secrets at rest (DESIGN.md "Secrets at rest"): a secret is stored as an AES-256-GCM envelope
 * under a key-encryption key (KEK), with the KEK's id beside the ciphertext so the KEK can be
 * rotated. A keyring holds one or more KEKs: the first seals, every one of them opens.
 *
 * The additional authenticated data (AAD) names what the secret belongs to (for a signing key,
 * its `kid`), so an envelope copied onto another record fails authentication instead of
 * decrypting there (NIST SP 800-38D §5.2.1 — the AAD is authenticated, not encrypted).
 */
import { createHash, randomBytes } from "node:crypto";
import { GatehouseError, GatehouseTypeError, type SecretEnvelopeErrorCode } from "./errors.js";

/** The stored form of one encrypted secret. All binary members are base64url without padding. */
export interface SecretEnvelope {
  /** Content encryption, named as in RFC 7518 §5.3. */
  enc: "A256GCM";
  /** Id of the KEK that sealed it ({@link keyEncryptionKeyId}). */
  kek: string;
  /** 96-bit nonce, random per envelope (NIST SP 800-38D §8.2.2). */
  iv: string;
  /** Ciphertext followed by the 128-bit authentication tag. */
  ct: string;
}

/** Why an envelope could not be opened (the closed set: shared/errors.ts). */
export type { SecretEnvelopeErrorCode };

/** An envelope that cannot be opened. The message names KEK ids only, never key material. */
export class SecretEnvelopeError extends GatehouseError<SecretEnvelopeErrorCode> {
  /** The KEK id the envelope names, when it names one. */
  readonly kekId: string | undefined;
  constructor(code: SecretEnvelopeErrorCode, message: string, kekId?: string) {
    super(code, message);
    this.name = "SecretEnvelopeError";
    this.kekId = kekId;
  }
}

export interface KeyEncryptionKeyring {
  /** Id of the KEK that seals new envelopes (the first one configured). */
  readonly currentId: string;
  /** Ids of every KEK in the ring, the sealing one first. */
  readonly ids: readonly string[];
  /** Encrypts `plaintext` under the current KEK, bound to `aad`. */
  seal(plaintext: Uint8Array, aad: string): Promise<SecretEnvelope>;
  /** Decrypts an envelope sealed with `aad`; throws {@link SecretEnvelopeError}. */
  open(envelope: SecretEnvelope, aad: string): Promise<Uint8Array>;
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
// Standard or URL-safe alphabet, optional padding: `openssl rand -base64 32` works as is.
const KEY_TEXT = /^[A-Za-z0-9+/_-]{43}=?$/;

/** A fresh random KEK, base64url (43 characters). */
export function generateKeyEncryptionKey(): string {
  return randomBytes(KEY_BYTES).toString("base64url");
}

/**
 * The id of a KEK: the first 72 bits of SHA-256 over a label and the key, base64url. Derived,
 * so two configurations holding the same key agree on its id and an id cannot name the wrong key;
 * a one-way hash of 256 random bits tells nothing about the key.
 */
export function keyEncryptionKeyId(key: Uint8Array): string {
  return createHash("sha256")
    .update("gatehouse key-encryption key id\0")
    .update(key)
    .digest()
    .subarray(0, 9)
    .toString("base64url");
}

/**
 * Reads one KEK: 32 raw bytes, or their base64 / base64url text (padding optional). `name` is the
 * option or source named in the error; the value itself never appears in a message.
 */
export function parseKeyEncryptionKey(value: unknown, name: string): Uint8Array<ArrayBuffer> {
  if (value instanceof Uint8Array) {
    if (value.byteLength !== KEY_BYTES) {
      throw new GatehouseTypeError("ERR_INVALID_OPTION", `${name} must be ${KEY_BYTES} bytes`);
    }
    return new Uint8Array(value);
  }
  if (typeof value !== "string" || !KEY_TEXT.test(value)) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `${name} must be ${KEY_BYTES} random bytes in base64url (43 characters; gatehouse keys generate-kek prints one)`,
    );
  }
  const bytes = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (bytes.byteLength !== KEY_BYTES) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", `${name} must decode to ${KEY_BYTES} bytes`);
  }
  return new Uint8Array(bytes);
}

/** Whether `value` has the shape of a {@link SecretEnvelope} (its contents are checked on open). */
export function isSecretEnvelope(value: unknown): value is SecretEnvelope {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    v.enc === "A256GCM" && typeof v.kek === "string" && typeof v.iv === "string" && typeof v.ct === "string"
  );
}

function base64urlBytes(value: string, what: string, kekId: string): Uint8Array<ArrayBuffer> {
  if (!BASE64URL.test(value)) {
    throw new SecretEnvelopeError("ERR_ENVELOPE_MALFORMED", `envelope ${what} is not base64url`, kekId);
  }
  return new Uint8Array(Buffer.from(value, "base64url"));
}

/**
 * A keyring over `keys` (each as {@link parseKeyEncryptionKey} reads it): the first seals, all
 * open. Throws `GatehouseTypeError` (`ERR_INVALID_OPTION`) for an empty list, a malformed key or
 * a key listed twice.
 */
export async function createKeyEncryptionKeyring(
  keys: readonly unknown[],
  name = "keyEncryptionKeys",
): Promise<KeyEncryptionKeyring> {
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", `${name} must list at least one key`);
  }
  const ring = new Map<string, CryptoKey>();
  for (const [i, value] of keys.entries()) {
    const raw = parseKeyEncryptionKey(value, `${name}[${i}]`);
    const id = keyEncryptionKeyId(raw);
    if (ring.has(id)) throw new GatehouseTypeError("ERR_INVALID_OPTION", `${name}[${i}] is listed twice`);
    // Not extractable: once imported, the raw key cannot be read back out of the CryptoKey.
    ring.set(id, await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]));
    raw.fill(0);
  }
  const ids = [...ring.keys()];
  const currentId = ids[0] as string;
  const encoder = new TextEncoder();

  return {
    currentId,
    ids,
    async seal(plaintext, aad) {
      const iv = new Uint8Array(randomBytes(IV_BYTES));
      const ct = await crypto.subtle.encrypt(
        { name: "AES-GCM", iv, additionalData: encoder.encode(aad), tagLength: TAG_BYTES * 8 },
        ring.get(currentId) as CryptoKey,
        new Uint8Array(plaintext),
      );
      return {
        enc: "A256GCM",
        kek: currentId,
        iv: Buffer.from(iv).toString("base64url"),
        ct: Buffer.from(ct).toString("base64url"),
      };
    },
    async open(envelope, aad) {
      if (!isSecretEnvelope(envelope)) {
        throw new SecretEnvelopeError("ERR_ENVELOPE_MALFORMED", "not an A256GCM envelope");
      }
      const key = ring.get(envelope.kek);
      if (!key) {
        throw new SecretEnvelopeError(
          "ERR_KEK_UNKNOWN",
          `sealed under key-encryption key ${envelope.kek}, which is not configured (configured: ${ids.join(", ")})`,
          envelope.kek,
        );
      }
      const iv = base64urlBytes(envelope.iv, "iv", envelope.kek);
      const ct = base64urlBytes(envelope.ct, "ct", envelope.kek);
      if (iv.byteLength !== IV_BYTES || ct.byteLength < TAG_BYTES) {
        throw new SecretEnvelopeError(
          "ERR_ENVELOPE_MALFORMED",
          "envelope iv or ct has the wrong length",
          envelope.kek,
        );
      }
      try {
        const plain = await crypto.subtle.decrypt(
          { name: "AES-GCM", iv, additionalData: encoder.encode(aad), tagLength: TAG_BYTES * 8 },
          key,
          ct,
        );
        return new Uint8Array(plain);
      } catch {
        throw new SecretEnvelopeError(
          "ERR_ENVELOPE_AUTHENTICATION",
          `envelope sealed under key-encryption key ${envelope.kek} fails authentication (altered, or copied from another record)`,
          envelope.kek,
        );
      }
    },
  };
}
