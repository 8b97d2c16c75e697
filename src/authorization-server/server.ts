/**
 * The composition root: builds the {@link ServerContext} every endpoint receives from the caller's
 * options (resolved by ./resolve-options.ts), the store, the client resolver and the key manager.
 */
import { GatehouseTypeError } from "../shared/errors.js";
import { jsonLogger, type Logger } from "../shared/log.js";
import { ScopeHierarchy } from "../shared/scopes.js";
import { createKeyEncryptionKeyring, type KeyEncryptionKeyring } from "../shared/secret-envelope.js";
import { tracedStore } from "../shared/telemetry.js";
import type { ClientRecord } from "../storage/contract.js";
import { redirectUriProblem } from "./clients/redirect-uri.js";
import { createClientResolver } from "./clients/resolver.js";
import { checkResources, resolveOptions } from "./config/resolve-options.js";
import { AuditTrail, createAuditor } from "./core/audit.js";
import type { ServerContext } from "./core/context.js";
import { fail, limited } from "./core/option-limits.js";
import type { AuthorizationServerOptions } from "./core/options.js";
import { createCodeSealer } from "./grants/sealed-code.js";
import { createKeyManager } from "./keys/key-manager.js";
import { OFFLINE_ACCESS } from "./policy/scopes.js";
import { checkKeptTokens } from "./vault/upstream-tokens.js";

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
  limited(options.maintenanceIntervalMs, "maintenanceIntervalMs", 0);
  const keyring: KeyEncryptionKeyring | undefined =
    options.keyEncryptionKeys === undefined
      ? undefined
      : await createKeyEncryptionKeyring(options.keyEncryptionKeys, "keyEncryptionKeys");

  checkKeptTokens(resolved.upstreamSignIn, resources, keyring);

  const scopes = new Set<string>();
  for (const r of resources.values()) for (const s of r.scopes) scopes.add(s);
  if (resolved.refresh.enabled) scopes.add(OFFLINE_ACCESS);

  if (options.onAuditEvent !== undefined && typeof options.onAuditEvent !== "function") {
    fail("onAuditEvent must be a function");
  }
  const baseLog: Logger = options.logger ?? jsonLogger();
  const now = options.now ?? Date.now;
  const auditTrail = new AuditTrail();
  const audit = createAuditor(baseLog, auditTrail, now, options.onAuditEvent);
  const log = baseLog;
  const insecure = new URL(resolved.issuer).protocol === "http:";
  if (insecure) {
    log.warn("insecure_issuer", {
      message:
        "INSECURE: the issuer is plain http on loopback (allowInsecureLoopback). Never use this outside local development.",
      issuer: resolved.issuer,
    });
  }
  // Every store operation in a span (a no-op until the application installs an OpenTelemetry SDK).
  const store = tracedStore(options.store);
  await store.migrate();
  for (const client of clients)
    await store.upsertClient({ ...client, source: client.source ?? "preregistered" });

  const keys = createKeyManager({
    store,
    issuer: resolved.issuer,
    now,
    accessTokenTtlSeconds: resolved.accessTokenTtlSeconds,
    log,
    ...(keyring ? { keyring } : {}),
  });
  // A stored key the configured key-encryption keys cannot open stops start-up here, naming its kid.
  await keys.prepareSigningKeys();
  // Codes carry their own sealed record when there is a key to seal with and the store can redeem
  // a code it never stored (grants/sealed-code.ts); otherwise each code is stored at issue.
  const codeSealer =
    typeof store.redeemSealedAuthorizationCode === "function"
      ? createCodeSealer(resolved.issuer, options.keyEncryptionKeys)
      : undefined;

  return {
    options: resolved,
    store,
    log,
    audit,
    auditTrail,
    now,
    hierarchy,
    resources,
    scopes,
    clients: createClientResolver({ store, options: resolved, log, now, audit }),
    keys,
    secureCookies: !insecure,
    ...(keyring ? { keyring } : {}),
    ...(codeSealer ? { codeSealer } : {}),
  };
}
