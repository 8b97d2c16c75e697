import { GatehouseTypeError } from "../shared/errors.js";
import { jsonLogger, type Logger } from "../shared/log.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";
import { isScopeToken, ScopeHierarchy } from "../shared/scopes.js";
import type { ClientRecord } from "../storage/contract.js";
import { createClientResolver } from "./client-resolver.js";
import type { ResolvedOptions, ServerContext } from "./context.js";
import { createKeyManager } from "./keys.js";
import type { AuthorizationServerOptions, ResourceOptions } from "./options.js";
import { redirectUriProblem } from "./redirect-uri.js";

/** Scope that asks for a refresh token (OpenID Connect Core §11; the spec's refresh-token section). */
export const OFFLINE_ACCESS = "offline_access";

const DAY = 24 * 60 * 60;

function fail(message: string): never {
  throw new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

function integer(value: unknown, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    fail(`${name} must be an integer between ${min} and ${max}`);
  }
  return value;
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

function checkResources(resources: unknown): Map<string, ResourceOptions> {
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
export function resolveOptions(options: AuthorizationServerOptions): ResolvedOptions {
  if (typeof options !== "object" || options === null) fail("options must be an object");
  const allowInsecureLoopback = boolean(options.allowInsecureLoopback, "allowInsecureLoopback", false);
  checkIssuer(options.issuer, allowInsecureLoopback);
  const revision = options.revision ?? "2026-07-28";
  if (revision !== "2025-11-25" && revision !== "2026-07-28") {
    fail('revision must be "2025-11-25" or "2026-07-28"');
  }
  const refresh = options.refreshTokens ?? {};
  const idleTtlSeconds = integer(
    refresh.idleTtlSeconds,
    "refreshTokens.idleTtlSeconds",
    14 * DAY,
    60,
    3650 * DAY,
  );
  const absoluteTtlSeconds = integer(
    refresh.absoluteTtlSeconds,
    "refreshTokens.absoluteTtlSeconds",
    Math.max(90 * DAY, idleTtlSeconds),
    60,
    3650 * DAY,
  );
  if (idleTtlSeconds > absoluteTtlSeconds) {
    fail("refreshTokens.idleTtlSeconds must not exceed refreshTokens.absoluteTtlSeconds");
  }
  const dyn = options.dynamicRegistration ?? {};
  const cimd = options.clientMetadataDocuments ?? {};
  const trust = cimd.trust ?? { kind: "any-https" as const };
  if (!["any-https", "allow-list", "callback"].includes(trust.kind)) {
    fail('clientMetadataDocuments.trust.kind must be "any-https", "allow-list" or "callback"');
  }
  const minCacheSeconds = integer(
    cimd.minCacheSeconds,
    "clientMetadataDocuments.minCacheSeconds",
    60,
    0,
    DAY,
  );
  const maxCacheSeconds = integer(
    cimd.maxCacheSeconds,
    "clientMetadataDocuments.maxCacheSeconds",
    DAY,
    0,
    30 * DAY,
  );
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
    accessTokenTtlSeconds: integer(options.accessTokenTtlSeconds, "accessTokenTtlSeconds", 300, 10, DAY),
    // Codes are short-lived (OAuth 2.1 §4.1.2 recommends at most 10 minutes; Gatehouse: 60 s).
    codeTtlSeconds: integer(options.codeTtlSeconds, "codeTtlSeconds", 60, 1, 60),
    refresh: {
      enabled: boolean(refresh.enabled, "refreshTokens.enabled", true),
      idleTtlSeconds,
      absoluteTtlSeconds,
      reuseGraceSeconds: integer(refresh.reuseGraceSeconds, "refreshTokens.reuseGraceSeconds", 0, 0, 300),
    },
    dynamicRegistration: {
      enabled: boolean(dyn.enabled, "dynamicRegistration.enabled", true),
      ratePerHour: integer(dyn.ratePerHour, "dynamicRegistration.ratePerHour", 20, 1, 1_000_000),
      unusedTtlSeconds: integer(
        dyn.unusedTtlSeconds,
        "dynamicRegistration.unusedTtlSeconds",
        DAY,
        60,
        365 * DAY,
      ),
    },
    clientMetadataDocuments: {
      ...cimd,
      enabled: boolean(cimd.enabled, "clientMetadataDocuments.enabled", true),
      trust,
      maxBytes: integer(cimd.maxBytes, "clientMetadataDocuments.maxBytes", 5120, 256, 1024 * 1024),
      timeoutMs: integer(cimd.timeoutMs, "clientMetadataDocuments.timeoutMs", 5000, 100, 60_000),
      minCacheSeconds,
      maxCacheSeconds,
    },
    scopeDescriptions: { ...scopeDescriptions },
    allowInsecureLoopback,
  };
}

/** Checks a client given in `options.clients` before it is written to storage. */
function checkConfiguredClient(client: ClientRecord, i: number): void {
  if (typeof client !== "object" || client === null) fail(`clients[${i}] must be an object`);
  if (typeof client.clientId !== "string" || client.clientId === "")
    fail(`clients[${i}].clientId is required`);
  if (/^https:\/\//i.test(client.clientId)) {
    fail(`clients[${i}].clientId must not be an https URL (those are Client ID Metadata Documents)`);
  }
  if (!Array.isArray(client.redirectUris)) fail(`clients[${i}].redirectUris must be an array`);
  for (const uri of client.redirectUris) {
    const problem = redirectUriProblem(uri);
    if (problem) fail(`clients[${i}].redirectUris: ${problem}`);
  }
  const method = client.tokenEndpointAuthMethod;
  if (!["none", "client_secret_basic", "client_secret_post", "private_key_jwt"].includes(method)) {
    fail(`clients[${i}].tokenEndpointAuthMethod is not supported`);
  }
  if ((method === "client_secret_basic" || method === "client_secret_post") && !client.clientSecretHash) {
    fail(`clients[${i}] uses ${method} but has no clientSecretHash (store the SHA-256, never the secret)`);
  }
  if (method === "private_key_jwt" && !client.jwks && !client.jwksUri) {
    fail(`clients[${i}] uses private_key_jwt but has neither jwks nor jwksUri`);
  }
}

/**
 * Builds the {@link ServerContext}: resolved options, scope tables, client resolver and key
 * manager. Migrates the store, writes configured clients and makes sure a signing key exists.
 */
export async function createServerContext(options: AuthorizationServerOptions): Promise<ServerContext> {
  const resolved = resolveOptions(options);
  const resources = checkResources(options.resources);
  if (!options.store || typeof options.store.migrate !== "function") {
    fail("store must be an AuthorizationStore (for example createMemoryStore() or a SQLite store)");
  }
  let hierarchy: ScopeHierarchy;
  try {
    hierarchy = new ScopeHierarchy(options.scopeHierarchy ?? {});
  } catch (cause) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "scopeHierarchy names an invalid scope token", {
      cause,
    });
  }
  if (options.now !== undefined && typeof options.now !== "function") fail("now must be a function");
  const clients = options.clients ?? [];
  if (!Array.isArray(clients)) fail("clients must be an array");
  clients.forEach(checkConfiguredClient);
  integer(options.maintenanceIntervalMs, "maintenanceIntervalMs", 0, 0, 7 * DAY * 1000);

  const scopes = new Set<string>();
  for (const r of resources.values()) for (const s of r.scopes) scopes.add(s);
  if (resolved.refresh.enabled) scopes.add(OFFLINE_ACCESS);

  const log: Logger = options.logger ?? jsonLogger();
  const now = options.now ?? Date.now;
  const insecure = new URL(resolved.issuer).protocol === "http:";
  if (insecure) {
    log.warn("insecure_issuer", {
      message:
        "INSECURE: the issuer is plain http on loopback (allowInsecureLoopback). Never use this outside local development.",
      issuer: resolved.issuer,
    });
  }
  const store = options.store;
  await store.migrate();
  for (const client of clients)
    await store.upsertClient({ ...client, source: client.source ?? "preregistered" });

  const keys = createKeyManager({
    store,
    issuer: resolved.issuer,
    now,
    accessTokenTtlSeconds: resolved.accessTokenTtlSeconds,
    log,
  });
  await keys.ensureSigningKey();

  return {
    options: resolved,
    store,
    log,
    now,
    hierarchy,
    resources,
    scopes,
    clients: createClientResolver({ store, options: resolved, log, now }),
    keys,
    secureCookies: !insecure,
  };
}
