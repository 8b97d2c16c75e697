/**
 * DPoP test support (not a test file): proofs crafted with jose directly, independently of
 * Gatehouse's own client signer, with every header and claim open to tampering.
 */
import { createHash } from "node:crypto";
import {
  type CryptoKey,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from "jose";

export interface ProofKey {
  alg: string;
  publicJwk: JWK;
  privateJwk: JWK;
  privateKey: CryptoKey;
  /** RFC 7638 SHA-256 thumbprint. */
  jkt: string;
}

export async function proofKey(alg = "ES256"): Promise<ProofKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const privateJwk = await exportJWK(privateKey);
  return { alg, publicJwk, privateJwk, privateKey, jkt: await calculateJwkThumbprint(publicJwk, "sha256") };
}

export function athOf(token: string): string {
  return createHash("sha256").update(token, "ascii").digest("base64url");
}

export interface ProofOptions {
  method?: string;
  url?: string;
  accessToken?: string;
  /** Claims merged over the defaults; a value of `undefined` removes the claim. */
  claims?: Record<string, unknown>;
  /** Header members merged over the defaults; `undefined` removes one. */
  header?: Record<string, unknown>;
  /** Sign with this alg (default the key's). */
  alg?: string;
  /** Signing key (default the proof key's private key). */
  signingKey?: CryptoKey | Uint8Array;
}

function merged<T extends Record<string, unknown>>(base: T, over: Record<string, unknown> = {}): T {
  const out: Record<string, unknown> = { ...base, ...over };
  for (const [k, v] of Object.entries(out)) if (v === undefined) delete out[k];
  return out as T;
}

/** A DPoP proof JWT for one request, signed with jose. */
export async function craftProof(key: ProofKey, options: ProofOptions = {}): Promise<string> {
  const claims: JWTPayload = merged(
    {
      jti: crypto.randomUUID(),
      htm: options.method ?? "GET",
      htu: options.url ?? "https://rs.example.com/api",
      iat: Math.floor(Date.now() / 1000),
      ...(options.accessToken !== undefined ? { ath: athOf(options.accessToken) } : {}),
    },
    options.claims,
  );
  const header = merged(
    { alg: options.alg ?? key.alg, typ: "dpop+jwt", jwk: key.publicJwk } as Record<string, unknown>,
    options.header,
  );
  return new SignJWT(claims)
    .setProtectedHeader(header as { alg: string })
    .sign(options.signingKey ?? key.privateKey);
}

/** An unsigned (`alg: none`) proof, as an attacker would send it. */
export function unsignedProof(key: ProofKey, claims: Record<string, unknown>): string {
  const enc = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return `${enc({ alg: "none", typ: "dpop+jwt", jwk: key.publicJwk })}.${enc(claims)}.`;
}
