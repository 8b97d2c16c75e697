/**
 * The `upstreamSignIn` section of `gatehouse serve`'s config file: its schema, and the provider
 * options it becomes. A client secret never sits in the config file (config files get copied and
 * committed): it is read from a file (`clientSecretFile`, relative to the config file) or an
 * environment variable (`clientSecretEnv`) at start-up. A provider's private CA is read the same way
 * from `caFile` (PEM, relative to the config file); its certificates are checked by the resolver.
 */
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import type {
  UpstreamProviderOptions,
  UpstreamSignInOptions,
} from "../authorization-server/core/upstream-options.js";
import { UPSTREAM_PRESETS } from "../authorization-server/upstream/presets.js";
import { UsageError } from "./args.js";

const presetNames = Object.keys(UPSTREAM_PRESETS) as [
  keyof typeof UPSTREAM_PRESETS,
  ...(keyof typeof UPSTREAM_PRESETS)[],
];
const list = z.array(z.string().min(1)).min(1);

/** One provider; the values themselves are checked by the server's resolver (upstream/resolve.ts). */
export const upstreamProviderSchema = z.strictObject({
  id: z.string().min(1),
  preset: z.enum(presetNames).optional(),
  kind: z.enum(["oidc", "oauth2"]).optional(),
  displayName: z.string().min(1).max(100).optional(),
  clientId: z.string().min(1),
  clientSecretFile: z.string().min(1).optional(),
  clientSecretEnv: z
    .string()
    .regex(/^[A-Z_][A-Z0-9_]*$/, "an environment variable name")
    .optional(),
  tokenEndpointAuthMethod: z.enum(["client_secret_basic", "client_secret_post", "none"]).optional(),
  issuer: z.string().min(1).optional(),
  tenant: z.string().min(1).optional(),
  authorizationEndpoint: z.string().min(1).optional(),
  tokenEndpoint: z.string().min(1).optional(),
  userInfoEndpoint: z.string().min(1).optional(),
  emailsEndpoint: z.string().min(1).optional(),
  organizationsEndpoint: z.string().min(1).optional(),
  scopes: list.optional(),
  algorithms: list.optional(),
  createAccounts: z.boolean().optional(),
  /** RFC 1918 / fc00::/7 destinations for this provider only (core/upstream-options.ts). */
  allowPrivateNetwork: z.boolean().optional(),
  /** A PEM file of the CA certificate(s) this provider's TLS chains to. */
  caFile: z.string().min(1).optional(),
  /** Keep the provider's tokens for these resource servers (vault/upstream-tokens.ts); needs key-encryption keys. */
  keepTokens: z
    .strictObject({
      resourceServers: z
        .array(z.strictObject({ clientId: z.string().min(1), resource: z.string().min(1) }))
        .min(1),
    })
    .optional(),
  admission: z
    .strictObject({
      emailDomains: list.optional(),
      githubOrganizations: list.optional(),
      googleHostedDomains: list.optional(),
      entraTenants: list.optional(),
    })
    .optional(),
});

type FileProvider = z.infer<typeof upstreamProviderSchema>;

function clientSecret(provider: FileProvider, configPath: string): string | undefined {
  const { clientSecretFile: file, clientSecretEnv: env } = provider;
  if (file !== undefined && env !== undefined) {
    throw new UsageError(
      `upstreamSignIn provider "${provider.id}": give clientSecretFile or clientSecretEnv, not both`,
    );
  }
  if (env !== undefined) {
    const value = process.env[env];
    if (!value)
      throw new UsageError(
        `upstreamSignIn provider "${provider.id}": the environment variable ${env} is empty`,
      );
    return value.trim();
  }
  if (file === undefined) return undefined;
  const path = resolve(dirname(configPath), file);
  try {
    const value = readFileSync(path, "utf8").trim();
    if (value === "") throw new UsageError(`upstreamSignIn provider "${provider.id}": ${path} is empty`);
    return value;
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`upstreamSignIn provider "${provider.id}": cannot read clientSecretFile ${path}`);
  }
}

/** The PEM text of a provider's `caFile`, read at start-up (the resolver checks the certificates). */
function caText(provider: FileProvider, configPath: string): string | undefined {
  if (provider.caFile === undefined) return undefined;
  const path = resolve(dirname(configPath), provider.caFile);
  try {
    return readFileSync(path, "utf8");
  } catch {
    throw new UsageError(`upstreamSignIn provider "${provider.id}": cannot read caFile ${path}`);
  }
}

/** The config file's section as `AuthorizationServerOptions.upstreamSignIn` (secrets and CAs read now). */
export function upstreamSignInFromFile(
  section: {
    providers: FileProvider[];
    localPasswords?: boolean | undefined;
    timeoutMs?: number | undefined;
  },
  configPath: string,
): UpstreamSignInOptions {
  const providers = section.providers.map((p): UpstreamProviderOptions => {
    const { clientSecretFile: _file, clientSecretEnv: _env, caFile: _ca, ...rest } = p;
    const secret = clientSecret(p, configPath);
    const ca = caText(p, configPath);
    return {
      ...(rest as UpstreamProviderOptions),
      ...(secret === undefined ? {} : { clientSecret: secret }),
      ...(ca === undefined ? {} : { ca }),
    };
  });
  return {
    providers,
    ...(section.localPasswords === undefined ? {} : { localPasswords: section.localPasswords }),
    ...(section.timeoutMs === undefined ? {} : { timeoutMs: section.timeoutMs }),
  };
}
