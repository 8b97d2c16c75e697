/**
 * DPoP proofs for the authorization-server tests, made by hand with jose so that every field can
 * be wrong on purpose (RFC 9449 §4.2): a key pair, its thumbprint, and proofs with any header or
 * claim changed.
 */
import { createHmac, randomUUID } from "node:crypto";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";

export interface ProofKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
  /** RFC 7638 SHA-256 thumbprint: the `cnf.jkt` of tokens bound to this key. */
  jkt: string;
  alg: string;
}

export async function proofKey(alg = "ES256"): Promise<ProofKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { privateKey, publicJwk, jkt: await calculateJwkThumbprint(publicJwk, "sha256"), alg };
}

export interface ProofChanges {
  htu?: string;
  htm?: string;
  /** Seconds since the epoch. */
  iat?: number;
  jti?: string;
  nonce?: string;
  typ?: string;
  /** The header's `jwk` (default: the key's public JWK). */
  jwk?: JWK;
}

/** A proof for POST `htu` at `nowMs`, signed with `key`, with `changes` applied. */
export async function proof(key: ProofKey, htu: string, nowMs: number, changes: ProofChanges = {}) {
  const payload: Record<string, unknown> = {
    jti: changes.jti ?? randomUUID(),
    htm: changes.htm ?? "POST",
    htu: changes.htu ?? htu,
    iat: changes.iat ?? Math.floor(nowMs / 1000),
  };
  if (changes.nonce !== undefined) payload.nonce = changes.nonce;
  return new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, typ: changes.typ ?? "dpop+jwt", jwk: changes.jwk ?? key.publicJwk })
    .sign(key.privateKey);
}

/** An unsigned (`alg: none`) proof: RFC 9449 §4.2 forbids it. */
export function unsignedProof(key: ProofKey, htu: string, nowMs: number): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const header = encode({ alg: "none", typ: "dpop+jwt", jwk: key.publicJwk });
  const claims = encode({ jti: randomUUID(), htm: "POST", htu, iat: Math.floor(nowMs / 1000) });
  return `${header}.${claims}.`;
}

/** A proof MACed with HS256 under a key it names itself: symmetric, so refused (RFC 9449 §4.2). */
export function symmetricProof(htu: string, nowMs: number): string {
  const secret = Buffer.alloc(32, 7);
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const header = encode({
    alg: "HS256",
    typ: "dpop+jwt",
    jwk: { kty: "oct", k: secret.toString("base64url") },
  });
  const claims = encode({ jti: randomUUID(), htm: "POST", htu, iat: Math.floor(nowMs / 1000) });
  const mac = createHmac("sha256", secret).update(`${header}.${claims}`).digest("base64url");
  return `${header}.${claims}.${mac}`;
}
