/**
 * The rules every JWT assertion this server accepts is held to, decided here only, whatever it is
 * for: a client assertion (`private_key_jwt`, RFC 7523 §2.2, clients/authentication.ts), an
 * identity assertion (ID-JAG) or a workload's JWT (RFC 7523 §2.1, grants/jwt-assertion.ts):
 *
 * - the clock skew tolerated on `exp`, `nbf` and `iat` ({@link CLOCK_TOLERANCE_SECONDS});
 * - the lifetime ({@link lifetimeProblem});
 * - the length of a `jti` or `sub` taken from the remote party ({@link MAX_IDENTIFIER_LENGTH});
 * - whether a `jti` is fresh ({@link useJtiOnce}): used once, through the store's `useOnce`, so every
 *   instance sharing the store refuses a replay (RFC 7523 §3 item 7).
 *
 * Whose keys verify the signature stays with each use (a client's registered keys or its metadata
 * document's, a trusted issuer's configured set); the checks after the signature are these.
 */

import { sha256Base64url } from "../../shared/crypto.js";
import type { ServerContext } from "../core/context.js";

/** Signature algorithms accepted for `private_key_jwt` client assertions. */
export const CLIENT_ASSERTION_ALGORITHMS = ["ES256", "ES384", "EdDSA", "PS256", "RS256"];

/** Clock skew tolerated on `exp`, `nbf` and `iat` of every assertion (passed to jose, and below). */
export const CLOCK_TOLERANCE_SECONDS = 30;

/** A `jti` or `sub` longer than this is refused rather than stored or hashed. */
const MAX_IDENTIFIER_LENGTH = 255;

/** What an assertion is for: each keeps its used `jti`s apart from the others'. */
type AssertionUse = "client-assertion" | "id-jag" | "workload";

/** The store key prefix per use (the grants' keys are the ones they had before this file). */
const KEY_PREFIX: Record<AssertionUse, string> = {
  "client-assertion": "client-assertion",
  "id-jag": "jwt-bearer:id-jag",
  workload: "jwt-bearer:workload",
};

/**
 * Why an assertion's lifetime is refused, or undefined. `exp` is checked by jose (with the
 * tolerance); here: an `iat` in the future (it would stretch the bound), `exp - iat` over
 * `maxLifetimeSeconds`, and `exp` further than that (plus the tolerance) from now, which also bounds
 * an assertion that carries no `iat` (RFC 7523 §3 makes it optional for client assertions).
 */
export function lifetimeProblem(
  claims: { exp: number; iat?: number | undefined },
  nowMs: number,
  maxLifetimeSeconds: number,
): "iat is in the future" | "lifetime is too long" | undefined {
  const now = Math.floor(nowMs / 1000);
  const { exp, iat } = claims;
  if (iat !== undefined && iat > now + CLOCK_TOLERANCE_SECONDS) return "iat is in the future";
  if (iat !== undefined && exp - iat > maxLifetimeSeconds) return "lifetime is too long";
  if (exp - now > maxLifetimeSeconds + CLOCK_TOLERANCE_SECONDS) return "lifetime is too long";
  return undefined;
}

/** Whether `value` is an identifier this server takes from a remote party (`jti`, `sub`). */
export function acceptableIdentifier(value: unknown): value is string {
  return typeof value === "string" && value !== "" && value.length <= MAX_IDENTIFIER_LENGTH;
}

/**
 * Is this `jti` fresh: records it as used by `iss` for `use` until the assertion expires (plus the
 * tolerance), in the store so that every instance sees it (DESIGN.md "One-time values across
 * instances"). "invalid" for a missing or oversized `jti`, "replayed" for a second use, "fresh" once.
 * The key is a hash: `iss` and `jti` come from the remote party, the store's key is bounded.
 */
export async function useJtiOnce(
  ctx: ServerContext,
  use: AssertionUse,
  claims: { iss: string; exp: number; jti?: unknown },
): Promise<"fresh" | "invalid" | "replayed"> {
  const { jti } = claims;
  if (!acceptableIdentifier(jti)) return "invalid";
  const key = `${KEY_PREFIX[use]}:${sha256Base64url(`${claims.iss}\n${jti}`)}`;
  const expiresAt = (claims.exp + CLOCK_TOLERANCE_SECONDS) * 1000;
  return (await ctx.store.useOnce(key, expiresAt, ctx.now())) ? "fresh" : "replayed";
}
