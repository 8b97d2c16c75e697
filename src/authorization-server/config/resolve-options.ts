/**
 * The one place that decides the authorization server's option defaults and limits, and checks
 * the issuer and the served resources (DESIGN.md principle 5: a bad configuration fails at start-up).
 */
import { DEFAULT_DPOP_ALGORITHMS, dpopProofVerifier } from "../../shared/dpop-proof.js";
import { GatehouseTypeError } from "../../shared/errors.js";
import { fetchUrlProblem } from "../../shared/guarded-fetch-url.js";
import { canonicalResourceUri, isLoopbackHost } from "../../shared/resource-uri.js";
import { DEFAULT_REVISION, isRevision } from "../../shared/revision.js";
import { isScopeToken } from "../../shared/scopes.js";
import { dpopNonceSecret } from "../grants/dpop-binding.js";
import { resolveUpstreamSignIn } from "../upstream/resolve.js";
import type { ResolvedDPoPOptions, ResolvedOptions } from "./context.js";
import type {
  AuthorizationServerOptions,
  ClientDocumentTrustPolicy,
  EnterpriseAuthorizationOptions,
  IdentityProviderOptions,
  InitialAccessTokenOptions,
  ResourceOptions,
  TokenExchangeOptions,
  TokenExchangePolicy,
  TrustedIssuerOptions,
  WorkloadIdentityOptions,
  WorkloadIssuerOptions,
} from "./options.js";

/** The default refresh race window, `refreshTokens.reuseGraceSeconds` (grants/refresh-policy.ts reuseGraceMs). */
const DEFAULT_REUSE_GRACE_SECONDS = 30;

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

// ---------------------------------------------------------------------------------------------
// Token exchange, enterprise-managed authorization and workload identity (each off unless set)
// ---------------------------------------------------------------------------------------------

/** Algorithms accepted from a trusted assertion issuer unless it lists its own. */
export const DEFAULT_ASSERTION_ALGORITHMS = ["ES256", "ES384", "PS256", "RS256", "EdDSA"];

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

function objectOption(value: unknown, name: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${name} must be an object`);
  return value as Record<string, unknown>;
}

function nonEmptyArray(value: unknown, name: string): unknown[] {
  if (!Array.isArray(value) || value.length === 0) fail(`${name} must be a non-empty array`);
  return value;
}

function nonEmptyString(value: unknown, name: string): string {
  if (typeof value !== "string" || value === "") fail(`${name} must be a non-empty string`);
  return value;
}

function scopeList(value: unknown, name: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((s) => typeof s === "string" && isScopeToken(s))) {
    fail(`${name} must be an array of RFC 6749 §3.3 scope tokens`);
  }
  return [...value];
}

/** A resource URI written in canonical form (RFC 8707 §2), as `resources[].uri` must be. */
function resourceUri(value: unknown, name: string): string {
  const uri = nonEmptyString(value, name);
  let canonical: string;
  try {
    canonical = canonicalResourceUri(uri, { keepTrailingSlash: uri.endsWith("/") });
  } catch {
    return fail(`${name} is not a valid resource URI`);
  }
  if (canonical !== uri) fail(`${name} must be written in canonical form (${canonical})`);
  return uri;
}

/** Checks a trusted assertion issuer: its identifier, exactly one key source, asymmetric algorithms. */
function trustedIssuer<T extends TrustedIssuerOptions>(value: T, name: string): T & { algorithms: string[] } {
  const o = objectOption(value, name);
  nonEmptyString(o.issuer, `${name}.issuer`);
  if ((o.jwksUri === undefined) === (o.jwks === undefined))
    fail(`${name} needs exactly one of jwksUri and jwks`);
  if (o.jwksUri !== undefined) {
    const problem = fetchUrlProblem(o.jwksUri as string);
    if (problem) fail(`${name}.jwksUri: ${problem}`);
  } else {
    const keys = (objectOption(o.jwks, `${name}.jwks`) as { keys?: unknown }).keys;
    for (const [i, key] of nonEmptyArray(keys, `${name}.jwks.keys`).entries()) {
      const jwk = objectOption(key, `${name}.jwks.keys[${i}]`);
      // Public asymmetric keys only: a symmetric (`oct`) key would be the HMAC confusion by another road.
      if (jwk.kty !== "EC" && jwk.kty !== "RSA" && jwk.kty !== "OKP")
        fail(`${name}.jwks.keys[${i}] must be EC, RSA or OKP`);
      if ("d" in jwk) fail(`${name}.jwks.keys[${i}] must be a public key (it has a private part)`);
    }
  }
  const algorithms = o.algorithms ?? DEFAULT_ASSERTION_ALGORITHMS;
  if (
    !Array.isArray(algorithms) ||
    algorithms.length === 0 ||
    !algorithms.every((a) => typeof a === "string" && ASYMMETRIC_ALGORITHMS.has(a))
  ) {
    fail(`${name}.algorithms must list asymmetric JWS algorithms (never HS* or none)`);
  }
  return { ...value, algorithms: [...algorithms] };
}

function uniqueIssuers(issuers: { issuer: string }[], name: string): void {
  const seen = new Set<string>();
  for (const { issuer } of issuers) {
    if (seen.has(issuer)) fail(`${name} lists the issuer ${issuer} twice`);
    seen.add(issuer);
  }
}

function loopbackForTesting(value: unknown, name: string): { ca?: string[] } | undefined {
  if (value === undefined) return undefined;
  const o = objectOption(value, name);
  if (o.ca !== undefined && (!Array.isArray(o.ca) || !o.ca.every((c) => typeof c === "string"))) {
    fail(`${name}.ca must be an array of PEM strings`);
  }
  return o.ca === undefined ? {} : { ca: [...(o.ca as string[])] };
}

/** Token exchange policies (RFC 8693); undefined when not configured. */
function resolveTokenExchange(
  value: unknown,
  served: Set<string> | undefined,
): TokenExchangeOptions | undefined {
  if (value === undefined) return undefined;
  const o = objectOption(value, "tokenExchange");
  const policies = nonEmptyArray(o.policies, "tokenExchange.policies").map((p, i): TokenExchangePolicy => {
    const name = `tokenExchange.policies[${i}]`;
    const policy = objectOption(p, name);
    const clientId = nonEmptyString(policy.clientId, `${name}.clientId`);
    const fromResource = resourceUri(policy.fromResource, `${name}.fromResource`);
    const toResources = nonEmptyArray(policy.toResources, `${name}.toResources`).map((r, j) =>
      resourceUri(r, `${name}.toResources[${j}]`),
    );
    for (const uri of [fromResource, ...toResources]) {
      if (served && !served.has(uri)) fail(`${name} names ${uri}, which is not among resources`);
    }
    const scopes = scopeList(policy.scopes, `${name}.scopes`);
    return { clientId, fromResource, toResources, ...(scopes === undefined ? {} : { scopes }) };
  });
  return { policies };
}

/** Enterprise identity providers for ID-JAG assertions; undefined when not configured. */
function resolveEnterpriseAuthorization(value: unknown): ResolvedOptions["enterpriseAuthorization"] {
  if (value === undefined) return undefined;
  const o = objectOption(value, "enterpriseAuthorization") as Partial<EnterpriseAuthorizationOptions>;
  const identityProviders = nonEmptyArray(
    o.identityProviders,
    "enterpriseAuthorization.identityProviders",
  ).map((p, i) => {
    const name = `enterpriseAuthorization.identityProviders[${i}]`;
    const provider = trustedIssuer(p as IdentityProviderOptions, name);
    if (
      provider.clients !== undefined &&
      (!Array.isArray(provider.clients) || !provider.clients.every((c) => typeof c === "string" && c !== ""))
    ) {
      fail(`${name}.clients must be an array of client ids`);
    }
    return provider;
  });
  uniqueIssuers(identityProviders, "enterpriseAuthorization.identityProviders");
  const loopback = loopbackForTesting(
    o.dangerouslyAllowLoopbackForTesting,
    "enterpriseAuthorization.dangerouslyAllowLoopbackForTesting",
  );
  return {
    identityProviders,
    maxAssertionLifetimeSeconds: limited(
      o.maxAssertionLifetimeSeconds,
      "enterpriseAuthorization.maxAssertionLifetimeSeconds",
      300,
    ),
    ...(loopback ? { dangerouslyAllowLoopbackForTesting: loopback } : {}),
  };
}

/** Workload identity issuers and the clients their subjects act as; undefined when not configured. */
function resolveWorkloadIdentity(value: unknown): ResolvedOptions["workloadIdentity"] {
  if (value === undefined) return undefined;
  const o = objectOption(value, "workloadIdentity") as Partial<WorkloadIdentityOptions>;
  const issuers = nonEmptyArray(o.issuers, "workloadIdentity.issuers").map((entry, i) => {
    const name = `workloadIdentity.issuers[${i}]`;
    const issuer = trustedIssuer(entry as WorkloadIssuerOptions, name);
    if (issuer.audience !== undefined) nonEmptyString(issuer.audience, `${name}.audience`);
    const subjects = nonEmptyArray(issuer.subjects, `${name}.subjects`).map((s, j) => {
      const sname = `${name}.subjects[${j}]`;
      const subject = objectOption(s, sname);
      const scopes = scopeList(subject.scopes, `${sname}.scopes`);
      return {
        subject: nonEmptyString(subject.subject, `${sname}.subject`),
        clientId: nonEmptyString(subject.clientId, `${sname}.clientId`),
        ...(scopes === undefined ? {} : { scopes }),
      };
    });
    if (new Set(subjects.map((s) => s.subject)).size !== subjects.length) {
      fail(`${name}.subjects lists a subject twice`);
    }
    return { ...issuer, subjects, singleUse: boolean(issuer.singleUse, `${name}.singleUse`, true) };
  });
  uniqueIssuers(issuers, "workloadIdentity.issuers");
  const loopback = loopbackForTesting(
    o.dangerouslyAllowLoopbackForTesting,
    "workloadIdentity.dangerouslyAllowLoopbackForTesting",
  );
  return {
    issuers,
    maxAssertionLifetimeSeconds: limited(
      o.maxAssertionLifetimeSeconds,
      "workloadIdentity.maxAssertionLifetimeSeconds",
      3600,
    ),
    ...(loopback ? { dangerouslyAllowLoopbackForTesting: loopback } : {}),
  };
}

/** The three assertion and exchange options, resolved (each undefined when not configured). */
function resolveGrantExtensions(
  options: Pick<AuthorizationServerOptions, "tokenExchange" | "enterpriseAuthorization" | "workloadIdentity">,
): Pick<ResolvedOptions, "tokenExchange" | "enterpriseAuthorization" | "workloadIdentity"> {
  // The served resources, when the caller passed them, so a policy naming another resource fails here.
  const resources = (options as { resources?: unknown }).resources;
  const served = Array.isArray(resources)
    ? new Set(resources.map((r) => (r as { uri?: unknown } | null)?.uri).filter((u) => typeof u === "string"))
    : undefined;
  const tokenExchange = resolveTokenExchange(options.tokenExchange, served as Set<string> | undefined);
  const enterpriseAuthorization = resolveEnterpriseAuthorization(options.enterpriseAuthorization);
  const workloadIdentity = resolveWorkloadIdentity(options.workloadIdentity);
  return {
    ...(tokenExchange ? { tokenExchange } : {}),
    ...(enterpriseAuthorization ? { enterpriseAuthorization } : {}),
    ...(workloadIdentity ? { workloadIdentity } : {}),
  };
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
