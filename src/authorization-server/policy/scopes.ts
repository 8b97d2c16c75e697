/**
 * What scopes a request may get, decided here only ({@link grantableScopes}), for the
 * authorization endpoint (and the device authorization endpoint, which asks the same) and for every
 * grant without a user's approval alike (client_credentials, token exchange, ID-JAG, workload
 * identity): which clients a registered `scope` limits ({@link scopeCeiling}), counted through the
 * scope hierarchy, and the grant's own ceilings.
 */

import { OAuthError } from "../../shared/errors.js";
import { parseScope } from "../../shared/scopes.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";

/** Scope that asks for a refresh token (OpenID Connect Core §11; the spec's refresh-token section). */
export const OFFLINE_ACCESS = "offline_access";

/**
 * The scopes a client may request at most, or undefined when only the user's consent limits them.
 *
 * A pre-registered client keeps the ceiling its operator set. A client that registered itself
 * (RFC 7591 dynamic registration, or a Client ID Metadata Document) wrote its `scope` itself,
 * usually the scope of the first challenge it met: treating that as a ceiling would refuse the
 * step-up the spec asks clients to perform ("Client handling (scope upgrade)"), while it protects
 * nothing, since the same caller could register again with a wider `scope`. For those clients the
 * user's consent is the gate (RFC 7591 §2 leaves the use of `scope` to the server's policy), and in
 * a grant without a user the operator's allowance (policy/grants-without-user.ts) or the
 * assertion's issuer.
 */
export function scopeCeiling(client: ClientRecord): string | undefined {
  return client.source === "preregistered" ? client.scope : undefined;
}

/** What a request asks for and what, besides the client's ceiling, bounds it. */
export interface ScopeRequest {
  /** The served resource (its configured URI, policy/resources.ts); its scopes are the first bound. */
  resource: string;
  /** The parsed `scope` parameter; undefined or empty asks for the default. */
  requested: ReadonlySet<string> | undefined;
  /**
   * The operator's allowance for a self-registered client (an initial access token's scopes,
   * policy/grants-without-user.ts): a ceiling set for the client like a registered one, so it is
   * counted through the hierarchy the same way.
   */
  allowance?: ReadonlySet<string>;
  /**
   * The grant's own ceilings (an assertion's `scope`, a workload mapping, a token exchange policy,
   * the subject token's scopes), each taken as written.
   */
  ceilings?: readonly ReadonlySet<string>[];
  /**
   * Whether `offline_access` may be asked for (the authorization and device endpoints, when refresh
   * tokens are on and the scope is offered); it is never a resource's scope and no ceiling limits it.
   */
  offlineAccess?: boolean;
  /**
   * Whether a request that ends with no scope is refused (`invalid_scope`): the assertion and
   * exchange grants; /authorize and client_credentials issue a token without scopes, as before.
   */
  requireSome?: boolean;
}

/**
 * The scopes a request gets (OAuth 2.1 §3.2.2.1, RFC 6749 §3.3): each requested scope must be one
 * the resource offers (or `offline_access` where allowed) and within the client's
 * {@link scopeCeiling}, counted with every scope the ceiling implies through the hierarchy (a
 * pre-registered `notes:write` allows `notes:read` wherever it is asked), and within each of the
 * grant's own ceilings; otherwise `invalid_scope` (RFC 6749 §5.2, §4.1.2.1). With none requested,
 * the resource's scopes that every bound allows (the documented default).
 */
export function grantableScopes(ctx: ServerContext, client: ClientRecord, request: ScopeRequest): string[] {
  const ceiling = scopeCeiling(client);
  const bounds: ReadonlySet<string>[] = [...(request.ceilings ?? [])];
  if (ceiling !== undefined) {
    let registered: Set<string>;
    try {
      registered = parseScope(ceiling);
    } catch {
      throw new OAuthError("invalid_scope", { description: "the client's registered scope is not valid" });
    }
    bounds.push(ctx.hierarchy.expand(registered));
  }
  if (request.allowance) bounds.push(ctx.hierarchy.expand(request.allowance));
  const within = (s: string) => bounds.every((b) => b.has(s));
  const offered = new Set(ctx.resources.get(request.resource)!.scopes);
  const requested = request.requested;
  let scopes: string[];
  if (requested === undefined || requested.size === 0) {
    scopes = [...offered].filter((s) => s !== OFFLINE_ACCESS && within(s));
  } else {
    for (const s of requested) {
      if (s === OFFLINE_ACCESS && request.offlineAccess) continue;
      if (s === OFFLINE_ACCESS || !offered.has(s)) {
        throw new OAuthError("invalid_scope", {
          description: "a requested scope is not offered for this resource",
        });
      }
      if (!within(s)) {
        throw new OAuthError("invalid_scope", {
          description: "a requested scope is not allowed for this application",
        });
      }
    }
    scopes = [...requested];
  }
  if (request.requireSome && scopes.length === 0) {
    throw new OAuthError("invalid_scope", { description: "no scope may be granted" });
  }
  return scopes;
}
