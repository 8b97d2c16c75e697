/**
 * The one place that decides the authorization server's option defaults and limits, and checks
 * the issuer and the served resources (DESIGN.md principle 5: a bad configuration fails at start-up).
 * The limits table and shared checks live in ./option-limits.ts, the token exchange, enterprise
 * and workload identity options in ./grant-extensions.ts; both are re-exported here.
 */
import { DEFAULT_DPOP_ALGORITHMS, dpopProofVerifier } from "../../shared/dpop-proof.js";
import { GatehouseTypeError } from "../../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../../shared/resource-uri.js";
import { DEFAULT_REVISION, isRevision } from "../../shared/revision.js";
import { isScopeToken } from "../../shared/scopes.js";
import type { ResolvedDPoPOptions, ResolvedOptions } from "../core/context.js";
import { boolean, DAY, fail, integer, limited } from "../core/option-limits.js";
import type {
  AuthorizationServerOptions,
  ClientDocumentTrustPolicy,
  InitialAccessTokenOptions,
  ResourceOptions,
} from "../core/options.js";
import { dpopNonceSecret } from "../grants/dpop-binding.js";
import { OFFLINE_ACCESS } from "../policy/scopes.js";
import { resolveUpstreamSignIn } from "../upstream/resolve.js";
import { resolveGrantExtensions } from "./grant-extensions.js";

/** The default refresh race window, `refreshTokens.reuseGraceSeconds` (grants/refresh-policy.ts reuseGraceMs). */
const DEFAULT_REUSE_GRACE_SECONDS = 30;

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
 * DPoP at the token endpoint (RFC 9449). The algorithms are checked by the shared proof verifier
 * itself (src/shared/dpop-proof.ts decides which asymmetric algorithms exist), so the list
 * advertised in `dpop_signing_alg_values_supported` is exactly what proofs are checked against.
 */
function resolveDPoP(options: Omit<AuthorizationServerOptions, "store" | "resources">): ResolvedDPoPOptions {
  const dpop = options.dpop ?? {};
  if (typeof dpop !== "object" || dpop === null) fail("dpop must be an object");
  const signingAlgorithms = dpop.signingAlgorithms ?? [...DEFAULT_DPOP_ALGORITHMS];
  if (!Array.isArray(signingAlgorithms) || !signingAlgorithms.every((a) => typeof a === "string")) {
    fail("dpop.signingAlgorithms must be an array of JWS algorithm names");
  }
  const iatWindowSeconds = limited(dpop.iatWindowSeconds, "dpop.iatWindowSeconds", 60);
  try {
    dpopProofVerifier({ algorithms: signingAlgorithms, iatWindowSeconds });
  } catch (cause) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `dpop.signingAlgorithms is not accepted: ${(cause as Error).message}`,
      { cause },
    );
  }
  return {
    enabled: boolean(dpop.enabled, "dpop.enabled", true),
    signingAlgorithms: [...signingAlgorithms],
    iatWindowSeconds,
    requireNonce: boolean(dpop.requireNonce, "dpop.requireNonce", false),
    nonceLifetimeSeconds: limited(dpop.nonceLifetimeSeconds, "dpop.nonceLifetimeSeconds", 300),
    nonceSecret: dpopNonceSecret(options.issuer, options.keyEncryptionKeys),
  };
}

/** A host rule of the metadata-document allow-list: a host name, or `*.domain` for its subdomains. */
const HOST_RULE = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/**
 * `clientMetadataDocuments.trust`, checked here once (clients/resolver.ts only applies it): the
 * kind, an allow-list's host rules (lowercased: host names are case-insensitive), a callback's
 * function.
 */
function documentTrust(value: ClientDocumentTrustPolicy | undefined): ClientDocumentTrustPolicy {
  const trust = value ?? { kind: "any-https" as const };
  if (trust.kind === "allow-list") {
    if (!Array.isArray(trust.hosts)) fail("clientMetadataDocuments.trust.hosts must be an array");
    for (const host of trust.hosts) {
      if (typeof host !== "string" || !HOST_RULE.test(host.toLowerCase())) {
        fail('clientMetadataDocuments.trust.hosts entries must be host names or "*.domain" suffix rules');
      }
    }
    return { kind: "allow-list", hosts: trust.hosts.map((h) => h.toLowerCase()) };
  }
  if (trust.kind === "callback") {
    if (typeof trust.decide !== "function") fail("clientMetadataDocuments.trust.decide must be a function");
    return trust;
  }
  if (trust.kind !== "any-https") {
    fail('clientMetadataDocuments.trust.kind must be "any-https", "allow-list" or "callback"');
  }
  return trust;
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
  const trust = documentTrust(cimd.trust);
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
      // The refresh race window (grants/refresh-policy.ts reuseGraceMs says why it is on by default).
      reuseGraceSeconds: limited(
        refresh.reuseGraceSeconds,
        "refreshTokens.reuseGraceSeconds",
        DEFAULT_REUSE_GRACE_SECONDS,
      ),
      withoutOfflineAccess: {
        idleTtlSeconds: onlineIdleTtlSeconds,
        absoluteTtlSeconds: onlineAbsoluteTtlSeconds,
      },
    },
    dynamicRegistration: {
      enabled: boolean(dyn.enabled, "dynamicRegistration.enabled", true),
      ratePerHour: limited(dyn.ratePerHour, "dynamicRegistration.ratePerHour", 20),
      unusedTtlSeconds: limited(dyn.unusedTtlSeconds, "dynamicRegistration.unusedTtlSeconds", DAY),
      initialAccessTokens: initialAccessTokens(dyn.initialAccessTokens),
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
    dpop: resolveDPoP(options),
    ...resolveGrantExtensions(options),
    ...upstreamSignIn(options.upstreamSignIn),
  };
}

/** `upstreamSignIn`, checked in ../upstream/resolve.ts; absent when not configured. */
function upstreamSignIn(
  value: AuthorizationServerOptions["upstreamSignIn"],
): Pick<ResolvedOptions, "upstreamSignIn"> {
  const resolved = resolveUpstreamSignIn(value);
  return resolved ? { upstreamSignIn: resolved } : {};
}

/** RFC 7591 §3 initial access tokens: each a SHA-256 (43 base64url characters) with its scopes. */
function initialAccessTokens(value: unknown): InitialAccessTokenOptions[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) fail("dynamicRegistration.initialAccessTokens must be an array");
  return value.map((entry, i) => {
    const name = `dynamicRegistration.initialAccessTokens[${i}]`;
    const { sha256, scopes } = (entry ?? {}) as Partial<InitialAccessTokenOptions>;
    if (typeof sha256 !== "string" || !/^[A-Za-z0-9_-]{43}$/.test(sha256)) {
      fail(`${name}.sha256 must be the token's SHA-256, base64url without padding (43 characters)`);
    }
    if (!Array.isArray(scopes) || scopes.length === 0 || !scopes.every((s) => isScopeToken(s))) {
      fail(`${name}.scopes must be a non-empty array of scopes`);
    }
    return { sha256, scopes: [...scopes] };
  });
}
