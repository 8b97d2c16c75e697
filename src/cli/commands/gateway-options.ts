/**
 * `gatehouse gateway`'s settings read from the parsed command line and the `--config` file: the
 * config file merged under the flags, secrets read from files, and the options `createGateway`
 * takes for introspection, the shared store, upstream tokens and the identity assertion, each
 * checked with an error naming its flag. Split out of gateway.ts (the command), its only user.
 */
import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { identityAssertionSigner } from "../../gateway/identity-assertion.js";
import type { GatewayIntrospectionOptions } from "../../gateway/index.js";
import { upstreamTokenClient } from "../../resource-server/upstream-token.js";
import { type ParsedArgs, stringList, stringValue, UsageError } from "../args.js";
import { readConfigFile, type StoreTarget, storeTarget } from "../config.js";

/** The config file: the flags' values under camelCase keys (docs/gateway.md "Config file"). */
const configSchema = z.strictObject({
  upstream: z.string().min(1).optional(),
  stdio: z.string().min(1).optional(),
  resource: z.string().min(1).optional(),
  authorizationServer: z.string().min(1).optional(),
  policy: z.string().min(1).optional(),
  jwksUri: z.string().min(1).optional(),
  /** The secret itself never goes in this file: config files get copied and committed. */
  introspection: z
    .strictObject({
      endpoint: z.string().min(1).optional(),
      clientId: z.string().min(1),
      clientSecretFile: z.string().min(1).optional(),
    })
    .optional(),
  data: z.string().min(1).optional(),
  databaseUrl: z.string().min(1).optional(),
  host: z.string().min(1).optional(),
  port: z.number().int().min(0).max(65535).optional(),
  trustProxy: z.number().int().min(0).max(10).optional(),
  filterListings: z.boolean().optional(),
  maxBodyBytes: z
    .number()
    .int()
    .min(1024)
    .max(256 * 1024 * 1024)
    .optional(),
  allowedHosts: z.array(z.string().min(1)).optional(),
  sessionKeyFile: z.string().min(1).optional(),
  userHeader: z.string().min(1).optional(),
  clientHeader: z.string().min(1).optional(),
  scopesHeader: z.string().min(1).optional(),
});

/** The flag a config key stands for: `authorizationServer` is `--authorization-server`. */
function flagName(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/**
 * Reads `--config` and fills in every flag the command line did not give, so the rest of the
 * command reads one set of values and a flag always wins over the file.
 */
export function mergeConfigFile(parsed: ParsedArgs): void {
  const path = stringValue(parsed, "config");
  if (path === undefined) return;
  const { introspection, ...flat } = readConfigFile(path, configSchema);
  const values: Record<string, string | boolean | string[]> = {};
  for (const [key, value] of Object.entries(flat)) {
    if (value !== undefined) values[flagName(key)] = typeof value === "number" ? String(value) : value;
  }
  if (introspection !== undefined) {
    values["introspection-client-id"] = introspection.clientId;
    if (introspection.endpoint !== undefined) values["introspection-endpoint"] = introspection.endpoint;
    if (introspection.clientSecretFile !== undefined)
      values["introspection-client-secret-file"] = introspection.clientSecretFile;
  }
  for (const [name, value] of Object.entries(values)) {
    if (parsed.values[name] === undefined) parsed.values[name] = value;
  }
}

/** Reads a secret from a file named by a flag; the error names the flag, never the content. */
function secretFromFile(file: string, name: string): string {
  let secret: string;
  try {
    secret = readFileSync(file, "utf8").trim();
  } catch (error) {
    throw new UsageError(`cannot read --${name}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  if (secret === "") throw new UsageError(`--${name} is empty`);
  return secret;
}

/**
 * Introspection (RFC 7662) instead of JWTs: the gateway's confidential client, its secret from a
 * file or GATEHOUSE_INTROSPECTION_CLIENT_SECRET (a command line is visible to every local user).
 */
export function introspectionOption(parsed: ParsedArgs): GatewayIntrospectionOptions | undefined {
  const clientId = stringValue(parsed, "introspection-client-id");
  const secretFile = stringValue(parsed, "introspection-client-secret-file");
  const endpoint = stringValue(parsed, "introspection-endpoint");
  if (clientId === undefined) {
    if (secretFile !== undefined || endpoint !== undefined)
      throw new UsageError("--introspection-endpoint and its secret file go with --introspection-client-id");
    return undefined;
  }
  if (stringValue(parsed, "jwks-uri") !== undefined)
    throw new UsageError("give --jwks-uri or --introspection-client-id, not both");
  const fromEnv = process.env.GATEHOUSE_INTROSPECTION_CLIENT_SECRET || undefined;
  const clientSecret =
    secretFile !== undefined ? secretFromFile(secretFile, "introspection-client-secret-file") : fromEnv;
  if (clientSecret === undefined) {
    throw new UsageError(
      "--introspection-client-id needs its secret: --introspection-client-secret-file or GATEHOUSE_INTROSPECTION_CLIENT_SECRET",
    );
  }
  if (endpoint !== undefined) absoluteUrl(endpoint, "introspection-endpoint");
  return { clientId, clientSecret, ...(endpoint !== undefined && { endpoint }) };
}

/** The authorization server's store, shared for step-up: `--data`, `--database-url`, the environment. */
export function stepUpStoreTarget(parsed: ParsedArgs): StoreTarget | undefined {
  const data = stringValue(parsed, "data");
  const databaseUrl =
    stringValue(parsed, "database-url") ?? (process.env.GATEHOUSE_DATABASE_URL || undefined);
  if (data === undefined && databaseUrl === undefined) return undefined;
  if (data !== undefined && stringValue(parsed, "database-url") !== undefined)
    throw new UsageError("give --data or --database-url, not both");
  const target = storeTarget({
    data,
    databaseUrl: data === undefined ? databaseUrl : undefined,
    defaultData: ".gatehouse",
  });
  // A directory without the server's database is a mistake: a new empty store would mark nothing.
  if (target.kind === "sqlite" && !existsSync(target.path)) {
    throw new UsageError(
      `--data: no authorization server database at ${target.path} (start gatehouse serve there first)`,
    );
  }
  return target;
}

export function required(value: string | undefined, name: string): string {
  if (value === undefined) throw new UsageError(`--${name} is required`);
  return value;
}

export function absoluteUrl(value: string, name: string): URL {
  try {
    return new URL(value);
  } catch {
    throw new UsageError(`--${name} must be an absolute URL`);
  }
}

/**
 * `--stdio-upstream-token-env NAME=provider`: the user's upstream token in the child's
 * environment, asked of the authorization server's /upstream/token with the gateway's own client
 * credentials (a pre-registered confidential client the provider's keepTokens lists for
 * --resource). The secret comes from a file: a command line is visible to every local user.
 */
export function upstreamTokensOption(parsed: ParsedArgs, issuer: string) {
  const pairs = stringList(parsed, "stdio-upstream-token-env");
  const clientId = stringValue(parsed, "upstream-token-client-id");
  const secretFile = stringValue(parsed, "upstream-token-client-secret-file");
  if (pairs.length === 0) {
    if (clientId !== undefined || secretFile !== undefined)
      throw new UsageError(
        "--upstream-token-client-id and its secret file go with --stdio-upstream-token-env",
      );
    return undefined;
  }
  if (clientId === undefined || secretFile === undefined) {
    throw new UsageError(
      "--stdio-upstream-token-env needs --upstream-token-client-id and --upstream-token-client-secret-file",
    );
  }
  const variables: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    const name = pair.slice(0, eq);
    const provider = pair.slice(eq + 1);
    if (eq <= 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || provider === "") {
      throw new UsageError("--stdio-upstream-token-env takes NAME=provider (NAME a variable name)");
    }
    variables[name] = provider;
  }
  const clientSecret = secretFromFile(secretFile, "upstream-token-client-secret-file");
  try {
    // Checked now (the issuer must be https or loopback) so a mistake is a usage error.
    upstreamTokenClient({ issuer, clientAuth: { clientId, clientSecret } });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return { variables, clientId, clientSecret };
}

/**
 * `--identity-assertion-header` with `--identity-assertion-key-file`: the signed identity
 * assertion to the HTTP upstream (src/gateway/identity-assertion.ts), `iss` the resource and `aud`
 * the upstream URL.
 */
export function identityAssertionOption(parsed: ParsedArgs, resource: string, upstream: string | undefined) {
  const header = stringValue(parsed, "identity-assertion-header");
  const keyFile = stringValue(parsed, "identity-assertion-key-file");
  if (header === undefined && keyFile === undefined) return undefined;
  if (header === undefined || keyFile === undefined) {
    throw new UsageError("--identity-assertion-header and --identity-assertion-key-file go together");
  }
  if (upstream === undefined) throw new UsageError("--identity-assertion-header is for --upstream");
  let pem: string;
  try {
    pem = readFileSync(keyFile, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read --identity-assertion-key-file: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  try {
    // Checked here for a usage error that never echoes the key; the gateway signs with it.
    identityAssertionSigner({ privateKey: pem, issuer: resource, audience: upstream });
    return { header, privateKey: pem };
  } catch (error) {
    // The key's text is never echoed: only why it is refused.
    throw new UsageError(
      `--identity-assertion-key-file: ${error instanceof TypeError && /P-256|private key/.test(error.message) ? error.message : "not a PEM private key"}`,
    );
  }
}
