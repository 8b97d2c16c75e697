/**
 * Scope selection and scope upgrade (spec "Scope selection (client)", "Client handling (scope
 * upgrade)"), and the reading of the resource server's challenge.
 */

import type { Revision } from "../../shared/revision.js";
import { findChallenge, parseWWWAuthenticate } from "../../shared/www-authenticate.js";

export type { Revision };

/**
 * How scopes are chosen on re-authorization:
 * - `"union"` (2026-07-28): the union of previously requested/granted scopes and the challenged
 *   ones (SHOULD), since the server need not repeat earlier scopes;
 * - `"challenged"` (2025-11-25): the challenged scopes, which that revision's servers are expected
 *   to state completely (its "minimal"/"recommended" strategies put still-needed scopes there).
 */
export type ScopeStrategy = "union" | "challenged";

export function defaultScopeStrategy(revision: Revision): ScopeStrategy {
  return revision === "2025-11-25" ? "challenged" : "union";
}

/** What a `Bearer` challenge (RFC 6750 §3) told us. Parameter names are case-insensitive. */
export interface BearerChallenge {
  scheme: string;
  error?: string;
  errorDescription?: string;
  scope?: string;
  resourceMetadata?: string;
  /** The response also (or only) offered the `DPoP` scheme (RFC 9449 §7.1). */
  dpopOffered?: boolean;
}

/**
 * The challenge of the scheme the request used (`Bearer` unless it sent a DPoP-bound token), else
 * the other one, from a response's `WWW-Authenticate`, if it is parsable. A resource that offers
 * both puts the error in the challenge of the scheme the request used (RFC 9449 §7.1).
 * Spec "Protected resource metadata discovery" 2: only a parsable header's `resource_metadata` is used.
 */
export function readChallenge(
  response: Response,
  usedScheme: "Bearer" | "DPoP" = "Bearer",
): BearerChallenge | undefined {
  const header = response.headers.get("www-authenticate");
  if (!header) return undefined;
  const challenges = parseWWWAuthenticate(header);
  const otherScheme = usedScheme === "Bearer" ? "DPoP" : "Bearer";
  const challenge = findChallenge(challenges, usedScheme) ?? findChallenge(challenges, otherScheme);
  if (!challenge) return undefined;
  const p = challenge.params;
  const dpopOffered = findChallenge(challenges, "DPoP") !== undefined;
  return {
    scheme: challenge.scheme,
    ...(dpopOffered && { dpopOffered }),
    ...(p.error !== undefined && { error: p.error }),
    ...(p.error_description !== undefined && { errorDescription: p.error_description }),
    ...(p.scope !== undefined && { scope: p.scope }),
    ...(p.resource_metadata !== undefined && { resourceMetadata: p.resource_metadata }),
  };
}

function split(scope: string | undefined): string[] {
  return scope ? scope.split(" ").filter((s) => s !== "") : [];
}

/**
 * Initial scope (spec "Scope selection" 2): the challenge's `scope`; else every scope in the PRM
 * `scopes_supported`; else nothing (the parameter is omitted).
 */
export function selectInitialScope(
  challengeScope: string | undefined,
  scopesSupported: readonly string[] | undefined,
): string[] {
  const fromChallenge = split(challengeScope);
  if (fromChallenge.length) return fromChallenge;
  return scopesSupported ? [...scopesSupported] : [];
}

/** Scopes to request on re-authorization after an insufficient-scope challenge. */
export function selectStepUpScope(
  strategy: ScopeStrategy,
  previous: readonly string[],
  challenged: readonly string[],
): string[] {
  if (strategy === "challenged" && challenged.length) return [...new Set(challenged)];
  return [...new Set([...previous, ...challenged])];
}

/** True when the challenge asks for a scope the previous set lacks. */
export function asksForMore(previous: readonly string[], challenged: readonly string[]): boolean {
  const have = new Set(previous);
  return challenged.some((s) => !have.has(s));
}

/**
 * Spec "Refresh tokens": the client MAY add `offline_access` when the authorization server lists
 * it in `scopes_supported` — and only then (the resource server should never ask for it).
 */
export function withOfflineAccess(
  scopes: readonly string[],
  asScopesSupported: readonly string[] | undefined,
  wanted: boolean,
): string[] {
  const out = scopes.filter((s) => s !== "offline_access" || asScopesSupported?.includes("offline_access"));
  if (wanted && asScopesSupported?.includes("offline_access") && !out.includes("offline_access")) {
    out.push("offline_access");
  }
  return out;
}

export { split as splitScope };
