/**
 * Per-issuer compatibility with authorization servers the field runs that break a rule the spec
 * gives the client (DESIGN.md "Interop tolerances are narrow and written down"). The spec's rules
 * stay the default: nothing here applies unless an operator names the issuer and the setting, and
 * each setting applies to that issuer alone (never a global switch). Every use is reported through
 * `onUse` (the client's `compatibility` event, which the CLI prints), and the stored server record
 * keeps the settings that were applied to its metadata, which `gatehouse status` shows.
 *
 * The settings, each with the server that needs it:
 * - `assumeS256` (Microsoft Entra ID, Amazon Cognito): the metadata omits
 *   `code_challenge_methods_supported` although the server supports S256. Spec "PKCE" 1 says to
 *   refuse; with the setting the client proceeds with S256, which it always sends. A list that is
 *   present without S256 is still refused.
 * - `resource: "omit"` or `{ rewrite }` (Entra ID v2 answers AADSTS9010010 to a `resource`
 *   parameter; Entra v1 wants its application ID URI): the RFC 8707 `resource` parameter is left
 *   out of, or replaced in, the authorization, token, refresh and device requests to that issuer.
 *   The tokens are still stored and used for the resource its metadata names.
 * - `issuerAlias` (Google: the issuer differs by a trailing slash between documents): the
 *   metadata's `issuer` may be exactly this string instead of the configured issuer (RFC 8414
 *   §3.3 otherwise refuses). From then on the alias is the issuer every check compares with (the
 *   `iss` response parameter, ID tokens, registrations), since that is what the server sends.
 * - `tenantIssuer` (Entra ID's multi-tenant endpoints, whose metadata says
 *   `https://login.microsoftonline.com/{tenantid}/v2.0`): the metadata's `issuer` may be exactly
 *   `template`; the client then takes the pinned tenant's issuer (`{tenantid}` replaced by
 *   `tenant`) as the issuer for every check, asks for `openid`, and accepts an authorization only
 *   with an ID token whose `iss` is that issuer (checked by oauth4webapi) and whose `tid` claim is
 *   the tenant. A user of another tenant signing in at the shared endpoint is refused.
 */
import type { TokenEndpointResponse } from "oauth4webapi";
import * as oauth from "oauth4webapi";
import { GatehouseTypeError } from "../../shared/errors.js";
import { AuthorizationFlowError } from "../errors.js";

/** The compatibility settings of one issuer. */
export interface IssuerCompatibility {
  /** Proceed with S256 when the metadata omits `code_challenge_methods_supported`. */
  assumeS256?: boolean;
  /** Leave out (`"omit"`) or replace (`{ rewrite }`, an absolute URI) the `resource` parameter. */
  resource?: "omit" | { rewrite: string };
  /** Accept metadata whose `issuer` is exactly this string (an https URL) instead. */
  issuerAlias?: string;
  /** Accept metadata whose `issuer` is exactly `template` (one `{tenantid}`), pinned to `tenant`. */
  tenantIssuer?: { template: string; tenant: string };
}

/** Settings by issuer, exactly as the resource's metadata names it (no normalisation). */
export type IssuerCompatibilitySettings = Readonly<Record<string, IssuerCompatibility>>;

/** The name of a setting as logged and shown. */
export type CompatibilitySettingName = "assume_s256" | "resource" | "issuer_alias" | "tenant_issuer";

/** One use of a setting: which issuer, which setting, what it let through (never a token). */
export interface CompatibilityUse {
  issuer: string;
  setting: CompatibilitySettingName;
  detail: string;
}

export type CompatibilityReporter = (use: CompatibilityUse) => void;

const TENANT_PLACEHOLDER = "{tenantid}";
/** A tenant is one path segment of the issuer (Entra: a GUID); nothing that could change the path. */
const TENANT_PATTERN = /^[A-Za-z0-9][A-Za-z0-9.-]{0,127}$/;

function invalid(issuer: string, message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", `issuer compatibility for ${issuer}: ${message}`);
}

function httpsUrl(value: unknown): boolean {
  if (typeof value !== "string") return false;
  try {
    const url = new URL(value);
    return url.protocol === "https:" && !url.username && !url.password && !url.hash;
  } catch {
    return false;
  }
}

/** The issuer of the pinned tenant: the template with `{tenantid}` replaced. */
export function tenantIssuerOf(setting: { template: string; tenant: string }): string {
  return setting.template.replace(TENANT_PLACEHOLDER, setting.tenant);
}

/**
 * Checks settings before any use: issuers and aliases are https URLs (loopback http for tests
 * and local servers), a template has exactly one `{tenantid}` and the tenant is one path segment,
 * a rewritten resource is an absolute URI without a fragment (RFC 8707 §2). Throws
 * `GatehouseTypeError` naming the issuer; returns the settings.
 */
export function validateIssuerCompatibility(
  settings: IssuerCompatibilitySettings,
  allowLoopbackHttp = false,
): IssuerCompatibilitySettings {
  const urlOk = (value: unknown) => {
    if (httpsUrl(value)) return true;
    if (!allowLoopbackHttp || typeof value !== "string") return false;
    try {
      const url = new URL(value);
      return url.protocol === "http:" && (url.hostname === "127.0.0.1" || url.hostname === "localhost");
    } catch {
      return false;
    }
  };
  const known = new Set(["assumeS256", "resource", "issuerAlias", "tenantIssuer"]);
  for (const [issuer, entry] of Object.entries(settings)) {
    if (!urlOk(issuer)) throw invalid(issuer, "the issuer must be an https URL (http only on loopback)");
    if (typeof entry !== "object" || entry === null) throw invalid(issuer, "settings must be an object");
    for (const key of Object.keys(entry)) {
      if (!known.has(key)) throw invalid(issuer, `unknown setting ${JSON.stringify(key)}`);
    }
    if (entry.assumeS256 !== undefined && typeof entry.assumeS256 !== "boolean") {
      throw invalid(issuer, "assumeS256 must be true or false");
    }
    if (entry.resource !== undefined && entry.resource !== "omit") {
      const rewrite = (entry.resource as { rewrite?: unknown }).rewrite;
      let ok = typeof rewrite === "string" && !rewrite.includes("#");
      if (ok) {
        try {
          new URL(rewrite as string);
        } catch {
          ok = false;
        }
      }
      if (!ok)
        throw invalid(issuer, 'resource must be "omit" or { rewrite: <absolute URI without fragment> }');
    }
    if (entry.issuerAlias !== undefined && (!urlOk(entry.issuerAlias) || entry.issuerAlias === issuer)) {
      throw invalid(issuer, "issuerAlias must be another https URL");
    }
    if (entry.tenantIssuer !== undefined) {
      const { template, tenant } = entry.tenantIssuer;
      if (typeof template !== "string" || template.split(TENANT_PLACEHOLDER).length !== 2) {
        throw invalid(issuer, `tenantIssuer.template must contain ${TENANT_PLACEHOLDER} exactly once`);
      }
      if (typeof tenant !== "string" || !TENANT_PATTERN.test(tenant)) {
        throw invalid(issuer, "tenantIssuer.tenant must be one path segment (Entra: the tenant's GUID)");
      }
      if (!urlOk(template.replace(TENANT_PLACEHOLDER, "t")) || !urlOk(tenantIssuerOf({ template, tenant }))) {
        throw invalid(issuer, "tenantIssuer.template must be an https URL");
      }
    }
  }
  return settings;
}

/**
 * The settings that apply to `issuer`: those configured for it, or for the issuer whose alias or
 * pinned tenant's issuer it is (the issuer a stored record carries after discovery). Exact string
 * comparison throughout.
 */
export function compatibilityFor(
  settings: IssuerCompatibilitySettings | undefined,
  issuer: string,
): { configured: string; settings: IssuerCompatibility } | undefined {
  if (!settings) return undefined;
  if (Object.hasOwn(settings, issuer)) return { configured: issuer, settings: settings[issuer]! };
  for (const [configured, entry] of Object.entries(settings)) {
    if (entry.issuerAlias === issuer) return { configured, settings: entry };
    if (entry.tenantIssuer && tenantIssuerOf(entry.tenantIssuer) === issuer) {
      return { configured, settings: entry };
    }
  }
  return undefined;
}

/**
 * Which issuer a document's `issuer` stands for, under `settings` (RFC 8414 §3.3 is an exact
 * match; the alias and the template are the only other strings accepted, each reported), or
 * undefined when it is refused.
 */
export function acceptedIssuer(
  expected: string,
  documentIssuer: string,
  settings: IssuerCompatibility | undefined,
  onUse: CompatibilityReporter | undefined,
): string | undefined {
  if (documentIssuer === expected) return expected;
  if (settings?.issuerAlias !== undefined && documentIssuer === settings.issuerAlias) {
    onUse?.({
      issuer: expected,
      setting: "issuer_alias",
      detail: `accepted metadata whose issuer is the configured alias ${documentIssuer}`,
    });
    return documentIssuer;
  }
  if (settings?.tenantIssuer !== undefined && documentIssuer === settings.tenantIssuer.template) {
    const tenant = tenantIssuerOf(settings.tenantIssuer);
    onUse?.({
      issuer: expected,
      setting: "tenant_issuer",
      detail: `accepted the templated issuer ${documentIssuer} as the pinned tenant's issuer ${tenant}`,
    });
    return tenant;
  }
  return undefined;
}

/**
 * The `resource` parameter to send to `issuer` for `resource` (RFC 8707 §2): the value itself,
 * unless the issuer's settings omit (undefined) or rewrite it; each such use is reported.
 */
export function resourceParameter(
  settings: IssuerCompatibilitySettings | undefined,
  issuer: string,
  resource: string,
  request: string,
  onUse: CompatibilityReporter | undefined,
): string | undefined {
  const found = compatibilityFor(settings, issuer);
  const setting = found?.settings.resource;
  if (setting === undefined) return resource;
  if (setting === "omit") {
    onUse?.({
      issuer,
      setting: "resource",
      detail: `${request}: resource parameter omitted (for ${resource})`,
    });
    return undefined;
  }
  onUse?.({
    issuer,
    setting: "resource",
    detail: `${request}: resource parameter ${setting.rewrite} sent for ${resource}`,
  });
  return setting.rewrite;
}

/** With a pinned tenant, `openid` joins the scope: the ID token is what proves the tenant. */
export function scopeForTenant(
  settings: IssuerCompatibilitySettings | undefined,
  issuer: string,
  scopes: string[],
): string[] {
  const found = compatibilityFor(settings, issuer);
  if (!found?.settings.tenantIssuer || scopes.includes("openid")) return scopes;
  return ["openid", ...scopes];
}

/**
 * After an authorization at a templated issuer: the token response must carry an ID token
 * (validated by oauth4webapi against the pinned tenant's issuer) whose `tid` is the tenant; a
 * user of another tenant, or a response without an ID token, is refused.
 */
export function assertTenant(
  settings: IssuerCompatibilitySettings | undefined,
  issuer: string,
  response: TokenEndpointResponse,
  onUse: CompatibilityReporter | undefined,
): void {
  const found = compatibilityFor(settings, issuer);
  const pinned = found?.settings.tenantIssuer;
  if (!pinned) return;
  const step = `ID token tenant check (templated issuer, ${issuer})`;
  const claims = oauth.getValidatedIdTokenClaims(response);
  if (!claims) {
    throw new AuthorizationFlowError(
      "issuer_mismatch",
      "the token response has no ID token, so the tenant of a templated issuer cannot be checked; refused",
      { kind: "refused", step },
    );
  }
  if (claims.tid !== pinned.tenant || claims.iss !== tenantIssuerOf(pinned)) {
    throw new AuthorizationFlowError(
      "issuer_mismatch",
      "the ID token is from another tenant than the one pinned for this issuer; refused",
      { kind: "refused", step },
    );
  }
  onUse?.({ issuer, setting: "tenant_issuer", detail: `ID token of tenant ${pinned.tenant} accepted` });
}
