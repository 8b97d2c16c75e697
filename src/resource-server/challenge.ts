/**
 * The one place where RFC 6750 §3.1 status and challenge rules live: every failed authentication
 * becomes a Response here, with the `DPoP` challenge beside or instead of `Bearer` (RFC 9449 §7.1,
 * §9) when the resource accepts DPoP.
 */
import { OAuthError } from "../shared/errors.js";
import { NO_STORE } from "../shared/http.js";
import type { Logger } from "../shared/log.js";
import { formatScope, type ScopeHierarchy } from "../shared/scopes.js";
import { buildChallenge } from "../shared/www-authenticate.js";
import { HostNotAllowedError, InsufficientScopeError, MissingTokenError } from "./errors.js";
import type { Revision } from "./types.js";

export interface ChallengeContext {
  /** The URL of this resource's metadata document (`resource_metadata`, RFC 9728 §5.1). */
  resourceMetadataUrl: string;
  revision: Revision;
  /** Used for 401 challenges when the operation's scopes are not known. */
  scopesSupported?: readonly string[];
  /** Known scopes: which granted scopes count as "relevant" under 2025-11-25. */
  scopeHierarchy?: ScopeHierarchy;
  /** Add `Access-Control-Allow-Origin: *` (default true); WWW-Authenticate is always exposed. */
  cors?: boolean;
  logger?: Logger;
  /**
   * Set when the resource accepts DPoP (RFC 9449 §7.1): `algs` is the space-separated list of
   * accepted proof algorithms; `required` means no `Bearer` challenge at all.
   */
  dpop?: { required: boolean; algs: string };
}

/** Spec, Refresh tokens: a resource server SHOULD NOT put offline_access in a challenge. */
function challengeScopes(scopes: Iterable<string>): string | undefined {
  const list = [...scopes].filter((s) => s !== "offline_access");
  return list.length ? formatScope(list) : undefined;
}

/**
 * The `scope` of a 403 challenge.
 * - 2026-07-28: every scope the operation needs, in one challenge; granted scopes need not be
 *   repeated, but needed ones are all listed so one re-authorization suffices.
 * - 2025-11-25 ("recommended" strategy): the needed scopes plus the granted scopes that are
 *   relevant to this resource, so a client that requests exactly the challenged set does not lose
 *   what it had.
 */
export function insufficientScopeChallengeScopes(
  error: InsufficientScopeError,
  context: Pick<ChallengeContext, "revision" | "scopesSupported" | "scopeHierarchy">,
): string[] {
  const needed = [...error.requiredScopes];
  if (context.revision === "2026-07-28") return needed;
  const relevant = new Set([...(context.scopesSupported ?? []), ...needed]);
  if (context.scopeHierarchy) {
    for (const s of context.scopeHierarchy.expand(relevant)) relevant.add(s);
  }
  const repeated = error.grantedScopes.filter((s) => relevant.has(s) || context.scopeHierarchy?.knows(s));
  return [...new Set([...needed, ...repeated])];
}

/**
 * A challenge as plain data, for adapters that write the answer themselves (node:http) instead of
 * sending a web `Response`. {@link challengeResponse} is the same data wrapped in a `Response`.
 */
export interface ChallengeParts {
  status: number;
  /** Header fields by lowercase name. */
  headers: Record<string, string>;
  /** JSON text (`content-type` is then in `headers`), or `null` for no body. */
  body: string | null;
}

function challengeHeaders(challenge: string, context: ChallengeContext): Record<string, string> {
  return {
    ...NO_STORE,
    "www-authenticate": challenge,
    // Browser clients must be able to read the challenge to discover the metadata.
    "access-control-expose-headers": context.dpop ? "WWW-Authenticate, DPoP-Nonce" : "WWW-Authenticate",
    ...(context.cors !== false ? { "access-control-allow-origin": "*" } : {}),
  };
}

/** The RFC 9449 error codes, which belong to the `DPoP` challenge whatever scheme was used. */
function isDPoPError(error: unknown): boolean {
  return (
    error instanceof OAuthError && (error.code === "invalid_dpop_proof" || error.code === "use_dpop_nonce")
  );
}

/**
 * The `WWW-Authenticate` value: one challenge carrying `params` (the error, scope and
 * `resource_metadata`), in the scheme the request used, plus, where the resource accepts both, a
 * bare challenge of the other scheme (RFC 9449 §7.2: `Bearer, DPoP algs="..."`). A `DPoP`
 * challenge always names the accepted algorithms (`algs`, RFC 9449 §7.1). Without DPoP this is the
 * `Bearer` challenge alone, as before.
 */
function authenticate(
  params: Record<string, string | undefined>,
  context: ChallengeContext,
  dpopScheme: boolean,
): string {
  const dpop = context.dpop;
  if (dpop === undefined) return buildChallenge("Bearer", params);
  const dpopChallenge = (p: Record<string, string | undefined>) =>
    buildChallenge("DPoP", { ...p, algs: dpop.algs });
  if (dpop.required) return dpopChallenge(params);
  const other = { resource_metadata: context.resourceMetadataUrl };
  if (dpopScheme) return `${dpopChallenge(params)}, ${buildChallenge("Bearer", other)}`;
  return `${buildChallenge("Bearer", params)}, ${dpopChallenge(other)}`;
}

const HOST_NOT_ALLOWED_BODY = {
  error: "forbidden",
  error_description: "This request's Host or Origin is not accepted by this resource",
};

function json(body: object, headers: Record<string, string>, status: number): ChallengeParts {
  headers["content-type"] = "application/json";
  return { status, headers, body: JSON.stringify(body) };
}

/**
 * Turns an error from `authenticate` / `verifyAccessToken` into the response RFC 6750 §3.1 and the
 * spec prescribe. Nothing of the resource is ever in it, and it is never cached (`no-store`).
 *
 * | error | status | challenge |
 * |---|---|---|
 * | {@link MissingTokenError} | 401 | `Bearer resource_metadata, scope` — no `error` (RFC 6750 §3.1) |
 * | `invalid_token` | 401 | `error="invalid_token"`, resource_metadata, scope |
 * | `invalid_request` | 400 | `error="invalid_request"`, resource_metadata |
 * | {@link InsufficientScopeError} | 403 | `error="insufficient_scope"`, scope (all needed), resource_metadata |
 * | {@link HostNotAllowedError} | 403 | none: a generic `forbidden` body, nothing about the resource |
 * | `temporarily_unavailable` | 503 | none (the token was not judged) |
 * | `invalid_dpop_proof`, `use_dpop_nonce` | 401 | in the `DPoP` challenge (RFC 9449 §7.1, §9); `DPoP-Nonce` for the latter |
 * | anything else | 500 | none; the error goes to the logger |
 *
 * When the resource accepts DPoP (`context.dpop`), every challenge names `algs`, the error goes in
 * the challenge of the scheme the request used (`dpopScheme`), the other scheme's challenge follows
 * bare, and a resource that requires DPoP sends no `Bearer` challenge.
 */
export function challengeResponse(
  error: unknown,
  context: ChallengeContext,
  requiredScopes: readonly string[] = [],
  dpopScheme = false,
): Response {
  return challengePartsResponse(challengeParts(error, context, requiredScopes, dpopScheme));
}

/** {@link ChallengeParts} as a web `Response`. */
export function challengePartsResponse(parts: ChallengeParts): Response {
  return new Response(parts.body, { status: parts.status, headers: parts.headers });
}

/**
 * The one place where the RFC 6750 §3.1 rules of {@link challengeResponse} are decided: status,
 * `WWW-Authenticate` value, CORS and caching headers, and JSON body, as plain data. `dpopScheme`:
 * the request used the `DPoP` scheme, so the error goes in the `DPoP` challenge (RFC 9449 §7.1).
 */
export function challengeParts(
  error: unknown,
  context: ChallengeContext,
  requiredScopes: readonly string[] = [],
  dpopScheme = false,
): ChallengeParts {
  const inDPoP = dpopScheme || isDPoPError(error);
  const rm = context.resourceMetadataUrl;
  const needed =
    error instanceof MissingTokenError && error.requiredScopes.length ? error.requiredScopes : requiredScopes;
  // Spec, Scope selection rule 3: SHOULD state the scopes needed; fall back to scopes_supported.
  const defaultScope = challengeScopes(needed.length ? needed : (context.scopesSupported ?? []));
  if (error instanceof MissingTokenError) {
    // RFC 6750 §3.1: a request without credentials gets no error code.
    const scope = defaultScope;
    const headers = challengeHeaders(authenticate({ resource_metadata: rm, scope }, context, false), context);
    return { status: 401, headers, body: null };
  }
  if (error instanceof HostNotAllowedError) {
    // DNS-rebinding defence: no challenge, no resource_metadata, nothing a rebinding page could use.
    context.logger?.info("resource.host_not_allowed", {
      header: error.header,
      value: error.value === null ? null : error.value.slice(0, 200),
    });
    const headers: Record<string, string> = { ...NO_STORE };
    if (context.cors !== false) headers["access-control-allow-origin"] = "*";
    return json(HOST_NOT_ALLOWED_BODY, headers, 403);
  }
  if (error instanceof InsufficientScopeError) {
    const scope = challengeScopes(insufficientScopeChallengeScopes(error, context));
    const challenge = authenticate(
      { error: "insufficient_scope", scope, resource_metadata: rm, error_description: error.description },
      context,
      inDPoP,
    );
    context.logger?.info("resource.insufficient_scope", { missing: formatScope(error.missingScopes) });
    return json(error.toJSON(), challengeHeaders(challenge, context), 403);
  }
  if (error instanceof OAuthError) {
    if (error.code === "invalid_token" || error.code === "invalid_request" || isDPoPError(error)) {
      // RFC 9449 §7.1, §9: a refused proof, or a nonce demanded, is a 401 like a refused token.
      const status = error.code === "invalid_request" ? 400 : 401;
      const challenge = authenticate(
        {
          error: error.code,
          error_description: error.description,
          resource_metadata: rm,
          scope: status === 401 ? defaultScope : undefined,
        },
        context,
        inDPoP,
      );
      context.logger?.info(`resource.${error.code}`, { detail: error.detail });
      const headers = challengeHeaders(challenge, context);
      // RFC 9449 §9: the nonce to use goes in `DPoP-Nonce`.
      const nonce = error.code === "use_dpop_nonce" ? error.headers?.["dpop-nonce"] : undefined;
      if (nonce !== undefined) headers["dpop-nonce"] = nonce;
      return json(error.toJSON(), headers, status);
    }
    context.logger?.warn("resource.verification_failed", { code: error.code, detail: error.detail });
    const headers: Record<string, string> = { ...NO_STORE };
    if (error.code === "temporarily_unavailable") headers["retry-after"] = "5";
    return json(error.toJSON(), headers, error.status);
  }
  context.logger?.error("resource.internal_error", {
    error: error instanceof Error ? error.name : typeof error,
  });
  return json({ error: "server_error" }, { ...NO_STORE }, 500);
}
