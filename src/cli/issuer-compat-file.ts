/**
 * The operator's per-issuer compatibility settings for the command line (`login`, `fetch`,
 * `status`, `check`): `issuers.json` in the config directory, read on every run. Nothing applies
 * unless the file names an issuer; see docs/client.md "Authorization servers that break a rule".
 *
 *   { "issuers": { "https://login.microsoftonline.com/organizations/v2.0": {
 *       "tenantIssuer": { "template": "https://login.microsoftonline.com/{tenantid}/v2.0",
 *                         "tenant": "<your tenant id>" },
 *       "assumeS256": true, "resource": "omit" } } }
 *
 * The settings are the library's (`issuerCompatibility`, client/protocol/issuer-compat.ts) and
 * are checked the same way; a file that does not parse or holds an unknown setting stops the
 * command with an error naming the file, so a typo never silently turns a rule back on or off.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  type IssuerCompatibility,
  type IssuerCompatibilitySettings,
  validateIssuerCompatibility,
} from "../client/protocol/issuer-compat.js";
import { UsageError } from "./args.js";

export const ISSUERS_FILE = "issuers.json";
/** The file is a few settings; anything larger is not one. */
const MAX_FILE_BYTES = 64 * 1024;

export function issuerCompatibilityPath(directory: string): string {
  return join(directory, ISSUERS_FILE);
}

/** The settings in `<directory>/issuers.json`, or undefined when there is no such file. */
export function loadIssuerCompatibility(directory: string): IssuerCompatibilitySettings | undefined {
  const path = issuerCompatibilityPath(directory);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  if (text.length > MAX_FILE_BYTES) throw new UsageError(`${path} is larger than ${MAX_FILE_BYTES} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(`${path} is not valid JSON`);
  }
  const issuers = (parsed as { issuers?: unknown } | null)?.issuers;
  if (typeof issuers !== "object" || issuers === null || Array.isArray(issuers)) {
    throw new UsageError(`${path} must be an object with "issuers": { "<issuer>": { <settings> } }`);
  }
  try {
    return validateIssuerCompatibility(issuers as IssuerCompatibilitySettings, true);
  } catch (error) {
    throw new UsageError(`${path}: ${(error as Error).message}`);
  }
}

/** One line per setting of one issuer, as `status` and `check` show them. */
export function describeSettings(settings: IssuerCompatibility): string[] {
  const lines: string[] = [];
  if (settings.assumeS256) lines.push("assume PKCE S256 when code_challenge_methods_supported is absent");
  if (settings.resource === "omit") lines.push("omit the resource parameter");
  else if (settings.resource)
    lines.push(`send resource=${settings.resource.rewrite} instead of the resource`);
  if (settings.issuerAlias) lines.push(`accept the metadata issuer ${settings.issuerAlias}`);
  if (settings.tenantIssuer) {
    lines.push(
      `accept the templated issuer ${settings.tenantIssuer.template} for tenant ${settings.tenantIssuer.tenant} (ID token iss and tid checked)`,
    );
  }
  return lines;
}
