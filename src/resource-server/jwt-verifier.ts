/**
 * JWT access tokens (RFC 9068) verified with jose against a JWKS URI or local keys.
 */
import {
  type CryptoKey,
  createLocalJWKSet,
  createRemoteJWKSet,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
  jwtVerify,
  type KeyObject,
} from "jose";
import { GatehouseTypeError, OAuthError } from "../shared/errors.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";
import { authInfoFromClaims } from "./claims.js";
import { invalidToken, verificationUnavailable } from "./errors.js";
import type { AccessTokenVerifier, AuthInfo } from "./types.js";

/** Asymmetric JWS algorithms Gatehouse accepts in an allow-list. Never `none`, never HMAC. */
const ASYMMETRIC = new Set([
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
]);

export const DEFAULT_JWT_ALGORITHMS: readonly string[] = ["ES256", "EdDSA", "RS256"];

export interface JwtVerifierOptions {
  /** Trusted issuer(s); `iss` must equal one exactly (no normalisation). */
  issuer: string | readonly string[];
  /** This resource's canonical URI; `aud` must contain it exactly (RFC 8707 §2, RFC 9068 §4). */
  audience: string;
  /** Where the issuer publishes its keys (fetched, cached, refreshed on an unknown `kid`). */
  jwksUri?: string | URL;
  /** Local keys instead of a JWKS URI. */
  jwks?: JSONWebKeySet;
  /** One local public key instead of a JWKS. */
  key?: CryptoKey | KeyObject;
  /** Allowed `alg` values (default ES256, EdDSA, RS256). `none` and HMAC are refused at set-up. */
  algorithms?: readonly string[];
  /** Leeway for `exp` and `nbf`, in seconds (default 30). */
  clockToleranceSeconds?: number;
  /** Require `typ: at+jwt` (RFC 9068 §4; default true). */
  requireAtJwtType?: boolean;
  /** JWKS fetch timeout in ms (default 5000). */
  jwksTimeoutMs?: number;
  /** Minimum time between two JWKS fetches triggered by unknown `kid`s, in ms (default 30 000). */
  jwksCooldownMs?: number;
  /** Maximum age of cached keys, in ms (default 600 000). */
  jwksCacheMaxAgeMs?: number;
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

type KeyResolver = (header: JWSHeaderParameters, token: FlattenedJWSInput) => Promise<CryptoKey>;

/** Maps key-resolution failures: an unknown key is the token's fault, an unreachable JWKS is not. */
function guardResolver(resolve: KeyResolver): KeyResolver {
  return async (header, token) => {
    try {
      return await resolve(header, token);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (
        code === "ERR_JWKS_NO_MATCHING_KEY" ||
        code === "ERR_JWKS_MULTIPLE_MATCHING_KEYS" ||
        code === "ERR_JOSE_NOT_SUPPORTED" ||
        code === "ERR_JOSE_ALG_NOT_ALLOWED"
      ) {
        throw invalidToken(`key resolution failed: ${String(code)}`, error);
      }
      throw verificationUnavailable(`JWKS unavailable: ${String(code ?? (error as Error).name)}`, error);
    }
  };
}

/**
 * A verifier for RFC 9068 JWT access tokens: signature with an allowed asymmetric algorithm,
 * `typ` `at+jwt`, `iss` equal to a trusted issuer, `aud` containing this resource, `exp` present
 * and not past, `nbf` not in the future (both with `clockToleranceSeconds`).
 *
 * Options are validated now: a bad configuration throws {@link GatehouseTypeError}.
 * Does NOT check revocation (use short-lived tokens or {@link introspectionVerifier}).
 */
export function jwtVerifier(options: JwtVerifierOptions): AccessTokenVerifier {
  const issuers = typeof options.issuer === "string" ? [options.issuer] : [...(options.issuer ?? [])];
  if (issuers.length === 0 || issuers.some((i) => typeof i !== "string" || i === "")) {
    throw invalidOption("jwtVerifier: issuer must be a non-empty string or list of strings");
  }
  if (typeof options.audience !== "string") throw invalidOption("jwtVerifier: audience is required");
  const audience = canonicalResourceUri(options.audience);
  const algorithms = [...(options.algorithms ?? DEFAULT_JWT_ALGORITHMS)];
  if (algorithms.length === 0) throw invalidOption("jwtVerifier: algorithms must not be empty");
  for (const alg of algorithms) {
    if (!ASYMMETRIC.has(alg)) {
      throw invalidOption(
        `jwtVerifier: algorithm ${JSON.stringify(alg)} is not allowed (asymmetric JWS algorithms only; never none or HMAC)`,
      );
    }
  }
  const tolerance = options.clockToleranceSeconds ?? 30;
  if (!Number.isFinite(tolerance) || tolerance < 0 || tolerance > 300) {
    throw invalidOption("jwtVerifier: clockToleranceSeconds must be between 0 and 300");
  }
  const sources = [options.jwksUri, options.jwks, options.key].filter((s) => s !== undefined);
  if (sources.length !== 1) throw invalidOption("jwtVerifier: give exactly one of jwksUri, jwks or key");

  let key: KeyResolver | CryptoKey | KeyObject;
  if (options.jwksUri !== undefined) {
    let url: URL;
    try {
      url = new URL(options.jwksUri);
    } catch {
      throw invalidOption("jwtVerifier: jwksUri must be an absolute URL");
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
      throw invalidOption("jwtVerifier: jwksUri must be https (http only for loopback hosts)");
    }
    key = guardResolver(
      createRemoteJWKSet(url, {
        timeoutDuration: options.jwksTimeoutMs ?? 5000,
        cooldownDuration: options.jwksCooldownMs ?? 30_000,
        cacheMaxAge: options.jwksCacheMaxAgeMs ?? 600_000,
      }),
    );
  } else if (options.jwks !== undefined) {
    if (!Array.isArray(options.jwks.keys))
      throw invalidOption("jwtVerifier: jwks must be a JSON Web Key Set");
    key = guardResolver(createLocalJWKSet(options.jwks));
  } else {
    key = options.key!;
  }
  const requireTyp = options.requireAtJwtType ?? true;
  const now = options.now;
  const baseOptions = {
    algorithms,
    // RFC 9068 §4: typ MUST be "at+jwt" (jose also accepts "application/at+jwt").
    typ: requireTyp ? "at+jwt" : undefined,
    clockTolerance: tolerance,
    requiredClaims: ["exp"],
  };

  return {
    async verify(token: string): Promise<AuthInfo> {
      const nowMs = now ? now() : Date.now();
      let payload: Record<string, unknown>;
      try {
        // `iss` and `aud` are checked below, exactly, with one code path shared with introspection.
        const result = await jwtVerify(token, key as KeyResolver, {
          ...baseOptions,
          currentDate: now ? new Date(nowMs) : undefined,
        });
        payload = result.payload as Record<string, unknown>;
      } catch (error) {
        if (error instanceof OAuthError) throw error;
        const code = (error as { code?: unknown }).code;
        throw invalidToken(`jwt verification failed: ${String(code ?? (error as Error).name)}`, error);
      }
      return authInfoFromClaims(payload, {
        audience,
        issuers,
        clockToleranceSeconds: tolerance,
        nowSeconds: nowMs / 1000,
      });
    },
  };
}
