/**
 * The one place that decides the authorization server's option defaults and limits, and checks
 * the issuer and the served resources (DESIGN.md principle 5: a bad configuration fails at start-up).
 */
import { GatehouseTypeError } from "../../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../../shared/resource-uri.js";
import { DEFAULT_REVISION, isRevision } from "../../shared/revision.js";
import { isScopeToken } from "../../shared/scopes.js";
import type { ResolvedOptions } from "./context.js";
import type { AuthorizationServerOptions, ResourceOptions } from "./options.js";

/** Scope that asks for a refresh token (OpenID Connect Core §11; the spec's refresh-token section). */
export const OFFLINE_ACCESS = "offline_access";

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
} as const satisfies Record<string, { min: number; max: number }>;

export type LimitedOption = keyof typeof OPTION_LIMITS;

/** An integer option within its {@link OPTION_LIMITS}, or `fallback` when absent. */
export function limited(value: unknown, name: LimitedOption, fallback: number): number {
  const { min, max } = OPTION_LIMITS[name];
  return integer(value, name, fallback, min, max);
}

function boolean(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") fail(`${name} must be a boolean`);
  return value;
}

/**
 * Checks the issuer identifier (RFC 8414 §2: an `https` URL with no query or fragment; spec
 * "Communication security": every authorization server endpoint MUST be served over HTTPS). Plain
 * `http` is accepted only on a loopback host and only with `allowInsecureLoopback`.
 * Returns whether the issuer is plain http.
 */
function checkIssuer(issuer: unknown, allowInsecureLoopback: boolean): boolean {
  if (typeof issuer !== "string" || issuer === "") fail("issuer must be a non-empty string");
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    return fail("issuer must be an absolute URL");
  }
  if (issuer.includes("?") || issuer.includes("#")) fail("issuer must not contain a query or a fragment");
  if (url.username !== "" || url.password !== "") fail("issuer must not contain userinfo");
  // The issuer is compared as a plain string by clients (RFC 8414 §3.3, RFC 9207 §2.4), so it must
  // already be in the form every URL parser produces; otherwise metadata URLs and `iss` disagree.
  if (url.href !== issuer && url.href !== `${issuer}/`) {
    fail(`issuer must be written in normalised form (${url.href.replace(/\/$/, "")})`);
  }
  if (url.protocol === "https:") return false;
  if (url.protocol !== "http:") fail("issuer must use https");
  if (!isLoopbackHost(url.hostname)) {
    fail("issuer must use https (plain http is allowed only on a loopback host with allowInsecureLoopback)");
  }
  if (!allowInsecureLoopback) {
    fail("issuer uses plain http: set allowInsecureLoopback for local development, or use https");
  }
  return true;
}

/** Checks the served resources (RFC 8707; spec "Canonical server URI"), keyed by canonical URI. */
export function checkResources(resources: unknown): Map<string, ResourceOptions> {
  if (!Array.isArray(resources) || resources.length === 0) fail("resources must list at least one resource");
  const out = new Map<string, ResourceOptions>();
  for (const [i, r] of (resources as unknown[]).entries()) {
    if (typeof r !== "object" || r === null) fail(`resources[${i}] must be an object`);
    const { uri, scopes, name } = r as Partial<ResourceOptions>;
    if (typeof uri !== "string") fail(`resources[${i}].uri must be a string`);
    let canonical: string;
    try {
      // Spec "Canonical server URI": scheme required, no fragment, lowercase scheme and host; a
      // trailing slash is kept only where the operator wrote one (it may be meaningful).
      canonical = canonicalResourceUri(uri, { keepTrailingSlash: uri.endsWith("/") });
    } catch (cause) {
      throw new GatehouseTypeError(
        "ERR_INVALID_OPTION",
        `resources[${i}].uri is not a valid resource URI: ${(cause as Error).message}`,
        { cause },
      );
    }
    if (canonical !== uri) fail(`resources[${i}].uri must be written in canonical form (${canonical})`);
    if (out.has(uri)) fail(`resources[${i}].uri is listed twice`);
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === "string" && isScopeToken(s))) {
      fail(`resources[${i}].scopes must be an array of RFC 6749 §3.3 scope tokens`);
    }
    if (scopes.includes(OFFLINE_ACCESS)) {
      fail(
        `resources[${i}].scopes must not contain ${OFFLINE_ACCESS} (the server adds it when refresh is on)`,
      );
    }
    if (name !== undefined && typeof name !== "string") fail(`resources[${i}].name must be a string`);
    out.set(uri, { uri, scopes: [...scopes], ...(name === undefined ? {} : { name }) });
  }
  return out;
}

/**
 * Applies defaults and validates every option (DESIGN.md principle 5: a bad configuration fails at
 * start-up). Throws `GatehouseTypeError` with code `ERR_INVALID_OPTION`.
 */
export function resolveOptions(
  options: Omit<AuthorizationServerOptions, "store" | "resources">,
): ResolvedOptions {
  if (typeof options !== "object" || options === null) fail("options must be an object");
  const allowInsecureLoopback = boolean(options.allowInsecureLoopback, "allowInsecureLoopback", false);
  checkIssuer(options.issuer, allowInsecureLoopback);
  const revision = options.revision ?? DEFAULT_REVISION;
  if (!isRevision(revision)) {
    fail('revision must be "2025-11-25" or "2026-07-28"');
  }
  const refresh = options.refreshTokens ?? {};
  const idleTtlSeconds = limited(refresh.idleTtlSeconds, "refreshTokens.idleTtlSeconds", 14 * DAY);
  const absoluteTtlSeconds = limited(
    refresh.absoluteTtlSeconds,
    "refreshTokens.absoluteTtlSeconds",
    Math.max(90 * DAY, idleTtlSeconds),
  );
  if (idleTtlSeconds > absoluteTtlSeconds) {
    fail("refreshTokens.idleTtlSeconds must not exceed refreshTokens.absoluteTtlSeconds");
  }
  const online = refresh.withoutOfflineAccess ?? {};
  const onlineIdleTtlSeconds = integer(
    online.idleTtlSeconds,
    "refreshTokens.withoutOfflineAccess.idleTtlSeconds",
    Math.min(DAY, idleTtlSeconds),
    60,
    idleTtlSeconds,
  );
  const onlineAbsoluteTtlSeconds = integer(
    online.absoluteTtlSeconds,
    "refreshTokens.withoutOfflineAccess.absoluteTtlSeconds",
    Math.max(onlineIdleTtlSeconds, Math.min(7 * DAY, absoluteTtlSeconds)),
    60,
    absoluteTtlSeconds,
  );
  if (onlineIdleTtlSeconds > onlineAbsoluteTtlSeconds) {
    fail(
      "refreshTokens.withoutOfflineAccess.idleTtlSeconds must not exceed refreshTokens.withoutOfflineAccess.absoluteTtlSeconds",
    );
  }
  const dyn = options.dynamicRegistration ?? {};
  const tokenLimit = options.tokenRateLimit ?? {};
  const device = options.deviceAuthorization ?? {};
  const cimd = options.clientMetadataDocuments ?? {};
  const trust = cimd.trust ?? { kind: "any-https" as const };
  if (!["any-https", "allow-list", "callback"].includes(trust.kind)) {
    fail('clientMetadataDocuments.trust.kind must be "any-https", "allow-list" or "callback"');
  }
  const minCacheSeconds = limited(cimd.minCacheSeconds, "clientMetadataDocuments.minCacheSeconds", 60);
  const maxCacheSeconds = limited(cimd.maxCacheSeconds, "clientMetadataDocuments.maxCacheSeconds", DAY);
  if (minCacheSeconds > maxCacheSeconds) {
    fail("clientMetadataDocuments.minCacheSeconds must not exceed maxCacheSeconds");
  }
  const scopeDescriptions = options.scopeDescriptions ?? {};
  if (typeof scopeDescriptions !== "object" || scopeDescriptions === null) {
    fail("scopeDescriptions must be an object");
  }
  // Not an option here: the client address (rate-limit key) is the HTTP adapter's to decide, and
  // a flag the server would silently ignore is worse than a refusal.
  if ((options as { trustProxy?: unknown }).trustProxy !== undefined) {
    fail(
      "trustProxy is not an authorization server option: the HTTP adapter decides the client address " +
        "(toNodeListener(handler, { trustProxy }) or gatehouse serve --trust-proxy)",
    );
  }
  return {
    issuer: options.issuer,
    revision,
    accessTokenTtlSeconds: limited(options.accessTokenTtlSeconds, "accessTokenTtlSeconds", 300),
    codeTtlSeconds: limited(options.codeTtlSeconds, "codeTtlSeconds", 60),
    refresh: {
      enabled: boolean(refresh.enabled, "refreshTokens.enabled", true),
      idleTtlSeconds,
      absoluteTtlSeconds,
      reuseGraceSeconds: limited(refresh.reuseGraceSeconds, "refreshTokens.reuseGraceSeconds", 0),
      withoutOfflineAccess: {
        idleTtlSeconds: onlineIdleTtlSeconds,
        absoluteTtlSeconds: onlineAbsoluteTtlSeconds,
      },
    },
    dynamicRegistration: {
      enabled: boolean(dyn.enabled, "dynamicRegistration.enabled", true),
      ratePerHour: limited(dyn.ratePerHour, "dynamicRegistration.ratePerHour", 20),
      unusedTtlSeconds: limited(dyn.unusedTtlSeconds, "dynamicRegistration.unusedTtlSeconds", DAY),
    },
    tokenRateLimit: {
      perClientPerMinute: limited(tokenLimit.perClientPerMinute, "tokenRateLimit.perClientPerMinute", 3000),
      perAddressPerMinute: limited(
        tokenLimit.perAddressPerMinute,
        "tokenRateLimit.perAddressPerMinute",
        6000,
      ),
    },
    deviceAuthorization: {
      enabled: boolean(device.enabled, "deviceAuthorization.enabled", true),
      ttlSeconds: limited(device.ttlSeconds, "deviceAuthorization.ttlSeconds", 600),
      intervalSeconds: limited(device.intervalSeconds, "deviceAuthorization.intervalSeconds", 5),
    },
    clientMetadataDocuments: {
      ...cimd,
      enabled: boolean(cimd.enabled, "clientMetadataDocuments.enabled", true),
      trust,
      maxBytes: limited(cimd.maxBytes, "clientMetadataDocuments.maxBytes", 5120),
      timeoutMs: limited(cimd.timeoutMs, "clientMetadataDocuments.timeoutMs", 5000),
      minCacheSeconds,
      maxCacheSeconds,
    },
    scopeDescriptions: { ...scopeDescriptions },
    allowInsecureLoopback,
  };
}
