/**
 * Signing private keys at rest (DESIGN.md "Secrets at rest"): the stored `privateJwk` is a
 * {@link SecretEnvelope} (`{"enc":"A256GCM","kek":..,"iv":..,"ct":..}`) whose plaintext is the
 * private JWK and whose AAD names the key's `kid`, so an envelope moved onto another row does not
 * open. Rows written before encryption (a plain JWK with `d`) are still read, and re-encrypted
 * by `gatehouse keys rewrap`.
 */
import type { JWK } from "jose";
import { GatehouseError, type SigningKeyDecryptionErrorCode } from "../../shared/errors.js";
import {
  isSecretEnvelope,
  type KeyEncryptionKeyring,
  type SecretEnvelope,
  SecretEnvelopeError,
} from "../../shared/secret-envelope.js";
import type { SigningKeyRecord } from "../../storage/contract.js";

/** How a stored private key is kept. */
export type PrivateKeyProtection = { kind: "plaintext" } | { kind: "encrypted"; kekId: string };

export type { SigningKeyDecryptionErrorCode };

/** A stored signing key that cannot be used. Names the key id and KEK id, never key material. */
export class SigningKeyDecryptionError extends GatehouseError<SigningKeyDecryptionErrorCode> {
  readonly kid: string;
  readonly kekId: string | undefined;
  constructor(code: SigningKeyDecryptionErrorCode, kid: string, reason: string, kekId?: string) {
    super(code, `signing key ${kid} cannot be read: ${reason}`);
    this.name = "SigningKeyDecryptionError";
    this.kid = kid;
    this.kekId = kekId;
  }
}

/** The AAD of a signing key's envelope: a purpose label and the `kid` of the row it belongs to. */
export function signingKeyAad(kid: string): string {
  return `gatehouse signing key\0${kid}`;
}

export function privateKeyProtection(record: SigningKeyRecord): PrivateKeyProtection {
  return isSecretEnvelope(record.privateJwk)
    ? { kind: "encrypted", kekId: record.privateJwk.kek }
    : { kind: "plaintext" };
}

/** Seals a private JWK for the row `kid` under the keyring's current KEK. */
export async function sealPrivateJwk(
  keyring: KeyEncryptionKeyring,
  kid: string,
  privateJwk: JWK,
): Promise<SecretEnvelope> {
  return keyring.seal(new TextEncoder().encode(JSON.stringify(privateJwk)), signingKeyAad(kid));
}

function matchesPublicKey(privateJwk: Record<string, unknown>, publicJwk: Record<string, unknown>): boolean {
  if (typeof privateJwk.d !== "string" || privateJwk.kty !== publicJwk.kty) return false;
  for (const member of ["crv", "x", "y"]) if (privateJwk[member] !== publicJwk[member]) return false;
  return true;
}

/**
 * The private JWK of a stored key: the envelope opened with `keyring`, or the plain JWK of a row
 * written before encryption. Throws {@link SigningKeyDecryptionError}.
 */
export async function openPrivateJwk(
  record: SigningKeyRecord,
  keyring: KeyEncryptionKeyring | undefined,
): Promise<JWK> {
  let jwk: Record<string, unknown>;
  const protection = privateKeyProtection(record);
  if (protection.kind === "plaintext") jwk = record.privateJwk;
  else {
    if (!keyring) {
      throw new SigningKeyDecryptionError(
        "ERR_KEK_NOT_CONFIGURED",
        record.kid,
        `it is encrypted under key-encryption key ${protection.kekId} and no key-encryption key is configured`,
        protection.kekId,
      );
    }
    let plain: Uint8Array;
    try {
      plain = await keyring.open(record.privateJwk as unknown as SecretEnvelope, signingKeyAad(record.kid));
    } catch (error) {
      if (!(error instanceof SecretEnvelopeError)) throw error;
      throw new SigningKeyDecryptionError(error.code, record.kid, error.message, protection.kekId);
    }
    try {
      jwk = JSON.parse(new TextDecoder().decode(plain)) as Record<string, unknown>;
    } catch {
      throw new SigningKeyDecryptionError(
        "ERR_ENVELOPE_MALFORMED",
        record.kid,
        "the decrypted private key is not JSON",
        protection.kekId,
      );
    }
  }
  if (typeof jwk !== "object" || jwk === null || !matchesPublicKey(jwk, record.publicJwk)) {
    throw new SigningKeyDecryptionError(
      "ERR_KEY_MISMATCH",
      record.kid,
      "the private key is not the pair of its published public key",
      protection.kind === "encrypted" ? protection.kekId : undefined,
    );
  }
  return jwk as JWK;
}

/**
 * The envelope a stored key should hold under the keyring's current KEK, or undefined when it
 * already does. Opens the old form first, so a key that cannot be read is never rewritten.
 */
export async function rewrappedPrivateJwk(
  record: SigningKeyRecord,
  keyring: KeyEncryptionKeyring,
): Promise<SecretEnvelope | undefined> {
  const jwk = await openPrivateJwk(record, keyring);
  const protection = privateKeyProtection(record);
  if (protection.kind === "encrypted" && protection.kekId === keyring.currentId) return undefined;
  return sealPrivateJwk(keyring, record.kid, jwk);
}
