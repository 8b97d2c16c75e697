/**
 * Turning verified claims (JWT payload or introspection response) into {@link AuthInfo}, with the
 * audience, issuer and time checks both verifiers share.
 */
import { isScopeToken } from "../shared/scopes.js";
import { invalidToken } from "./errors.js";
import type { AuthInfo } from "./types.js";

export function audienceList(aud: unknown): string[] | undefined {
  if (typeof aud === "string") return [aud];
  if (Array.isArray(aud) && aud.every((a) => typeof a === "string")) return aud as string[];
  return undefined;
}

function scopeList(claims: Record<string, unknown>): string[] {
  const scope = claims.scope;
  if (typeof scope === "string") {
    const out: string[] = [];
    for (const s of scope.split(" ")) {
      if (s === "") continue;
      if (!isScopeToken(s)) throw invalidToken("scope claim contains an invalid scope token");
      if (!out.includes(s)) out.push(s);
    }
    return out;
  }
  if (scope !== undefined) throw invalidToken("scope claim is not a string");
  // Some issuers use an `scp` array instead (not RFC 9068, but common).
  const scp = claims.scp;
  if (Array.isArray(scp) && scp.every((s) => typeof s === "string" && isScopeToken(s)))
    return [...new Set(scp as string[])];
  if (scp !== undefined) throw invalidToken("scp claim is not an array of scope tokens");
  return [];
}

/** A JWK SHA-256 thumbprint, base64url: 43 characters (RFC 7638 §3, RFC 9449 §6.1). */
const JKT = /^[A-Za-z0-9_-]{43}$/;

/**
 * The DPoP key the token is bound to: `cnf.jkt` in a JWT (RFC 9449 §6.1) or an introspection
 * response (§6.2). A malformed binding, or `token_type` `DPoP` without one, makes the token
 * unusable: accepting it unbound would turn a sender-constrained token into a bearer token.
 */
function dpopBinding(claims: Record<string, unknown>): string | undefined {
  const cnf = claims.cnf;
  let jkt: unknown;
  if (cnf !== undefined) {
    if (typeof cnf !== "object" || cnf === null || Array.isArray(cnf))
      throw invalidToken("cnf claim malformed");
    jkt = (cnf as Record<string, unknown>).jkt;
  }
  if (jkt === undefined) {
    if (typeof claims.token_type === "string" && claims.token_type.toLowerCase() === "dpop") {
      throw invalidToken("token_type DPoP without cnf.jkt");
    }
    return undefined;
  }
  if (typeof jkt !== "string" || !JKT.test(jkt)) throw invalidToken("cnf.jkt malformed");
  return jkt;
}

export interface ClaimChecks {
  /** This resource's canonical URI: `aud` must contain it, compared exactly (RFC 8707 §2). */
  audience: string;
  /** Trusted issuers, compared exactly; empty = not checked here (already checked by the caller). */
  issuers: readonly string[];
  clockToleranceSeconds: number;
  nowSeconds: number;
}

/**
 * Checks audience, issuer, `exp` (required) and `nbf`, and builds the {@link AuthInfo}.
 * Spec, Token validation rule 2: the token MUST name this resource as audience; a prefix or a URL
 * that merely normalises to ours does not count, so the comparison is plain string equality.
 */
export function authInfoFromClaims(claims: Record<string, unknown>, checks: ClaimChecks): AuthInfo {
  const audience = audienceList(claims.aud);
  if (!audience) throw invalidToken("aud claim missing or malformed");
  if (!audience.includes(checks.audience)) throw invalidToken("aud claim does not name this resource");
  const iss = claims.iss;
  if (iss !== undefined && typeof iss !== "string") throw invalidToken("iss claim malformed");
  if (checks.issuers.length && (iss === undefined || !checks.issuers.includes(iss))) {
    throw invalidToken("iss claim is not a trusted issuer");
  }
  const exp = claims.exp;
  if (typeof exp !== "number" || !Number.isFinite(exp)) throw invalidToken("exp claim missing or malformed");
  if (exp <= checks.nowSeconds - checks.clockToleranceSeconds) throw invalidToken("token expired");
  const nbf = claims.nbf;
  if (nbf !== undefined) {
    if (typeof nbf !== "number" || !Number.isFinite(nbf)) throw invalidToken("nbf claim malformed");
    if (nbf > checks.nowSeconds + checks.clockToleranceSeconds) throw invalidToken("token not yet valid");
  }
  const sub = claims.sub;
  const clientId = claims.client_id;
  const jti = claims.jti;
  const auth: AuthInfo = {
    subject: typeof sub === "string" ? sub : undefined,
    clientId: typeof clientId === "string" ? clientId : undefined,
    scopes: scopeList(claims),
    audience,
    expiresAt: exp,
    issuer: iss,
    claims,
  };
  if (typeof jti === "string") auth.tokenId = jti;
  const dpopJkt = dpopBinding(claims);
  if (dpopJkt !== undefined) auth.dpopJkt = dpopJkt;
  return auth;
}
