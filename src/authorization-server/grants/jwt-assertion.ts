/**
 * Verifying a JWT assertion from a configured trusted issuer (RFC 7523 §3), for both uses of the
 * JWT bearer grant (./id-jag.ts, ./workload-identity.ts): the issuer's keys (fetched through the
 * guarded fetch), the algorithm allow-list, audience and type; lifetime and single use of `jti` as
 * policy/assertions.ts decides for every assertion; and the `scope` claim (the ceilings are policy/scopes.ts's).
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  errors,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import { OAuthError } from "../../shared/errors.js";
import { GuardedFetchError, guardedFetch } from "../../shared/guarded-fetch.js";
import { parseScope } from "../../shared/scopes.js";
import type { ServerContext } from "../core/context.js";
import type { TrustedIssuerOptions } from "../core/options.js";
import {
  acceptableIdentifier,
  CLOCK_TOLERANCE_SECONDS,
  lifetimeProblem,
  useJtiOnce,
} from "../policy/assertions.js";

/** The JOSE `typ` of an identity assertion JWT authorization grant (draft-ietf-oauth-identity-assertion-authz-grant). */
export const ID_JAG_TYP = "oauth-id-jag+jwt";

/** Bounds on what a trusted issuer's JWKS endpoint may send and take. */
const JWKS_MAX_BYTES = 64 * 1024;
const JWKS_TIMEOUT_MS = 5000;

/** A trusted issuer with its algorithm allow-list resolved. */
type TrustedIssuer = TrustedIssuerOptions & { algorithms: string[] };

/** RFC 7523 §3.1: an assertion that fails any check is `invalid_grant`. */
export function invalidAssertion(description: string, detail?: string): OAuthError {
  return new OAuthError("invalid_grant", { description, ...(detail ? { detail } : {}) });
}

/**
 * Fetches a trusted issuer's JWKS through the guarded fetch: https only, no redirects, size and
 * time bounded (the issuer is configured, but its endpoint is still a remote party).
 */
function jwksFetch(allowLoopback: { ca?: string[] } | undefined) {
  return async (url: string, init: { signal?: AbortSignal }): Promise<Response> => {
    const response = await guardedFetch(url, {
      maxBytes: JWKS_MAX_BYTES,
      timeoutMs: JWKS_TIMEOUT_MS,
      accept: "application/jwk-set+json, application/json",
      allowLoopback: allowLoopback ?? false,
      ...(init.signal ? { signal: init.signal } : {}),
    });
    return new Response(response.body, { status: response.status, headers: response.headers });
  };
}

/** Key sets per server and issuer: a remote set caches its keys and refetches on an unknown `kid`. */
const keySets = new WeakMap<ServerContext, Map<string, JWTVerifyGetKey>>();

function keySet(ctx: ServerContext, issuer: TrustedIssuer, allowLoopback: { ca?: string[] } | undefined) {
  let sets = keySets.get(ctx);
  if (!sets) {
    sets = new Map();
    keySets.set(ctx, sets);
  }
  let set = sets.get(issuer.issuer);
  if (!set) {
    set = issuer.jwks
      ? createLocalJWKSet(issuer.jwks as { keys: JWK[] })
      : createRemoteJWKSet(new URL(issuer.jwksUri!), {
          timeoutDuration: JWKS_TIMEOUT_MS,
          cooldownDuration: 30_000,
          cacheMaxAge: 10 * 60_000,
          [customFetch]: jwksFetch(allowLoopback),
        });
    sets.set(issuer.issuer, set);
  }
  return set;
}

export interface AssertionRules<I extends TrustedIssuer> {
  /** The issuers trusted for this use, looked up by exact `iss`. */
  issuers: readonly I[];
  /** The `aud` the assertion must carry, per issuer. */
  audience(issuer: I): string;
  /** The JOSE `typ` it must carry, when the use has one. */
  typ?: string;
  maxLifetimeSeconds: number;
  /** Claims that must be present besides `iss`, `sub`, `aud`, `exp` and `iat`. */
  requiredClaims: string[];
  allowLoopback: { ca?: string[] } | undefined;
}

/**
 * RFC 7523 §3 checks of an assertion: `iss` a trusted issuer (exact string), signature with that
 * issuer's keys under its algorithm allow-list (RFC 8725 §3.1: the algorithm is never taken from
 * the token alone; HS* and `none` are refused at configuration), `aud`, `typ`, `exp` not past,
 * `nbf` not future, `iat` not future and `exp - iat` within the lifetime bound. Every failure is
 * `invalid_grant`; the reason goes to the private detail only.
 */
export async function verifyAssertion<I extends TrustedIssuer>(
  ctx: ServerContext,
  assertion: string,
  rules: AssertionRules<I>,
): Promise<{ payload: JWTPayload & { iss: string; sub: string; exp: number; iat: number }; issuer: I }> {
  let claimedIssuer: unknown;
  try {
    claimedIssuer = decodeJwt(assertion).iss;
  } catch {
    throw invalidAssertion("assertion is not a JWT");
  }
  const issuer = rules.issuers.find((i) => i.issuer === claimedIssuer);
  if (!issuer) throw invalidAssertion("assertion issuer is not trusted");
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(assertion, keySet(ctx, issuer, rules.allowLoopback), {
      issuer: issuer.issuer,
      audience: rules.audience(issuer),
      algorithms: issuer.algorithms,
      ...(rules.typ ? { typ: rules.typ } : {}),
      currentDate: new Date(ctx.now()),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ["iss", "sub", "aud", "exp", "iat", ...rules.requiredClaims],
    }));
  } catch (error) {
    // The issuer's keys could not be had (its JWKS endpoint down, slow, oversized or not JSON): not
    // the client's fault, so not `invalid_grant`; the client may try again later.
    if (
      error instanceof GuardedFetchError ||
      error instanceof errors.JWKSTimeout ||
      error instanceof errors.JWKSInvalid
    ) {
      throw new OAuthError("temporarily_unavailable", {
        description: "the assertion issuer's keys could not be fetched",
        detail: `${error.name}: ${error.message}`,
        status: 503,
      });
    }
    throw invalidAssertion(
      "assertion is invalid",
      error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    );
  }
  const { sub, exp, iat } = payload;
  if (!acceptableIdentifier(sub)) throw invalidAssertion("assertion sub is invalid");
  // jose checks `iat` is a number; the lifetime rules are policy/assertions.ts's, for every assertion.
  const problem = lifetimeProblem({ exp: exp!, iat: iat! }, ctx.now(), rules.maxLifetimeSeconds);
  if (problem) throw invalidAssertion(`assertion ${problem}`);
  return { payload: payload as JWTPayload & { iss: string; sub: string; exp: number; iat: number }, issuer };
}

/**
 * The assertion's `jti` used once (RFC 7523 §3 item 7; policy/assertions.ts decides, for every
 * assertion); a missing or oversized one, or a second use, is `invalid_grant`.
 */
export async function useAssertionOnce(
  ctx: ServerContext,
  kind: "id-jag" | "workload",
  payload: { iss: string; exp: number; jti?: unknown },
): Promise<void> {
  const verdict = await useJtiOnce(ctx, kind, payload);
  if (verdict === "invalid") throw invalidAssertion("assertion jti is missing or invalid");
  if (verdict === "replayed") throw invalidAssertion("assertion was already used");
}

/** A `scope` claim of an assertion, parsed; undefined when absent; malformed is `invalid_grant`. */
export function assertedScopes(value: unknown): Set<string> | undefined {
  if (value === undefined) return undefined;
  try {
    if (typeof value !== "string") throw new TypeError("scope claim is not a string");
    return parseScope(value);
  } catch {
    throw invalidAssertion("assertion scope claim is malformed");
  }
}
