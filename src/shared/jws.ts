/**
 * JWS signatures verified with node:crypto (RFC 7515 compact serialisation, RFC 7518 and RFC 8037
 * algorithms), shared by DPoP proofs (dpop-proof.ts) and JWT access tokens at the resource server
 * (jwt-verifier.ts): one place decides which algorithms are verified here, which key type each
 * needs and how its signature is checked. Synchronous, on this thread: no WebCrypto round-trip.
 */
import { type KeyObject, constants as sslConstants, verify as verifySignature } from "node:crypto";

/** One allow-listed JWS algorithm: the key it needs and how its signature is checked. */
export interface JwsAlgorithm {
  kty: "EC" | "OKP" | "RSA";
  /** Required `crv` for EC and OKP keys. */
  crv?: string;
  /** Length of the EC/OKP coordinates in base64url characters (exact). */
  coordinateLength?: number;
  /** Signature length in bytes (EC/OKP; RSA: the modulus length). */
  signatureBytes?: number;
  check(data: Buffer, key: KeyObject, signature: Buffer): boolean;
}

const ecdsa =
  (hash: string) =>
  (data: Buffer, key: KeyObject, signature: Buffer): boolean =>
    // RFC 7518 §3.4: JWS ECDSA signatures are R || S, not DER.
    verifySignature(hash, data, { key, dsaEncoding: "ieee-p1363" }, signature);
const eddsa = (data: Buffer, key: KeyObject, signature: Buffer): boolean =>
  verifySignature(null, data, key, signature);
const pkcs1 = (data: Buffer, key: KeyObject, signature: Buffer): boolean =>
  verifySignature("sha256", data, key, signature);
const pss = (data: Buffer, key: KeyObject, signature: Buffer): boolean =>
  // RFC 7518 §3.5: PS256 uses MGF1 with SHA-256 and a salt as long as the hash (32 bytes).
  verifySignature(
    "sha256",
    data,
    { key, padding: sslConstants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
    signature,
  );

/**
 * The asymmetric algorithms verified here (never `none`, never a MAC). A verifier accepts the
 * subset it is configured with.
 */
export const JWS_ALGORITHMS: Readonly<Record<string, JwsAlgorithm>> = {
  ES256: { kty: "EC", crv: "P-256", coordinateLength: 43, signatureBytes: 64, check: ecdsa("sha256") },
  ES384: { kty: "EC", crv: "P-384", coordinateLength: 64, signatureBytes: 96, check: ecdsa("sha384") },
  EdDSA: { kty: "OKP", crv: "Ed25519", coordinateLength: 43, signatureBytes: 64, check: eddsa },
  // RFC 9864: the fully-specified name of EdDSA over Ed25519.
  Ed25519: { kty: "OKP", crv: "Ed25519", coordinateLength: 43, signatureBytes: 64, check: eddsa },
  RS256: { kty: "RSA", check: pkcs1 },
  PS256: { kty: "RSA", check: pss },
};

/** RSA moduli below this many bits are refused (RFC 7518 §3.3). */
export const MIN_RSA_BITS = 2048;

/** A compact JWS: three base64url segments (RFC 7515 §7.1). Groups: header, payload, signature. */
export const COMPACT_JWS = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/;

/**
 * Checks the signature of the compact JWS `jws` (split by {@link COMPACT_JWS} into `parts`) with
 * `key`: `"wrong-length"` when the signature is not `expectedBytes` long (the algorithm's, or an
 * RSA key's modulus), `"invalid"` when it does not verify, `"valid"` when it does. Throws when
 * node:crypto cannot check it at all (the caller refuses the JWS).
 */
export function checkJwsSignature(
  algorithm: JwsAlgorithm,
  jws: string,
  parts: RegExpExecArray,
  key: KeyObject,
  expectedBytes: number | undefined,
): "valid" | "invalid" | "wrong-length" {
  const signature = Buffer.from(parts[3]!, "base64url");
  if (signature.length !== expectedBytes) return "wrong-length";
  const signingInput = Buffer.from(jws.slice(0, parts[1]!.length + 1 + parts[2]!.length), "ascii");
  return algorithm.check(signingInput, key, signature) ? "valid" : "invalid";
}
