/**
 * JWT access tokens (RFC 9068) verified against a JWKS URI or local keys. jose fetches and selects
 * the keys; the signature of an allow-listed algorithm that jws.ts verifies (ES256, ES384, EdDSA,
 * RS256, PS256) is checked synchronously with node:crypto, as DPoP proofs are, which costs about
 * half of jose's WebCrypto path; anything else (another algorithm, a `crit` or `b64` header, a key
 * of an unexpected kind) goes through jose's `jwtVerify`.
 */
import { KeyObject as NodeKeyObject } from "node:crypto";
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
import {
  COMPACT_JWS,
  checkJwsSignature,
  JWS_ALGORITHMS,
  type JwsAlgorithm,
  MIN_RSA_BITS,
} from "../shared/jws.js";
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

/** node:crypto's names of the JWK curves jws.ts verifies. */
const NODE_CURVES: Readonly<Record<string, string>> = { "P-256": "prime256v1", "P-384": "secp384r1" };

/** What a WebCrypto key must have been imported as to verify each algorithm (as jose checks). */
const WEBCRYPTO_ALGORITHMS: Readonly<Record<string, { name: string; namedCurve?: string; hash?: string }>> = {
  ES256: { name: "ECDSA", namedCurve: "P-256" },
  ES384: { name: "ECDSA", namedCurve: "P-384" },
  EdDSA: { name: "Ed25519" },
  Ed25519: { name: "Ed25519" },
  RS256: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
  PS256: { name: "RSA-PSS", hash: "SHA-256" },
};

/** True when a WebCrypto key was imported for `alg` and for verifying. */
function cryptoKeyFits(key: CryptoKey, alg: string): boolean {
  const wanted = WEBCRYPTO_ALGORITHMS[alg];
  const algorithm = key.algorithm as { name: string; namedCurve?: string; hash?: { name: string } };
  return (
    wanted !== undefined &&
    key.usages.includes("verify") &&
    algorithm.name === wanted.name &&
    (wanted.namedCurve === undefined || algorithm.namedCurve === wanted.namedCurve) &&
    (wanted.hash === undefined || algorithm.hash?.name === wanted.hash)
  );
}

/** A key ready for node:crypto, with what each algorithm needs of it (undefined: not usable). */
interface PreparedKey {
  /** The key as given (a WebCrypto key is also checked for what it was imported as). */
  original: CryptoKey | KeyObject;
  key: NodeKeyObject;
  /** Signature length by algorithm name; `null` when the key does not fit the algorithm. */
  fits: Map<string, number | null>;
}

/** Keys as jose resolved them (CryptoKey, stable per JWK) or as configured, prepared once. */
const PREPARED = new WeakMap<object, PreparedKey>();

function preparedKey(key: CryptoKey | KeyObject): PreparedKey {
  let prepared = PREPARED.get(key);
  if (prepared === undefined) {
    const nodeKey = key instanceof NodeKeyObject ? key : NodeKeyObject.from(key as CryptoKey);
    prepared = { original: key, key: nodeKey, fits: new Map() };
    PREPARED.set(key, prepared);
  }
  return prepared;
}

/**
 * The signature length `algorithm` (named `alg`) has with `key`, or null when the key is not a
 * public key of the algorithm's type and curve (RSA: at least 2048 bits, RFC 7518 §3.3); jose then
 * decides (and refuses), so no key is ever used with an algorithm it was not made for.
 */
function signatureBytes(prepared: PreparedKey, alg: string, algorithm: JwsAlgorithm): number | null {
  const known = prepared.fits.get(alg);
  if (known !== undefined) return known;
  const key = prepared.key;
  const details = key.asymmetricKeyDetails ?? {};
  let bytes: number | null = null;
  const original = prepared.original;
  if (
    key.type === "public" &&
    (original instanceof NodeKeyObject || cryptoKeyFits(original as CryptoKey, alg))
  ) {
    if (algorithm.kty === "EC") {
      if (key.asymmetricKeyType === "ec" && details.namedCurve === NODE_CURVES[algorithm.crv!]) {
        bytes = algorithm.signatureBytes!;
      }
    } else if (algorithm.kty === "OKP") {
      if (key.asymmetricKeyType === "ed25519") bytes = algorithm.signatureBytes!;
    } else if (
      (key.asymmetricKeyType === "rsa" || (key.asymmetricKeyType === "rsa-pss" && alg === "PS256")) &&
      (details.modulusLength ?? 0) >= MIN_RSA_BITS
    ) {
      bytes = Math.ceil(details.modulusLength! / 8);
    }
  }
  prepared.fits.set(alg, bytes);
  return bytes;
}

/** A base64url JSON object segment, or undefined when it is not one. */
function jsonObject(segment: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/** RFC 7515 §4.1.9 / jose: `typ` compared case-insensitively, the "application/" prefix optional. */
function normalizedTyp(typ: string): string {
  const lower = typ.toLowerCase();
  return lower.startsWith("application/") ? lower.slice(12) : lower;
}

/** The node:crypto path's answer: the verified claims, or `undefined` when jose decides. */
type DirectOutcome = Record<string, unknown> | undefined;

/** What a protected header segment decided (jwtVerifier remembers it by the segment). */
interface HeaderDecision {
  /** The parsed header (frozen: shared by every token with this segment). */
  header: JWSHeaderParameters;
  alg: string;
  algorithm: JwsAlgorithm;
  /** The key the header resolved to, once known, when the key source is static. */
  key: PreparedKey | undefined;
}

/** Header decisions remembered per verifier: an issuer uses a few headers (one per key). */
const MAX_REMEMBERED_HEADERS = 64;
/** Longer header segments are decided each time, never remembered (real ones are ~100 chars). */
const MAX_REMEMBERED_HEADER_LENGTH = 512;

/** A failure on the node:crypto path as the verifier reports it (`invalid_token` unless mapped). */
function directFailure(error: unknown): unknown {
  if (error instanceof OAuthError) return error;
  return invalidToken(`jwt verification failed: ${(error as Error).name}`, error);
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

  const allowed = new Set(algorithms);
  // A local key set (jose keeps its own snapshot of it) or one key never changes: the key a header
  // resolves to can be remembered with the header's decision. A remote set rotates: asked each time.
  const staticKeys = options.jwksUri === undefined;
  /** Header decisions of this verifier, by the exact protected header segment. */
  const headerDecisions = new Map<string, HeaderDecision>();

  /**
   * The decision on a protected header segment: `undefined` when jose must decide (not a JSON
   * object, an algorithm jws.ts does not verify, an extension), else the parsed header and its
   * algorithm. Throws `invalid_token` for a header jose would refuse too. Remembered by the exact
   * segment (bounded: a flood of distinct headers only empties the memo), so a token whose header
   * was seen before skips the decoding and the checks, which depend on nothing but the segment.
   */
  const headerDecision = (segment: string): HeaderDecision | undefined => {
    const known = headerDecisions.get(segment);
    if (known !== undefined) return known;
    const header = jsonObject(segment);
    if (header === undefined) return undefined;
    const alg = header.alg;
    if (typeof alg !== "string" || !Object.hasOwn(JWS_ALGORITHMS, alg)) return undefined;
    // Extensions (RFC 7515 §4.1.11, RFC 7797 b64) are jose's to judge.
    if ("crit" in header || "b64" in header) return undefined;
    if (!allowed.has(alg)) throw invalidToken("jwt verification failed: ERR_JOSE_ALG_NOT_ALLOWED");
    // RFC 9068 §4: typ MUST be "at+jwt" ("application/at+jwt" is the same media type).
    if (requireTyp && (typeof header.typ !== "string" || normalizedTyp(header.typ) !== "at+jwt")) {
      throw invalidToken("jwt verification failed: typ is not at+jwt");
    }
    const decision: HeaderDecision = {
      header: Object.freeze(header) as JWSHeaderParameters,
      alg,
      algorithm: JWS_ALGORITHMS[alg]!,
      key: undefined,
    };
    if (segment.length <= MAX_REMEMBERED_HEADER_LENGTH) {
      if (headerDecisions.size >= MAX_REMEMBERED_HEADERS) headerDecisions.clear();
      headerDecisions.set(segment, decision);
    }
    return decision;
  };

  /**
   * The node:crypto path: the claims of a token whose header is ordinary and whose algorithm
   * jws.ts verifies, once its signature has verified; `undefined` when jose must decide instead.
   * Throws `invalid_token` for what jose would refuse too (and key resolution errors as mapped).
   * Synchronous when the key is already known (a static key source and a header seen before), a
   * promise when the key has to be resolved.
   */
  const verifyDirectly = (token: string): DirectOutcome | Promise<DirectOutcome> => {
    const parts = COMPACT_JWS.exec(token);
    if (parts === null) return undefined;
    const decision = headerDecision(parts[1]!);
    if (decision === undefined) return undefined;
    if (decision.key !== undefined) return verifiedClaims(token, parts, decision, decision.key);
    const resolved =
      typeof key === "function"
        ? key(decision.header, { protected: parts[1]!, payload: parts[2]!, signature: parts[3]! })
        : key;
    if (resolved instanceof Promise) {
      return resolved.then((found) => verifiedClaims(token, parts, decision, keyFor(decision, found)));
    }
    return verifiedClaims(token, parts, decision, keyFor(decision, resolved));
  };

  /** The prepared key for the header's algorithm (remembered with the decision for static keys). */
  const keyFor = (decision: HeaderDecision, found: CryptoKey | KeyObject): PreparedKey => {
    const prepared = preparedKey(found);
    if (staticKeys) decision.key = prepared;
    return prepared;
  };

  /** Signature, then the claims as a JSON object; `undefined` when the key is jose's to judge. */
  const verifiedClaims = (
    token: string,
    parts: RegExpExecArray,
    decision: HeaderDecision,
    prepared: PreparedKey,
  ): DirectOutcome => {
    const expectedBytes = signatureBytes(prepared, decision.alg, decision.algorithm);
    if (expectedBytes === null) return undefined;
    let signature: ReturnType<typeof checkJwsSignature>;
    try {
      signature = checkJwsSignature(decision.algorithm, token, parts, prepared.key, expectedBytes);
    } catch (error) {
      throw invalidToken("jwt verification failed: signature could not be checked", error);
    }
    if (signature !== "valid") throw invalidToken(`jwt verification failed: signature ${signature}`);
    const payload = jsonObject(parts[2]!);
    if (payload === undefined) throw invalidToken("jwt verification failed: claims are not a JSON object");
    // As jose: `iat`, when present, is a number (exp, nbf, iss and aud: authInfoFromClaims).
    if (payload.iat !== undefined && typeof payload.iat !== "number") {
      throw invalidToken("jwt verification failed: iat claim malformed");
    }
    return payload;
  };

  const claimsToAuth = (payload: Record<string, unknown>, nowMs: number): AuthInfo =>
    authInfoFromClaims(payload, {
      audience,
      issuers,
      clockToleranceSeconds: tolerance,
      nowSeconds: nowMs / 1000,
    });

  /** Everything the node:crypto path leaves to jose (other algorithms, extensions, odd keys). */
  const verifyWithJose = async (token: string, nowMs: number): Promise<AuthInfo> => {
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
    return claimsToAuth(payload, nowMs);
  };

  return {
    // Not `async`: a token whose header and key are known is verified without a promise hop
    // (the answer is still a promise, and every failure a rejection).
    verify(token: string): Promise<AuthInfo> {
      const nowMs = now ? now() : Date.now();
      let outcome: DirectOutcome | Promise<DirectOutcome>;
      try {
        outcome = verifyDirectly(token);
      } catch (error) {
        return Promise.reject(directFailure(error));
      }
      if (outcome === undefined) return verifyWithJose(token, nowMs);
      if (outcome instanceof Promise) {
        return outcome.then(
          (payload) => (payload === undefined ? verifyWithJose(token, nowMs) : claimsToAuth(payload, nowMs)),
          (error) => {
            throw directFailure(error);
          },
        );
      }
      try {
        return Promise.resolve(claimsToAuth(outcome, nowMs));
      } catch (error) {
        return Promise.reject(error);
      }
    },
  };
}
