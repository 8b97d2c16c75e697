/**
 * Token exchange, enterprise-managed authorization and workload identity (each off unless set):
 * their options checked at start-up, moved out of resolve-options.ts (which spreads
 * `resolveGrantExtensions` into the resolved options).
 */
import { fetchUrlProblem } from "../../shared/guarded-fetch-url.js";
import { canonicalResourceUri } from "../../shared/resource-uri.js";
import { isScopeToken } from "../../shared/scopes.js";
import type { ResolvedOptions } from "../core/context.js";
import { ASYMMETRIC_ALGORITHMS, boolean, fail, limited } from "../core/option-limits.js";
import type {
  AuthorizationServerOptions,
  EnterpriseAuthorizationOptions,
  IdentityProviderOptions,
  TokenExchangeOptions,
  TokenExchangePolicy,
  TrustedIssuerOptions,
  WorkloadIdentityOptions,
  WorkloadIssuerOptions,
} from "../core/options.js";

/** Algorithms accepted from a trusted assertion issuer unless it lists its own. */
export const DEFAULT_ASSERTION_ALGORITHMS = ["ES256", "ES384", "PS256", "RS256", "EdDSA"];

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
export function resolveGrantExtensions(
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
