/**
 * Random tokens, SHA-256 hashes and constant-time comparison.
 */
import * as nodeCrypto from "node:crypto";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * node:crypto's one-shot `hash()` (Node >= 20.12): about a third of `createHash().update().digest()`
 * per short value (issue 11: a code flow hashes half a dozen codes, tokens and ids). Node 20.11,
 * which the engines range still admits, lacks it; there the streaming form is used.
 */
const oneShotHash = (nodeCrypto as { hash?: (algorithm: string, data: string, encoding: string) => unknown })
  .hash;

function sha256(value: string, encoding: "base64url"): string;
function sha256(value: string, encoding: "buffer"): Buffer;
function sha256(value: string, encoding: "base64url" | "buffer"): string | Buffer {
  if (oneShotHash) return oneShotHash("sha256", value, encoding) as string | Buffer;
  const hash = createHash("sha256").update(value, "utf8");
  return encoding === "buffer" ? hash.digest() : hash.digest(encoding);
}

/** A random, URL-safe string with `bytes` bytes of entropy (default 32 = 256 bits). */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** SHA-256 of a UTF-8 string, base64url: how codes, tokens and secrets are stored (never raw). */
export function sha256Base64url(value: string): string {
  return sha256(value, "base64url");
}

/** Constant-time string comparison (lengths are compared through their hashes, so they do not leak). */
export function timingSafeEqualString(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a, "buffer"), sha256(b, "buffer")) && a.length === b.length;
}
