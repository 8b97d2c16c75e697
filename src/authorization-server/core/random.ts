/**
 * Random tokens for the request path (authorization codes, refresh tokens, grant ids, access token
 * `jti`s, interaction ids, browser bindings), drawn from a pool of CSPRNG bytes.
 *
 * Why: `crypto.randomBytes` crosses into C++ and allocates a Buffer for every call, about 2.6 µs
 * for 32 bytes on Node 20, and a code flow draws four tokens; slicing a pool that is refilled by
 * one `randomFillSync` every 4096 bytes costs about 0.2 µs (in-process figures, issue 11). Node
 * does the same for `crypto.randomUUID`.
 *
 * Each pool byte is handed out once: the bytes of a token are zeroed as soon as it is encoded, so
 * the pool never holds a token that was issued, only bytes not drawn yet. The entropy is the same
 * as `randomBytes` (both read OpenSSL's CSPRNG). Module state is per thread (a worker has its own).
 */
import { randomFillSync } from "node:crypto";
import { randomToken as unpooledRandomToken } from "../../shared/crypto.js";

/** Bytes drawn from the CSPRNG at once. */
const POOL_BYTES = 4096;

/** Longer tokens, and any odd size, are drawn directly (rare paths; none on the request path). */
const MAX_POOLED_BYTES = 64;

const pool = Buffer.alloc(POOL_BYTES);
/** Next unused byte; the pool starts empty and is filled on first use. */
let next = POOL_BYTES;

/** The start of `bytes` fresh pool bytes (the pool refilled first when it has too few left). */
function draw(bytes: number): number {
  if (next + bytes > POOL_BYTES) {
    randomFillSync(pool);
    next = 0;
  }
  const start = next;
  next += bytes;
  return start;
}

/** A random, URL-safe string with `bytes` bytes of entropy (default 32 = 256 bits), base64url. */
export function randomToken(bytes = 32): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > MAX_POOLED_BYTES) return unpooledRandomToken(bytes);
  const start = draw(bytes);
  const token = pool.toString("base64url", start, next);
  pool.fill(0, start, next);
  return token;
}

/** `bytes` random bytes (at most 64) in a Buffer of their own, from the same pool (a GCM nonce). */
export function randomBytesFromPool(bytes: number): Buffer {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > MAX_POOLED_BYTES) {
    throw new RangeError("randomBytesFromPool: 1 to 64 bytes");
  }
  const start = draw(bytes);
  const out = Buffer.from(pool.subarray(start, next));
  pool.fill(0, start, next);
  return out;
}
