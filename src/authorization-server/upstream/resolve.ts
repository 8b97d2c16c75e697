/**
 * The one place that checks the upstream sign-in options and applies the presets (DESIGN.md
 * principle 5: a bad configuration fails at start-up, with a message naming the option).
 */
import { X509Certificate } from "node:crypto";
import { fetchUrlProblem } from "../../shared/guarded-fetch-url.js";
import { isScopeToken } from "../../shared/scopes.js";
import { ASYMMETRIC_ALGORITHMS, fail, limited } from "../core/option-limits.js";
import type {
  ResolvedUpstreamProvider,
  ResolvedUpstreamSignIn,
  UpstreamAdmissionOptions,
  UpstreamKeepTokensOptions,
  UpstreamNetwork,
  UpstreamProviderOptions,
  UpstreamSignInOptions,
} from "../core/upstream-options.js";
import { DEFAULT_OIDC_SCOPES, ENTRA_MULTI_TENANT, UPSTREAM_PRESETS } from "./presets.js";

/**
 * `keepTokens`: at least one resource server, each a client id and a resource URI (that the
 * server serves the resource and the client is pre-registered and confidential is checked by
 * createServerContext, which knows both).
 */
function resolveKeepTokens(value: unknown, name: string): UpstreamKeepTokensOptions {
  const list = (value as UpstreamKeepTokensOptions | null)?.resourceServers;
  if (typeof value !== "object" || value === null || !Array.isArray(list) || list.length === 0) {
    fail(`${name}.resourceServers must list at least one { clientId, resource }`);
  }
  return {
    resourceServers: list.map((entry, i) => {
      const { clientId, resource } = (entry ?? {}) as { clientId?: unknown; resource?: unknown };
      if (
        typeof clientId !== "string" ||
        clientId === "" ||
        typeof resource !== "string" ||
        resource === ""
      ) {
        fail(`${name}.resourceServers[${i}] must have a clientId and a resource`);
      }
      return { clientId, resource };
    }),
  };
}

/** ID token algorithms accepted unless configured (asymmetric; RFC 8725 §3.1). */
export const DEFAULT_ID_TOKEN_ALGORITHMS = ["RS256", "ES256", "PS256"];

const PROVIDER_ID = /^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A DNS name (for e-mail and hosted domains): labels of letters, digits and hyphens. */
const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;
const TENANT = /^[A-Za-z0-9.-]{1,128}$/;

function string(value: unknown, name: string): string {
  if (typeof value !== "string" || value === "") fail(`${name} must be a non-empty string`);
  return value;
}

function optionalString(value: unknown, name: string): string | undefined {
  return value === undefined ? undefined : string(value, name);
}

function endpoint(value: unknown, name: string): string {
  const url = string(value, name);
  const problem = fetchUrlProblem(url);
  if (problem) fail(`${name}: ${problem}`);
  return url;
}

function stringList(value: unknown, name: string, check: (s: string) => boolean, what: string): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === "string" && check(v))) {
    fail(`${name} must be a non-empty array of ${what}`);
  }
  return [...value];
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/g;

/**
 * A provider's `ca`: one or more PEM certificates, each parsed now so a wrong file fails at
 * start-up rather than at the first sign-in. The message never quotes the value (an operator who
 * pasted a private key by mistake must not find it in a log).
 */
function resolveCa(value: unknown, name: string): string[] {
  if (typeof value !== "string" || value.trim() === "")
    fail(`${name} must be a PEM string of CA certificates`);
  const certificates: string[] = [];
  for (const block of value.matchAll(PEM_BLOCK)) {
    if (block[1] !== "CERTIFICATE")
      fail(`${name} must hold only certificates (found a PEM ${block[1]?.toLowerCase()})`);
    try {
      new X509Certificate(block[0]);
    } catch {
      fail(`${name}: certificate ${certificates.length + 1} does not parse`);
    }
    certificates.push(block[0]);
  }
  if (certificates.length === 0) fail(`${name} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return certificates;
}

/**
 * A provider's network settings. `allowPrivateNetwork` comes only from the operator's
 * configuration (never from a request or a provider's document), and applies to this provider alone.
 */
function resolveNetwork(
  p: UpstreamProviderOptions,
  name: string,
  testLoopback: { ca: string[] } | undefined,
): UpstreamNetwork {
  const allowPrivateNetwork = p.allowPrivateNetwork ?? false;
  if (typeof allowPrivateNetwork !== "boolean") fail(`${name}.allowPrivateNetwork must be a boolean`);
  const ca = p.ca === undefined ? [] : resolveCa(p.ca, `${name}.ca`);
  return {
    allowPrivateNetwork,
    allowLoopback: testLoopback === undefined ? false : {},
    ca: [...ca, ...(testLoopback?.ca ?? [])],
  };
}

function resolveAdmission(value: unknown, name: string): UpstreamAdmissionOptions {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${name} must be an object`);
  const a = value as UpstreamAdmissionOptions;
  const lower = (list: string[]) => list.map((s) => s.toLowerCase());
  const out: UpstreamAdmissionOptions = {};
  if (a.emailDomains !== undefined) {
    out.emailDomains = lower(
      stringList(a.emailDomains, `${name}.emailDomains`, (d) => DOMAIN.test(d.toLowerCase()), "domain names"),
    );
  }
  if (a.githubOrganizations !== undefined) {
    out.githubOrganizations = lower(
      stringList(
        a.githubOrganizations,
        `${name}.githubOrganizations`,
        (o) => /^[A-Za-z0-9-]{1,39}$/.test(o),
        "organisation logins",
      ),
    );
  }
  if (a.googleHostedDomains !== undefined) {
    out.googleHostedDomains = lower(
      stringList(
        a.googleHostedDomains,
        `${name}.googleHostedDomains`,
        (d) => DOMAIN.test(d.toLowerCase()),
        "domain names",
      ),
    );
  }
  if (a.entraTenants !== undefined) {
    out.entraTenants = lower(
      stringList(
        a.entraTenants,
        `${name}.entraTenants`,
        (t) => GUID.test(t.toLowerCase()),
        "tenant ids (GUIDs)",
      ),
    );
  }
  if (a.admit !== undefined) {
    if (typeof a.admit !== "function") fail(`${name}.admit must be a function`);
    out.admit = a.admit;
  }
  return out;
}

function resolveProvider(
  value: unknown,
  i: number,
  testLoopback: { ca: string[] } | undefined,
): ResolvedUpstreamProvider {
  const name = `upstreamSignIn.providers[${i}]`;
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail(`${name} must be an object`);
  const p = value as UpstreamProviderOptions;
  const id = string(p.id, `${name}.id`);
  if (!PROVIDER_ID.test(id)) {
    fail(`${name}.id must be 1-32 lowercase letters, digits or "-" (it names the callback path)`);
  }
  if (p.preset !== undefined && !Object.hasOwn(UPSTREAM_PRESETS, p.preset)) {
    fail(`${name}.preset must be one of ${Object.keys(UPSTREAM_PRESETS).join(", ")}`);
  }
  const preset = p.preset === undefined ? undefined : UPSTREAM_PRESETS[p.preset];
  const kind = p.kind ?? preset?.kind;
  if (kind !== "oidc" && kind !== "oauth2")
    fail(`${name}.kind must be "oidc" or "oauth2" (or give a preset)`);
  if (preset && p.kind !== undefined && p.kind !== preset.kind) {
    fail(`${name}.kind must be "${preset.kind}" for the ${p.preset} preset`);
  }
  const clientId = string(p.clientId, `${name}.clientId`);
  const clientSecret = optionalString(p.clientSecret, `${name}.clientSecret`);
  const method =
    p.tokenEndpointAuthMethod ??
    (clientSecret === undefined ? "none" : (preset?.tokenEndpointAuthMethod ?? "client_secret_basic"));
  if (!["client_secret_basic", "client_secret_post", "none"].includes(method)) {
    fail(`${name}.tokenEndpointAuthMethod must be client_secret_basic, client_secret_post or none`);
  }
  if ((method === "none") !== (clientSecret === undefined)) {
    fail(`${name}: clientSecret is needed with ${method}, and only then`);
  }
  const admission = resolveAdmission(p.admission, `${name}.admission`);
  if (admission.githubOrganizations && kind !== "oauth2") {
    fail(`${name}.admission.githubOrganizations needs a GitHub-style (oauth2) provider`);
  }
  let scopes =
    p.scopes === undefined
      ? [...(preset?.scopes ?? DEFAULT_OIDC_SCOPES)]
      : stringList(p.scopes, `${name}.scopes`, isScopeToken, "scope tokens");
  if (
    admission.githubOrganizations &&
    preset?.organizationsScope &&
    !scopes.includes(preset.organizationsScope)
  ) {
    scopes = [...scopes, preset.organizationsScope];
  }
  const createAccounts = p.createAccounts ?? false;
  if (typeof createAccounts !== "boolean") fail(`${name}.createAccounts must be a boolean`);
  const base = {
    id,
    displayName: optionalString(p.displayName, `${name}.displayName`) ?? preset?.displayName ?? id,
    clientId,
    ...(clientSecret === undefined ? {} : { clientSecret }),
    tokenEndpointAuthMethod: method,
    scopes,
    createAccounts,
    admission,
    ...(p.preset === undefined ? {} : { preset: p.preset }),
    ...(p.keepTokens === undefined
      ? {}
      : { keepTokens: resolveKeepTokens(p.keepTokens, `${name}.keepTokens`) }),
    network: resolveNetwork(p, name, testLoopback),
  };
  if (kind === "oauth2") {
    const emails = p.emailsEndpoint ?? preset?.emailsEndpoint;
    const organizations = p.organizationsEndpoint ?? preset?.organizationsEndpoint;
    if (admission.githubOrganizations && organizations === undefined) {
      fail(`${name}.admission.githubOrganizations needs organizationsEndpoint`);
    }
    return {
      ...base,
      kind,
      authorizationEndpoint: endpoint(
        p.authorizationEndpoint ?? preset?.authorizationEndpoint,
        `${name}.authorizationEndpoint`,
      ),
      tokenEndpoint: endpoint(p.tokenEndpoint ?? preset?.tokenEndpoint, `${name}.tokenEndpoint`),
      userInfoEndpoint: endpoint(p.userInfoEndpoint ?? preset?.userInfoEndpoint, `${name}.userInfoEndpoint`),
      ...(emails === undefined ? {} : { emailsEndpoint: endpoint(emails, `${name}.emailsEndpoint`) }),
      ...(organizations === undefined || !admission.githubOrganizations
        ? {}
        : { organizationsEndpoint: endpoint(organizations, `${name}.organizationsEndpoint`) }),
    };
  }
  if (!scopes.includes("openid")) fail(`${name}.scopes must include openid for an OpenID Connect provider`);
  let issuer: string;
  let multiTenantIssuer = false;
  if (preset?.tenantRequired) {
    // The tenant names the global cloud's issuer; a national cloud (or a test) names its issuer,
    // `https://<authority host>/<tenant>/v2.0`, instead.
    if ((p.tenant === undefined) === (p.issuer === undefined)) {
      fail(`${name} needs exactly one of tenant and issuer for the ${p.preset} preset`);
    }
    if (p.tenant !== undefined) {
      const tenant = string(p.tenant, `${name}.tenant`);
      if (!TENANT.test(tenant))
        fail(`${name}.tenant must be a tenant id, a domain, or common/organizations/consumers`);
      issuer = preset.issuer!.replace("{tenant}", tenant);
    } else {
      issuer = endpoint(p.issuer, `${name}.issuer`);
    }
    const tenant = new URL(issuer).pathname.split("/")[1] ?? "";
    multiTenantIssuer = ENTRA_MULTI_TENANT.has(tenant.toLowerCase());
    // Anyone with a Microsoft work account can sign in to `common`/`organizations`: creating
    // accounts for all of them is almost never meant (the multi-tenant pitfall), so say which rule.
    if (
      multiTenantIssuer &&
      createAccounts &&
      !admission.entraTenants &&
      !admission.emailDomains &&
      !admission.admit
    ) {
      fail(
        `${name}: tenant "${tenant}" admits every Microsoft organisation; with createAccounts set admission.entraTenants (or another admission rule)`,
      );
    }
  } else {
    if (p.tenant !== undefined) fail(`${name}.tenant applies to the microsoft preset only`);
    if (preset?.issuerRequired && p.issuer === undefined)
      fail(`${name}.issuer is required for the ${p.preset} preset`);
    issuer = endpoint(p.issuer ?? preset?.issuer, `${name}.issuer`);
  }
  // Asymmetric only (RFC 8725 §3.1): an HMAC would be keyed with the client secret, `none` signs nothing.
  const algorithms = p.algorithms ?? DEFAULT_ID_TOKEN_ALGORITHMS;
  if (
    !Array.isArray(algorithms) ||
    algorithms.length === 0 ||
    !algorithms.every((a) => typeof a === "string" && ASYMMETRIC_ALGORITHMS.has(a))
  ) {
    fail(`${name}.algorithms must list asymmetric JWS algorithms (never HS* or none)`);
  }
  for (const key of [
    "authorizationEndpoint",
    "tokenEndpoint",
    "userInfoEndpoint",
    "emailsEndpoint",
    "organizationsEndpoint",
  ] as const) {
    if (p[key] !== undefined)
      fail(`${name}.${key} is taken from the issuer's discovery document for an OpenID Connect provider`);
  }
  return { ...base, kind, issuer, multiTenantIssuer, algorithms: [...algorithms] };
}

/** Checks `upstreamSignIn`; undefined when not configured. */
export function resolveUpstreamSignIn(
  value: UpstreamSignInOptions | undefined,
): ResolvedUpstreamSignIn | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    fail("upstreamSignIn must be an object");
  if (!Array.isArray(value.providers) || value.providers.length === 0) {
    fail("upstreamSignIn.providers must list at least one provider");
  }
  let testLoopback: { ca: string[] } | undefined;
  const loopback = value.dangerouslyAllowLoopbackForTesting;
  if (loopback !== undefined) {
    const ca = (loopback as { ca?: unknown }).ca;
    if (ca !== undefined && (!Array.isArray(ca) || !ca.every((c) => typeof c === "string"))) {
      fail("upstreamSignIn.dangerouslyAllowLoopbackForTesting.ca must be an array of PEM strings");
    }
    testLoopback = { ca: [...((ca as string[] | undefined) ?? [])] };
  }
  const providers = value.providers.map((p, i) => resolveProvider(p, i, testLoopback));
  const ids = new Set<string>();
  for (const { id } of providers) {
    if (ids.has(id)) fail(`upstreamSignIn.providers lists the id "${id}" twice`);
    ids.add(id);
  }
  const localPasswords = value.localPasswords ?? true;
  if (typeof localPasswords !== "boolean") fail("upstreamSignIn.localPasswords must be a boolean");
  const timeoutMs = limited(value.timeoutMs, "upstreamSignIn.timeoutMs", 10_000);
  return { providers, localPasswords, timeoutMs };
}
