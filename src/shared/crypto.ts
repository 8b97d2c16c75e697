/**
 * Random tokens, SHA-256 hashes and constant-time comparison.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** A random, URL-safe string with `bytes` bytes of entropy (default 32 = 256 bits). */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** SHA-256 of a UTF-8 string, base64url: how codes, tokens and secrets are stored (never raw). */
export function sha256Base64url(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("base64url");
}

/** Constant-time string comparison (lengths are compared through their hashes, so they do not leak). */
export function timingSafeEqualString(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a, "utf8").digest();
  const hb = createHash("sha256").update(b, "utf8").digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}
