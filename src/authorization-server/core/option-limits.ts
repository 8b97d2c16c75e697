/**
 * The option limits table and the small checks every resolver shares (`fail`, `integer`,
 * `limited`, `boolean`): moved out of resolve-options.ts so the table the CLI schema reads
 * (src/cli/config.ts) stands on its own.
 */
import { GatehouseTypeError } from "../../shared/errors.js";

/** Seconds in a day, for the limits below. */
export const DAY = 24 * 60 * 60;

/** Refuses an option (`GatehouseTypeError`, code `ERR_INVALID_OPTION`). */
export function fail(message: string): never {
  throw new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

/** An integer option between `min` and `max`, or `fallback` when absent. */
export function integer(value: unknown, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    fail(`${name} must be an integer between ${min} and ${max}`);
  }
  return value;
}

/**
 * The limits of every integer option with fixed bounds (inclusive), decided here only: the resolver
 * applies them and the CLI's config schema (src/cli/config.ts) takes them from this table.
 * Lifetimes that are bounded by another option (the `withoutOfflineAccess` ones) are checked below.
 */
export const OPTION_LIMITS = {
  // Access tokens are bearer credentials that cannot be revoked once issued as JWTs: short-lived.
  accessTokenTtlSeconds: { min: 10, max: DAY },
  // Codes are short-lived (OAuth 2.1 §4.1.2 recommends at most 10 minutes; Gatehouse: 60 s).
  codeTtlSeconds: { min: 1, max: 60 },
  "refreshTokens.idleTtlSeconds": { min: 60, max: 3650 * DAY },
  "refreshTokens.absoluteTtlSeconds": { min: 60, max: 3650 * DAY },
  // A grace window weakens reuse detection (RFC 9700 §4.14.2): at most five minutes.
  "refreshTokens.reuseGraceSeconds": { min: 0, max: 300 },
  "dynamicRegistration.ratePerHour": { min: 1, max: 1_000_000 },
  "dynamicRegistration.unusedTtlSeconds": { min: 60, max: 365 * DAY },
  // 0 turns a token endpoint limit off.
  "tokenRateLimit.perClientPerMinute": { min: 0, max: 1_000_000 },
  "tokenRateLimit.perAddressPerMinute": { min: 0, max: 1_000_000 },
  // RFC 8628 §3.2 `expires_in`: long enough to walk to another device and sign in, short enough
  // that a user code (20^8 values, guessed at a bounded rate, §5.1) is not worth guessing.
  "deviceAuthorization.ttlSeconds": { min: 60, max: 1800 },
  // RFC 8628 §3.2 `interval` (default 5 s); polls faster than it get `slow_down` (§3.5).
  "deviceAuthorization.intervalSeconds": { min: 1, max: 60 },
  "clientMetadataDocuments.maxBytes": { min: 256, max: 1024 * 1024 },
  "clientMetadataDocuments.timeoutMs": { min: 100, max: 60_000 },
  "clientMetadataDocuments.minCacheSeconds": { min: 0, max: DAY },
  "clientMetadataDocuments.maxCacheSeconds": { min: 0, max: 30 * DAY },
  maintenanceIntervalMs: { min: 0, max: 7 * DAY * 1000 },
  // RFC 9449 §11.1: proofs are accepted for "a relatively brief period on the order of seconds or
  // minutes"; the shared verifier allows at most ten minutes.
  "dpop.iatWindowSeconds": { min: 1, max: 600 },
  "dpop.nonceLifetimeSeconds": { min: 10, max: DAY },
  // An ID-JAG is a short-lived grant (a few minutes); a workload token lives as long as its issuer
  // makes it (service-account tokens: about an hour), but never more than a day here.
  "enterpriseAuthorization.maxAssertionLifetimeSeconds": { min: 10, max: 3600 },
  "workloadIdentity.maxAssertionLifetimeSeconds": { min: 10, max: DAY },
  // One request to an upstream identity provider, while the user waits on a page.
  "upstreamSignIn.timeoutMs": { min: 100, max: 60_000 },
} as const satisfies Record<string, { min: number; max: number }>;

export type LimitedOption = keyof typeof OPTION_LIMITS;

/** An integer option within its {@link OPTION_LIMITS}, or `fallback` when absent. */
export function limited(value: unknown, name: LimitedOption, fallback: number): number {
  const { min, max } = OPTION_LIMITS[name];
  return integer(value, name, fallback, min, max);
}

export function boolean(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") fail(`${name} must be a boolean`);
  return value;
}

/**
 * Asymmetric JWS algorithms only (RFC 8725 §3.1, §3.2): an HMAC algorithm would let anyone who holds
 * the published key sign, and `none` signs nothing.
 */
export const ASYMMETRIC_ALGORITHMS: ReadonlySet<string> = new Set([
  "ES256",
  "ES384",
  "ES512",
  "PS256",
  "PS384",
  "PS512",
  "RS256",
  "RS384",
  "RS512",
  "EdDSA",
  "Ed25519",
]);
