/**
 * Configuration of `gatehouse serve`: a JSON file (`--config gatehouse.json`) validated with zod,
 * with command-line flags overriding it. Everything is checked here, before anything listens, so
 * a mistake fails at start-up with a message naming the field (DESIGN.md principle 5).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { resolveOptions } from "../authorization-server/config/resolve-options.js";
import { type LimitedOption, OPTION_LIMITS } from "../authorization-server/core/option-limits.js";
import type { AuthorizationServerOptions, ResourceOptions } from "../authorization-server/core/options.js";
import { GatehouseTypeError } from "../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";
import { isScopeToken } from "../shared/scopes.js";
import { integerValue, type ParsedArgs, stringList, stringValue, UsageError } from "./args.js";
import type { KeyEncryptionSettings } from "./key-encryption.js";
import { upstreamProviderSchema, upstreamSignInFromFile } from "./upstream-config.js";

const scopeToken = z.string().refine(isScopeToken, "not a valid scope token (RFC 6749 §3.3)");
/** An integer field with the authorization server's own limits (one place decides them). */
function limitedInteger(name: LimitedOption) {
  const { min, max } = OPTION_LIMITS[name];
  return z.number().int().min(min).max(max);
}

/**
 * The fields of a JWT issuer trusted for assertions at the token endpoint. Exactly one of `jwksUri`
 * and `jwks`, asymmetric algorithms and public keys only: the resolver decides, as for the library.
 * No loopback escape hatch here: a config file describes a deployment, never a test.
 */
const trustedIssuerFields = {
  issuer: z.string().min(1),
  jwksUri: z.string().min(1).optional(),
  jwks: z.object({ keys: z.array(z.record(z.string(), z.unknown())).min(1) }).optional(),
  algorithms: z.array(z.string().min(1)).min(1).optional(),
};

const resourceSchema = z.strictObject({
  uri: z.string().min(1),
  name: z.string().max(200).optional(),
  scopes: z.array(scopeToken).default([]),
});

/** The config file (every field optional; flags may supply the rest). */
export const configFileSchema = z.strictObject({
  issuer: z.string().optional(),
  port: z.number().int().min(0).max(65535).optional(),
  host: z.string().min(1).optional(),
  /** Directory holding the SQLite database (default `./.gatehouse`). */
  data: z.string().min(1).optional(),
  /** `postgres://` URL; selects PostgreSQL instead of SQLite. Prefer GATEHOUSE_DATABASE_URL. */
  databaseUrl: z.string().min(1).optional(),
  /**
   * File holding the key-encryption key(s), mode 0600 (src/cli/key-encryption.ts). The key itself
   * never goes in this file: config files get copied and committed.
   */
  keyEncryptionKeyFile: z.string().min(1).optional(),
  resources: z.array(resourceSchema).optional(),
  scopeDescriptions: z.record(scopeToken, z.string().max(500)).optional(),
  scopeHierarchy: z.record(scopeToken, z.array(scopeToken)).optional(),
  revision: z.enum(["2025-11-25", "2026-07-28"]).optional(),
  accessTokenTtlSeconds: limitedInteger("accessTokenTtlSeconds").optional(),
  codeTtlSeconds: limitedInteger("codeTtlSeconds").optional(),
  refreshTokens: z
    .strictObject({
      enabled: z.boolean().optional(),
      idleTtlSeconds: limitedInteger("refreshTokens.idleTtlSeconds").optional(),
      absoluteTtlSeconds: limitedInteger("refreshTokens.absoluteTtlSeconds").optional(),
      reuseGraceSeconds: limitedInteger("refreshTokens.reuseGraceSeconds").optional(),
    })
    .optional(),
  dynamicRegistration: z
    .strictObject({
      enabled: z.boolean().optional(),
      ratePerHour: limitedInteger("dynamicRegistration.ratePerHour").optional(),
      unusedTtlSeconds: limitedInteger("dynamicRegistration.unusedTtlSeconds").optional(),
      // RFC 7591 §3 initial access tokens, by hash; the server's resolver checks each entry.
      initialAccessTokens: z
        .array(z.strictObject({ sha256: z.string(), scopes: z.array(scopeToken).min(1) }))
        .max(100)
        .optional(),
    })
    .optional(),
  deviceAuthorization: z
    .strictObject({
      enabled: z.boolean().optional(),
      ttlSeconds: limitedInteger("deviceAuthorization.ttlSeconds").optional(),
      intervalSeconds: limitedInteger("deviceAuthorization.intervalSeconds").optional(),
    })
    .optional(),
  /** DPoP at the token endpoint (RFC 9449); the resolver judges the algorithms. */
  dpop: z
    .strictObject({
      enabled: z.boolean().optional(),
      signingAlgorithms: z.array(z.string().min(1)).min(1).optional(),
      iatWindowSeconds: limitedInteger("dpop.iatWindowSeconds").optional(),
      requireNonce: z.boolean().optional(),
      nonceLifetimeSeconds: limitedInteger("dpop.nonceLifetimeSeconds").optional(),
    })
    .optional(),
  /** Token exchange for downstream calls (RFC 8693): who may exchange tokens of which resource. */
  tokenExchange: z
    .strictObject({
      policies: z
        .array(
          z.strictObject({
            clientId: z.string().min(1),
            fromResource: z.string().min(1),
            toResources: z.array(z.string().min(1)).min(1),
            scopes: z.array(scopeToken).optional(),
          }),
        )
        .min(1),
    })
    .optional(),
  /** The jwt-bearer grant with identity assertion grants (ID-JAG) of enterprise identity providers. */
  enterpriseAuthorization: z
    .strictObject({
      identityProviders: z
        .array(z.strictObject({ ...trustedIssuerFields, clients: z.array(z.string().min(1)).optional() }))
        .min(1),
      maxAssertionLifetimeSeconds: limitedInteger(
        "enterpriseAuthorization.maxAssertionLifetimeSeconds",
      ).optional(),
    })
    .optional(),
  /** The jwt-bearer grant with workloads' own JWTs (RFC 7523): issuers and which client each subject is. */
  workloadIdentity: z
    .strictObject({
      issuers: z
        .array(
          z.strictObject({
            ...trustedIssuerFields,
            audience: z.string().min(1).optional(),
            subjects: z
              .array(
                z.strictObject({
                  subject: z.string().min(1),
                  clientId: z.string().min(1),
                  scopes: z.array(scopeToken).optional(),
                }),
              )
              .min(1),
            singleUse: z.boolean().optional(),
          }),
        )
        .min(1),
      maxAssertionLifetimeSeconds: limitedInteger("workloadIdentity.maxAssertionLifetimeSeconds").optional(),
    })
    .optional(),
  clientMetadataDocuments: z
    .strictObject({
      enabled: z.boolean().optional(),
      trust: z
        .discriminatedUnion("kind", [
          z.strictObject({ kind: z.literal("any-https") }),
          z.strictObject({ kind: z.literal("allow-list"), hosts: z.array(z.string().min(1)).min(1) }),
        ])
        .optional(),
      maxBytes: limitedInteger("clientMetadataDocuments.maxBytes").optional(),
      timeoutMs: limitedInteger("clientMetadataDocuments.timeoutMs").optional(),
      minCacheSeconds: limitedInteger("clientMetadataDocuments.minCacheSeconds").optional(),
      maxCacheSeconds: limitedInteger("clientMetadataDocuments.maxCacheSeconds").optional(),
    })
    .optional(),
  /** Sign-in through upstream identity providers (client secrets from files or the environment). */
  upstreamSignIn: z
    .strictObject({
      providers: z.array(upstreamProviderSchema).min(1),
      localPasswords: z.boolean().optional(),
      timeoutMs: limitedInteger("upstreamSignIn.timeoutMs").optional(),
    })
    .optional(),
  tls: z.strictObject({ cert: z.string().min(1), key: z.string().min(1) }).optional(),
  insecureLoopback: z.boolean().optional(),
  /** true = one trusted proxy hop; a number = that many (X-Forwarded-For is read from the right). */
  trustProxy: z.union([z.boolean(), z.number().int().min(0).max(16)]).optional(),
  /** One log line per request (method, path without query, status, duration). Default true. */
  requestLog: z.boolean().optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;

/** Where the authorization server keeps its state. */
export type StoreTarget = { kind: "sqlite"; path: string } | { kind: "postgres"; url: string };

/** Everything `serve` needs, validated. */
export interface ServeConfig {
  /** Undefined only with insecure loopback: then `http://localhost:<real port>`. */
  issuer: string | undefined;
  port: number;
  host: string;
  store: StoreTarget;
  /** Where the key-encryption keys come from (resolved at start: it may generate one). */
  keyEncryption: KeyEncryptionSettings;
  tls?: { cert: string; key: string };
  insecureLoopback: boolean;
  /** Trusted proxy hops in front of this server (0 = none): see docs/deployment.md "Behind a proxy". */
  trustProxy: number;
  requestLog: boolean;
  /** Options for `createAuthorizationServer`, minus issuer, store and logger (added at start). */
  server: Omit<AuthorizationServerOptions, "issuer" | "store" | "logger">;
}

/** The SQLite file name inside a data directory. */
export const SQLITE_FILE = "gatehouse.sqlite";

function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `  ${issue.path.length ? issue.path.join(".") : "(root)"}: ${issue.message}`)
    .join("\n");
}

/**
 * Reads a JSON config file and validates it with `schema`; errors name the file and each bad field.
 * The one reader of config files for every command (`serve`, `gateway`).
 */
export function readConfigFile<Schema extends z.ZodType>(path: string, schema: Schema): z.infer<Schema> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read config file ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
  const result = schema.safeParse(json);
  if (!result.success) throw new UsageError(`invalid config file ${path}:\n${formatIssues(result.error)}`);
  return result.data;
}

/** Reads and validates `gatehouse serve`'s config file. */
export function loadConfigFile(path: string): ConfigFile {
  return readConfigFile(path, configFileSchema);
}

/** A database URL selects PostgreSQL; anything else is taken as a SQLite file path. */
export function storeTarget(options: {
  data?: string;
  databaseUrl?: string;
  defaultData: string;
}): StoreTarget {
  if (options.databaseUrl) {
    if (!/^postgres(ql)?:\/\//i.test(options.databaseUrl)) {
      throw new UsageError("--database-url must be a postgres:// URL");
    }
    return { kind: "postgres", url: options.databaseUrl };
  }
  return { kind: "sqlite", path: join(resolve(options.data ?? options.defaultData), SQLITE_FILE) };
}

/** The data directory: `--data`, else the config file's `data`, else `defaultData` (absolute). */
export function dataDirFromArgs(parsed: ParsedArgs, file: ConfigFile, defaultData = ".gatehouse"): string {
  return resolve(stringValue(parsed, "data") ?? file.data ?? defaultData);
}

/** Store location for the admin commands (`users`, `clients`, `keys`): --config, --data, --database-url. */
export function storeTargetFromArgs(parsed: ParsedArgs, defaultData = ".gatehouse"): StoreTarget {
  const configPath = stringValue(parsed, "config");
  const file = configPath ? loadConfigFile(configPath) : {};
  return storeTarget({
    data: stringValue(parsed, "data") ?? file.data,
    databaseUrl:
      stringValue(parsed, "database-url") ??
      (process.env.GATEHOUSE_DATABASE_URL || undefined) ??
      file.databaseUrl,
    defaultData,
  });
}

/**
 * True when nothing chose the store (no --data, --database-url, --config or GATEHOUSE_DATABASE_URL):
 * the command uses ./.gatehouse in the current directory, and says so.
 */
export function storeIsDefault(parsed: ParsedArgs): boolean {
  return (
    stringValue(parsed, "data") === undefined &&
    stringValue(parsed, "database-url") === undefined &&
    stringValue(parsed, "config") === undefined &&
    !process.env.GATEHOUSE_DATABASE_URL
  );
}

/**
 * The flags that name the same store again, for a command a message suggests: `--config`,
 * `--data` (absolute) as given; a database URL given as a flag is not repeated (it may hold a
 * password), the message says to give the same one.
 */
export function storeFlags(parsed: ParsedArgs): string {
  const flags: string[] = [];
  const config = stringValue(parsed, "config");
  const data = stringValue(parsed, "data");
  if (config !== undefined) flags.push(`--config ${config}`);
  if (data !== undefined) flags.push(`--data ${resolve(data)}`);
  if (stringValue(parsed, "database-url") !== undefined) flags.push("--database-url <the same URL>");
  return flags.join(" ");
}

function splitScopes(values: string[]): string[] {
  const out = values.flatMap((v) => v.split(/[\s,]+/)).filter((s) => s !== "");
  for (const s of out)
    if (!isScopeToken(s)) throw new UsageError(`--scopes: "${s}" is not a valid scope token`);
  return out;
}

/**
 * Resources from flags: each `--resource` takes the `--scopes` that follow it (before the next
 * `--resource`); `--scopes` values are space- or comma-separated and may repeat.
 */
export function resourcesFromFlags(parsed: ParsedArgs): ResourceOptions[] {
  const out: { uri: string; scopes: string[] }[] = [];
  for (const { name, value } of parsed.ordered) {
    if (name === "resource" && value !== undefined) out.push({ uri: value, scopes: [] });
    else if (name === "scopes" && value !== undefined) {
      const last = out.at(-1);
      if (!last) throw new UsageError("--scopes must follow the --resource it applies to");
      last.scopes.push(...splitScopes([value]));
    }
  }
  return out;
}

function isLoopbackBindHost(host: string): boolean {
  return isLoopbackHost(host);
}

/**
 * Asks the authorization server's own resolver (the one place that decides every limit and rule
 * across fields) about the options, so what it would refuse at start-up is a usage error now,
 * before anything listens. Without an issuer yet (insecure loopback: the port decides it), a
 * loopback stand-in is judged.
 */
function checkServerOptions(server: ServeConfig["server"], issuer: string | undefined): void {
  try {
    resolveOptions({ ...server, issuer: issuer ?? "http://localhost" });
  } catch (error) {
    if (error instanceof GatehouseTypeError) throw new UsageError(error.message);
    throw error;
  }
}

/** Merges the config file and the flags of `gatehouse serve`, then checks the combination. */
export function buildServeConfig(parsed: ParsedArgs): ServeConfig {
  const configPath = stringValue(parsed, "config");
  const file: ConfigFile = configPath ? loadConfigFile(configPath) : {};

  const flagResources = resourcesFromFlags(parsed);
  const resources = (flagResources.length ? flagResources : (file.resources ?? [])).map((r) => {
    try {
      return { ...r, uri: canonicalResourceUri(r.uri) };
    } catch (error) {
      throw new UsageError(`resource ${JSON.stringify(r.uri)}: ${(error as Error).message}`);
    }
  });
  if (resources.length === 0) {
    throw new UsageError(
      'at least one protected resource is needed: --resource <uri> --scopes <scopes> or "resources" in the config file',
    );
  }

  const tlsCert = stringValue(parsed, "tls-cert") ?? file.tls?.cert;
  const tlsKey = stringValue(parsed, "tls-key") ?? file.tls?.key;
  if (Boolean(tlsCert) !== Boolean(tlsKey)) throw new UsageError("--tls-cert and --tls-key go together");
  const tls = tlsCert && tlsKey ? { cert: tlsCert, key: tlsKey } : undefined;

  const insecureLoopback = parsed.values["insecure-loopback"] === true || file.insecureLoopback === true;
  const hops = integerValue(parsed, "trust-proxy-hops", 16);
  const fileHops = file.trustProxy === true ? 1 : file.trustProxy === false ? 0 : (file.trustProxy ?? 0);
  const trustProxy = hops ?? (parsed.values["trust-proxy"] === true ? Math.max(1, fileHops) : fileHops);
  const host = stringValue(parsed, "host") ?? file.host ?? (insecureLoopback ? "127.0.0.1" : "0.0.0.0");
  const port = integerValue(parsed, "port", 65535) ?? file.port ?? (tls ? 8443 : 8080);
  const issuer = stringValue(parsed, "issuer") ?? file.issuer;

  if (issuer === undefined && !insecureLoopback) {
    throw new UsageError("--issuer is required (the public https URL of this authorization server)");
  }
  if (issuer !== undefined) {
    let url: URL;
    try {
      url = new URL(issuer);
    } catch {
      throw new UsageError(`--issuer ${JSON.stringify(issuer)} is not an absolute URL`);
    }
    if (url.search || url.hash || issuer.includes("?") || issuer.includes("#")) {
      throw new UsageError("--issuer must not have a query or fragment (RFC 8414 §2)");
    }
    if (url.protocol === "http:") {
      // Spec: authorization server endpoints MUST be served over HTTPS. Plain http is a
      // development mode, allowed only on loopback and only when asked for by name.
      if (!isLoopbackHost(url.hostname)) {
        throw new UsageError(
          "refusing a plain-http issuer on a non-loopback host: the spec requires HTTPS (use --tls-cert/--tls-key, or --trust-proxy behind a TLS-terminating proxy with an https issuer)",
        );
      }
      if (!insecureLoopback) {
        throw new UsageError(
          "the issuer is plain http: add --insecure-loopback for local development, or use https",
        );
      }
    } else if (url.protocol === "https:") {
      if (!tls && trustProxy === 0) {
        throw new UsageError(
          "the issuer is https but this server would speak plain http: give --tls-cert and --tls-key, or --trust-proxy when a TLS-terminating proxy forwards to it",
        );
      }
    } else {
      throw new UsageError("--issuer must be an https URL");
    }
  }
  if (insecureLoopback && !tls && !isLoopbackBindHost(host)) {
    throw new UsageError(
      `--insecure-loopback serves plain http: --host must be a loopback address, not ${host}`,
    );
  }

  const databaseUrl =
    stringValue(parsed, "database-url") ??
    (process.env.GATEHOUSE_DATABASE_URL || undefined) ??
    file.databaseUrl;
  const store = storeTarget({
    data: stringValue(parsed, "data") ?? file.data,
    databaseUrl,
    defaultData: ".gatehouse",
  });
  const keyFile = stringValue(parsed, "key-encryption-key-file") ?? file.keyEncryptionKeyFile;
  const keyEncryption: KeyEncryptionSettings = {
    ...(keyFile === undefined ? {} : { file: keyFile }),
    dataDir: dataDirFromArgs(parsed, file),
  };

  const accessTtl = integerValue(parsed, "access-token-ttl") ?? file.accessTokenTtlSeconds;
  const codeTtl = integerValue(parsed, "code-ttl", 60) ?? file.codeTtlSeconds;
  const refresh = { ...file.refreshTokens };
  const idle = integerValue(parsed, "refresh-idle-ttl");
  const absolute = integerValue(parsed, "refresh-absolute-ttl");
  if (idle !== undefined) refresh.idleTtlSeconds = idle;
  if (absolute !== undefined) refresh.absoluteTtlSeconds = absolute;
  if (parsed.values["no-refresh-tokens"] === true) refresh.enabled = false;
  const registration = { ...file.dynamicRegistration };
  if (parsed.values["no-dynamic-registration"] === true) registration.enabled = false;
  const device = { ...file.deviceAuthorization };
  if (parsed.values["no-device-authorization"] === true) device.enabled = false;
  const dpop = { ...file.dpop };
  if (parsed.values["no-dpop"] === true) {
    if (parsed.values["dpop-require-nonce"] === true)
      throw new UsageError("--dpop-require-nonce and --no-dpop contradict each other");
    dpop.enabled = false;
  }
  if (parsed.values["dpop-require-nonce"] === true) dpop.requireNonce = true;
  const cimd = { ...file.clientMetadataDocuments };
  if (parsed.values["no-client-metadata-documents"] === true) cimd.enabled = false;
  const trustHosts = stringList(parsed, "cimd-allow-host");
  if (trustHosts.length) cimd.trust = { kind: "allow-list", hosts: trustHosts };

  const server: ServeConfig["server"] = {
    resources,
    allowInsecureLoopback: insecureLoopback,
    refreshTokens: refresh,
    dynamicRegistration: registration,
    deviceAuthorization: device,
    clientMetadataDocuments: cimd,
  };
  if (file.scopeDescriptions) server.scopeDescriptions = file.scopeDescriptions;
  if (file.scopeHierarchy) server.scopeHierarchy = file.scopeHierarchy;
  if (file.revision) server.revision = file.revision;
  if (accessTtl !== undefined) server.accessTokenTtlSeconds = accessTtl;
  if (codeTtl !== undefined) server.codeTtlSeconds = codeTtl;
  if (Object.keys(dpop).length > 0) server.dpop = dpop;
  if (file.tokenExchange) server.tokenExchange = file.tokenExchange;
  if (file.enterpriseAuthorization) server.enterpriseAuthorization = file.enterpriseAuthorization;
  if (file.workloadIdentity) server.workloadIdentity = file.workloadIdentity;
  if (file.upstreamSignIn) {
    server.upstreamSignIn = upstreamSignInFromFile(file.upstreamSignIn, configPath!);
    if (parsed.values["no-local-passwords"] === true) server.upstreamSignIn.localPasswords = false;
  } else if (parsed.values["no-local-passwords"] === true) {
    throw new UsageError("--no-local-passwords needs upstreamSignIn providers in the config file");
  }
  checkServerOptions(server, issuer);

  return {
    issuer,
    port,
    host,
    store,
    keyEncryption,
    ...(tls ? { tls } : {}),
    insecureLoopback,
    trustProxy,
    requestLog: parsed.values["no-request-log"] === true ? false : (file.requestLog ?? true),
    server,
  };
}
