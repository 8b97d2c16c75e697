/**
 * Servers reached over standard input/output do not run the HTTP authorization flow: spec
 * "Applicability" 3 says such implementations SHOULD NOT follow it and SHOULD take credentials
 * from the environment. This helper builds that environment for a child process (and reads it on
 * the server side), so the two ends agree on the variable names.
 */
import { GatehouseTypeError } from "../shared/errors.js";

export interface StdioCredentials {
  /** A token or API key the server accepts. */
  token?: string;
  /** Any other named credential (e.g. `API_KEY`), passed through as `<prefix><NAME>`. */
  extra?: Record<string, string>;
}

const NAME = /^[A-Z][A-Z0-9_]*$/;

/**
 * Environment variables for spawning a stdio server: the parent's environment (unless
 * `inherit: false`) plus `<prefix>TOKEN` and `<prefix><NAME>` for each extra credential.
 * Default prefix `MCP_`. Nothing is ever put on the command line, where other users could read it.
 */
export function stdioServerEnvironment(
  credentials: StdioCredentials,
  options: { prefix?: string; inherit?: boolean; base?: NodeJS.ProcessEnv } = {},
): Record<string, string> {
  const prefix = options.prefix ?? "MCP_";
  if (!/^[A-Z][A-Z0-9_]*$|^$/.test(prefix)) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "prefix must be upper-case letters, digits and _");
  }
  const env: Record<string, string> = {};
  if (options.inherit !== false) {
    for (const [k, v] of Object.entries(options.base ?? process.env)) if (v !== undefined) env[k] = v;
  }
  if (credentials.token !== undefined) env[`${prefix}TOKEN`] = credentials.token;
  for (const [name, value] of Object.entries(credentials.extra ?? {})) {
    if (!NAME.test(name)) {
      throw new GatehouseTypeError(
        "ERR_INVALID_OPTION",
        `credential name ${name} is not an environment variable name`,
      );
    }
    env[`${prefix}${name}`] = value;
  }
  return env;
}

/** The server side: reads `<prefix>TOKEN` (or throws a clear error naming the variable). */
export function credentialsFromEnvironment(
  options: { prefix?: string; env?: NodeJS.ProcessEnv; required?: boolean } = {},
): StdioCredentials {
  const prefix = options.prefix ?? "MCP_";
  const env = options.env ?? process.env;
  const token = env[`${prefix}TOKEN`];
  if (options.required && !token) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", `environment variable ${prefix}TOKEN is not set`);
  }
  const extra: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith(prefix) && k !== `${prefix}TOKEN` && v !== undefined) extra[k.slice(prefix.length)] = v;
  }
  return { ...(token !== undefined && { token }), extra };
}
