/**
 * DPoP proof verification (RFC 9449 §4.2-4.3), shared by the resource-server gate (§7) and the
 * authorization server's token endpoint (§5): one place decides what a valid proof is.
 *
 * {@link dpopProofVerifier} checks one `DPoP` header value against the request it came with and
 * returns the key's RFC 7638 thumbprint (`jkt`), which the caller compares with the token's or the
 * grant's `cnf.jkt`. Replayed proofs are refused through a {@link DPoPReplayGuard}: a bounded
 * in-memory one by default ({@link memoryReplayGuard}), or one backed by a shared store so that
 * several instances refuse each other's replays ({@link storeReplayGuard}). Server nonces (§8, §9)
 * are stateless ({@link DPoPNonceOptions}): an HMAC of a time window, so instances sharing the
 * secret issue and accept the same nonces without talking to each other.
 *
 * Signatures are verified with node:crypto directly (synchronous, no WebCrypto round-trip), for a
 * closed allow-list of asymmetric algorithms whose key type is checked against `alg` before any
 * key is imported (no algorithm confusion, never `none` or HMAC).
 */
import { createHash, createHmac, createPublicKey, type KeyObject } from "node:crypto";
import { sha256Base64url, timingSafeEqualString } from "./crypto.js";
import { GatehouseTypeError, OAuthError } from "./errors.js";
import { COMPACT_JWS, checkJwsSignature, JWS_ALGORITHMS, type JwsAlgorithm, MIN_RSA_BITS } from "./jws.js";

/**
 * RFC 9449 §4.2: `alg` MUST be an asymmetric algorithm, never `none` nor a MAC: the ones jws.ts
 * verifies. A verifier accepts the subset it is configured with.
 */
const PROOF_ALGORITHMS = JWS_ALGORITHMS;
type ProofAlgorithm = JwsAlgorithm;

/** The algorithms a verifier accepts unless told otherwise (what `algs` and metadata advertise). */
export const DEFAULT_DPOP_ALGORITHMS: readonly string[] = ["ES256", "EdDSA", "RS256", "PS256"];

/** Longest `DPoP` header value read (an RSA-4096 proof is about 2 KiB). */
const MAX_PROOF_LENGTH = 8192;
/** Longest `jti` accepted (RFC 9449 §4.2: enough entropy; 16 bytes suffice, UUIDs are 36). */
const MAX_JTI_LENGTH = 256;
/** Longest `htu` compared (request URLs longer than this are not worth a proof). */
const MAX_HTU_LENGTH = 4096;
/** RSA moduli accepted, in bits: at least MIN_RSA_BITS (RFC 7518 §3.3), at most 4096 (bounded work). */
const MAX_RSA_BITS = 4096;
/** Public keys imported and kept, by their canonical members (clients reuse one key). */
const KEY_CACHE_SIZE = 1024;

const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** Private members of EC, OKP and RSA JWKs (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2). */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/** What a verified proof tells its caller. */
export interface VerifiedDPoPProof {
  /** RFC 7638 SHA-256 thumbprint (base64url) of the proof's key: compare it with `cnf.jkt`. */
  jkt: string;
  /** The proof's `jti` (already recorded by the replay guard). */
  jti: string;
  /** The proof's `iat`, in seconds since the epoch. */
  iat: number;
}

/** The request a proof is checked against. */
export interface DPoPProofRequest {
  /**
   * The `DPoP` header as received: several fields joined with ", " (as `Headers.get` does, so a
   * request with two proofs is refused), `null` when absent.
   */
  proof: string | null;
  /** The request method (`htm` must equal it exactly). */
  method: string;
  /**
   * The absolute request URL as the server sees it (scheme and host the server answers at, after
   * any trusted proxy); query and fragment are ignored (RFC 9449 §4.3 point 9).
   */
  url: string;
  /** The access token sent with the request, if any: the proof's `ath` must then be its hash (§4.3 point 10). */
  accessToken?: string;
  /**
   * The thumbprint the proof's key must have, when the request is bound to a key already (a
   * token's `cnf.jkt`, RFC 9449 §6-7; a code's `dpop_jkt`, §10; a bound refresh token, §5). A
   * mismatch throws {@link DPoPKeyMismatchError} before the proof is recorded as used, so a party
   * without the key cannot fill the replay guard.
   */
  jkt?: string;
}

/**
 * The proof is valid but signed with another key than the one the request is bound to. Its code
 * is `invalid_dpop_proof` (what a token endpoint answers); a resource server answers
 * `invalid_token` instead ("Invalid DPoP key binding", RFC 9449 §7.1).
 */
export class DPoPKeyMismatchError extends OAuthError {
  constructor() {
    super("invalid_dpop_proof", {
      description: "The DPoP proof is not signed with the key the request is bound to",
      detail: "DPoP key does not match the binding",
    });
    this.name = "DPoPKeyMismatchError";
  }
}

/**
 * Records a proof as used: `true` the first time `key` is seen before `expiresAt` (ms since the
 * epoch), `false` for a replay. Of concurrent calls with one key, exactly one may get `true`.
 * `key` is at most 80 characters, a hash of the key's thumbprint and the proof's `jti`.
 */
export type DPoPReplayGuard = (key: string, expiresAt: number) => boolean | Promise<boolean>;

/** Stateless server nonces (RFC 9449 §8, §9): when configured, every proof must carry a current one. */
export interface DPoPNonceOptions {
  /** At least 32 bytes; instances sharing it issue and accept the same nonces. */
  secret: string | Uint8Array;
  /** How long one nonce is issued for, in seconds (default 300); the previous one is still accepted. */
  lifetimeSeconds?: number;
  /**
   * Separates servers sharing a secret (e.g. the resource URI, or the issuer's token endpoint), so
   * a nonce from one is not accepted by the other. Default `""`.
   */
  context?: string;
}

export interface DPoPProofVerifierOptions {
  /** Accepted `alg` values (default {@link DEFAULT_DPOP_ALGORITHMS}); asymmetric only. */
  algorithms?: readonly string[];
  /**
   * How far `iat` may be from now, either way, in seconds (default 60, at most 600): the proof's
   * lifetime and the clock skew tolerated (RFC 9449 §11.1).
   */
  iatWindowSeconds?: number;
  /** Where used proofs are recorded (default: a {@link memoryReplayGuard} of this verifier's own). */
  replayGuard?: DPoPReplayGuard;
  /** Require a server nonce in every proof (RFC 9449 §8, §9). */
  nonce?: DPoPNonceOptions;
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

export interface DPoPProofVerifier {
  /** The accepted algorithms, for `algs` in challenges and `dpop_signing_alg_values_supported`. */
  readonly algorithms: readonly string[];
  /**
   * Verifies the proof of one request. Throws {@link OAuthError}: `invalid_dpop_proof` for a
   * missing, malformed, mismatched, stale or replayed proof; `use_dpop_nonce` (with a `dpop-nonce`
   * header to send) when a nonce is required and the proof has none or an old one;
   * {@link DPoPKeyMismatchError} when `request.jkt` names another key; `temporarily_unavailable`
   * when the replay guard could not answer.
   */
  verify(request: DPoPProofRequest): Promise<VerifiedDPoPProof>;
  /** The nonce to send in `DPoP-Nonce` now, or `undefined` when nonces are not configured. */
  currentNonce(): string | undefined;
}

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

/** `invalid_dpop_proof`: which check failed goes to `detail` (logs), never on the wire. */
function invalidProof(detail: string, cause?: unknown): OAuthError {
  return new OAuthError("invalid_dpop_proof", { description: "The DPoP proof is invalid", detail, cause });
}

function decodeJson(segment: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
  } catch (error) {
    throw invalidProof(`${what} is not base64url JSON`, error);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidProof(`${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function base64urlMember(jwk: Record<string, unknown>, name: string, maxLength: number): string {
  const value = jwk[name];
  if (typeof value !== "string" || value.length > maxLength || !BASE64URL.test(value)) {
    throw invalidProof(`jwk member ${name} missing or malformed`);
  }
  return value;
}

/**
 * The RFC 7638 §3.2 canonical JSON of the key's required members, in lexicographic order, after
 * checking the key fits `alg` (RFC 9449 §4.3 point 5: no private members; key type and curve of
 * the algorithm, so an RSA key can never be used with an EC algorithm or the reverse).
 */
function canonicalPublicJwk(jwk: unknown, algorithm: ProofAlgorithm): string {
  if (typeof jwk !== "object" || jwk === null || Array.isArray(jwk)) throw invalidProof("jwk header missing");
  const key = jwk as Record<string, unknown>;
  for (const member of PRIVATE_MEMBERS) {
    if (member in key) throw invalidProof("jwk header contains a private key member");
  }
  if (key.kty !== algorithm.kty) throw invalidProof("jwk kty does not match alg");
  if (algorithm.kty === "RSA") {
    const e = base64urlMember(key, "e", 12);
    const n = base64urlMember(key, "n", Math.ceil(MAX_RSA_BITS / 6) + 1);
    return JSON.stringify({ e, kty: "RSA", n });
  }
  if (key.crv !== algorithm.crv) throw invalidProof("jwk crv does not match alg");
  const length = algorithm.coordinateLength!;
  const x = base64urlMember(key, "x", length);
  if (x.length !== length) throw invalidProof("jwk x has the wrong length");
  if (algorithm.kty === "OKP") return JSON.stringify({ crv: algorithm.crv, kty: "OKP", x });
  const y = base64urlMember(key, "y", length);
  if (y.length !== length) throw invalidProof("jwk y has the wrong length");
  return JSON.stringify({ crv: algorithm.crv, kty: "EC", x, y });
}

interface ImportedKey {
  key: KeyObject;
  jkt: string;
  /** RSA: the modulus length in bytes (the signature's length). */
  modulusBytes?: number;
}

/** A bounded cache of imported public keys, by canonical JWK (insertion order evicts). */
class KeyCache {
  readonly #entries = new Map<string, ImportedKey>();

  get(canonical: string): ImportedKey {
    const known = this.#entries.get(canonical);
    if (known !== undefined) return known;
    let key: KeyObject;
    try {
      key = createPublicKey({ key: JSON.parse(canonical), format: "jwk" });
    } catch (error) {
      // Not a point on the curve, a malformed modulus, ...
      throw invalidProof("jwk is not a usable public key", error);
    }
    const imported: ImportedKey = {
      key,
      jkt: createHash("sha256").update(canonical, "utf8").digest("base64url"),
    };
    if (key.asymmetricKeyType === "rsa") {
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      if (bits < MIN_RSA_BITS || bits > MAX_RSA_BITS) throw invalidProof("RSA key size not accepted");
      imported.modulusBytes = Math.ceil(bits / 8);
    }
    if (this.#entries.size >= KEY_CACHE_SIZE) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
    this.#entries.set(canonical, imported);
    return imported;
  }
}

/**
 * RFC 9449 §4.3 point 9: `htu` is compared with the request URI without query and fragment, after
 * RFC 3986 §6 syntax- and scheme-based normalisation: scheme and host case, default port, dot
 * segments and an empty path (WHATWG URL parsing does these), then percent-encoding: unreserved
 * characters decoded, hex digits upper-cased. `undefined` for anything but an absolute http(s) URL.
 */
export function normalizedHtu(value: string): string | undefined {
  if (value.length > MAX_HTU_LENGTH) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
  // A request URI has no userinfo; an htu with one names something else.
  if (url.username !== "" || url.password !== "") return undefined;
  const path = url.pathname.includes("%")
    ? url.pathname.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
        const char = String.fromCharCode(Number.parseInt(hex, 16));
        return /[A-Za-z0-9\-._~]/.test(char) ? char : `%${hex.toUpperCase()}`;
      })
    : url.pathname;
  return `${url.protocol}//${url.host}${path}`;
}

/** Checks the nonce options and returns the issue/accept pair of the stateless scheme. */
function nonceScheme(options: DPoPNonceOptions, now: () => number) {
  const secret = typeof options.secret === "string" ? Buffer.from(options.secret, "utf8") : options.secret;
  if (!(secret instanceof Uint8Array) || secret.byteLength < 32) {
    throw invalidOption("dpopProofVerifier: nonce.secret must be at least 32 bytes");
  }
  const lifetime = options.lifetimeSeconds ?? 300;
  if (!Number.isInteger(lifetime) || lifetime < 10 || lifetime > 86_400) {
    throw invalidOption("dpopProofVerifier: nonce.lifetimeSeconds must be an integer from 10 to 86400");
  }
  const context = options.context ?? "";
  if (typeof context !== "string") throw invalidOption("dpopProofVerifier: nonce.context must be a string");
  // The nonce of a window: 128 bits of HMAC over the window's index and the context. base64url
  // is within RFC 9449 §8.1's NQCHAR.
  const nonceOf = (window: number): string =>
    createHmac("sha256", secret)
      .update(`gatehouse dpop nonce\n${context}\n${window}`, "utf8")
      .digest()
      .subarray(0, 16)
      .toString("base64url");
  let cachedWindow = Number.NaN;
  let cachedNonce = "";
  const current = (): string => {
    const window = Math.floor(now() / 1000 / lifetime);
    if (window !== cachedWindow) {
      cachedWindow = window;
      cachedNonce = nonceOf(window);
    }
    return cachedNonce;
  };
  const accepts = (nonce: string): boolean => {
    const issued = current();
    // The previous window's nonce stays good, so a client that just got one is not turned away at
    // a window boundary.
    return timingSafeEqualString(nonce, issued) || timingSafeEqualString(nonce, nonceOf(cachedWindow - 1));
  };
  return { current, accepts };
}

function checkReplayAnswer(fresh: boolean): void {
  if (!fresh) throw invalidProof("jti replayed");
}

function guardFailed(error: unknown): never {
  if (error instanceof OAuthError) throw error;
  throw new OAuthError("temporarily_unavailable", {
    description: "The DPoP proof cannot be checked right now",
    detail: `replay guard failed: ${error instanceof Error ? error.name : typeof error}`,
    cause: error,
  });
}

/**
 * Creates a proof verifier. Options are checked now: a bad configuration throws
 * {@link GatehouseTypeError} (`ERR_INVALID_OPTION`).
 */
export function dpopProofVerifier(options: DPoPProofVerifierOptions = {}): DPoPProofVerifier {
  const algorithms = [...(options.algorithms ?? DEFAULT_DPOP_ALGORITHMS)];
  if (algorithms.length === 0) throw invalidOption("dpopProofVerifier: algorithms must not be empty");
  for (const alg of algorithms) {
    if (!Object.hasOwn(PROOF_ALGORITHMS, alg)) {
      throw invalidOption(
        `dpopProofVerifier: algorithm ${JSON.stringify(alg)} is not supported (one of ${Object.keys(PROOF_ALGORITHMS).join(", ")})`,
      );
    }
  }
  const accepted = new Map(algorithms.map((alg) => [alg, PROOF_ALGORITHMS[alg]!]));
  const window = options.iatWindowSeconds ?? 60;
  if (!Number.isFinite(window) || window < 1 || window > 600) {
    throw invalidOption("dpopProofVerifier: iatWindowSeconds must be between 1 and 600");
  }
  const now = options.now ?? Date.now;
  const replayGuard = options.replayGuard ?? memoryReplayGuard({ now });
  if (typeof replayGuard !== "function")
    throw invalidOption("dpopProofVerifier: replayGuard must be a function");
  const nonces = options.nonce === undefined ? undefined : nonceScheme(options.nonce, now);
  const keys = new KeyCache();

  /** Every check but the replay guard, synchronously (the signature is verified on this thread). */
  const check = (request: DPoPProofRequest): VerifiedDPoPProof => {
    const proof = request.proof;
    if (proof === null || proof === "") throw invalidProof("DPoP header missing");
    // RFC 9449 §4.3 point 1: exactly one DPoP header field. Joined fields contain ", ", which no
    // compact JWS can.
    if (proof.length > MAX_PROOF_LENGTH) throw invalidProof("DPoP header too long");
    const parts = COMPACT_JWS.exec(proof);
    if (parts === null) throw invalidProof("DPoP header is not one compact JWS (or several DPoP fields)");
    const header = decodeJson(parts[1]!, "JOSE header");
    // §4.3 point 4: typ is dpop+jwt (RFC 7515 §4.1.9 lets the "application/" prefix be omitted).
    const typ = typeof header.typ === "string" ? header.typ.toLowerCase() : undefined;
    if (typ !== "dpop+jwt" && typ !== "application/dpop+jwt") throw invalidProof("typ is not dpop+jwt");
    // §4.3 point 5: an accepted asymmetric algorithm (never none, never a MAC).
    const algorithm = typeof header.alg === "string" ? accepted.get(header.alg) : undefined;
    if (algorithm === undefined) throw invalidProof("alg not accepted");
    // RFC 7515 §4.1.11: no extension is understood here, so any `crit` makes the JWS invalid.
    if ("crit" in header) throw invalidProof("crit header not supported");
    const imported = keys.get(canonicalPublicJwk(header.jwk, algorithm));
    // §4.3 point 6: the signature verifies with the key in the header.
    let signature: ReturnType<typeof checkJwsSignature>;
    try {
      signature = checkJwsSignature(
        algorithm,
        proof,
        parts,
        imported.key,
        imported.modulusBytes ?? algorithm.signatureBytes,
      );
    } catch (error) {
      throw invalidProof("signature could not be checked", error);
    }
    if (signature === "wrong-length") throw invalidProof("signature has the wrong length");
    if (signature !== "valid") throw invalidProof("signature does not verify");

    const claims = decodeJson(parts[2]!, "claims");
    // §4.2: jti, htm, htu, iat are required.
    const jti = claims.jti;
    if (typeof jti !== "string" || jti === "" || jti.length > MAX_JTI_LENGTH) {
      throw invalidProof("jti missing or malformed");
    }
    // §4.3 point 8: htm matches the request method.
    if (claims.htm !== request.method) throw invalidProof("htm does not match the request method");
    // §4.3 point 9: htu matches the request URI without query and fragment.
    const htu = typeof claims.htu === "string" ? normalizedHtu(claims.htu) : undefined;
    if (htu === undefined || htu !== normalizedHtu(request.url)) {
      throw invalidProof("htu does not match the request URL");
    }
    // §4.3 point 11: iat within an acceptable window (both ways: lifetime and clock skew).
    const iat = claims.iat;
    if (typeof iat !== "number" || !Number.isFinite(iat)) throw invalidProof("iat missing or malformed");
    const nowSeconds = now() / 1000;
    if (iat < nowSeconds - window) throw invalidProof("iat too old");
    if (iat > nowSeconds + window) throw invalidProof("iat in the future");
    // §4.3 point 10 (§7.1): with an access token, ath is the base64url SHA-256 of it.
    if (request.accessToken !== undefined) {
      if (
        typeof claims.ath !== "string" ||
        !timingSafeEqualString(claims.ath, sha256Base64url(request.accessToken))
      ) {
        throw invalidProof("ath does not match the access token");
      }
    }
    // §4.3 point 7 with §8/§9: a nonce the server issued (and recently), else use_dpop_nonce.
    if (nonces !== undefined) {
      const nonce = claims.nonce;
      if (typeof nonce !== "string" || !nonces.accepts(nonce)) {
        throw new OAuthError("use_dpop_nonce", {
          description: "A DPoP nonce from this server is required",
          detail: nonce === undefined ? "nonce missing" : "nonce not current",
          headers: { "dpop-nonce": nonces.current() },
        });
      }
    }
    return { jkt: imported.jkt, jti, iat };
  };

  return {
    algorithms,
    async verify(request) {
      const verified = check(request);
      if (request.jkt !== undefined && request.jkt !== verified.jkt) throw new DPoPKeyMismatchError();
      // §11.1: a proof is used once. The key names the jti under its key, so nobody can use up
      // another key's jti; it is remembered for as long as the proof would be accepted.
      const key = `dpop-jti:${sha256Base64url(`${verified.jkt}\n${verified.jti}`)}`;
      const expiresAt = Math.ceil((verified.iat + window) * 1000);
      let fresh: boolean | Promise<boolean>;
      try {
        fresh = replayGuard(key, expiresAt);
      } catch (error) {
        guardFailed(error);
      }
      checkReplayAnswer(fresh instanceof Promise ? await fresh.catch(guardFailed) : fresh);
      return verified;
    },
    currentNonce: () => nonces?.current(),
  };
}

export interface MemoryReplayGuardOptions {
  /**
   * Most proofs remembered at once (default 100 000): more than the proofs accepted within one
   * `iat` window. When it is full of unexpired entries, new proofs are refused with
   * `temporarily_unavailable` rather than forgetting a proof that could then be replayed.
   */
  maxEntries?: number;
  /** Clock, in ms since the epoch (tests). */
  now?: () => number;
}

/**
 * A replay guard in this process's memory: size-capped, entries expire. Enough for one instance;
 * several instances need a shared one ({@link storeReplayGuard}).
 */
export function memoryReplayGuard(options: MemoryReplayGuardOptions = {}): DPoPReplayGuard {
  const maxEntries = options.maxEntries ?? 100_000;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) {
    throw invalidOption("memoryReplayGuard: maxEntries must be a positive integer");
  }
  const now = options.now ?? Date.now;
  const seen = new Map<string, number>();
  const sweep = (at: number, all: boolean) => {
    for (const [key, expiresAt] of seen) {
      if (expiresAt <= at) seen.delete(key);
      // Entries arrive roughly in expiry order: stop at the first live one unless sweeping all.
      else if (!all) return;
    }
  };
  return (key, expiresAt) => {
    const at = now();
    sweep(at, false);
    const known = seen.get(key);
    if (known !== undefined && known > at) return false;
    if (seen.size >= maxEntries) {
      sweep(at, true);
      if (seen.size >= maxEntries) {
        throw new OAuthError("temporarily_unavailable", {
          description: "The DPoP proof cannot be checked right now",
          detail: "replay guard full",
        });
      }
    }
    seen.delete(key);
    seen.set(key, expiresAt);
    return true;
  };
}

/**
 * A replay guard backed by a store's single-use markers (the authorization server's
 * `AuthorizationStore.useOnce`), shared by every instance using that store.
 */
export function storeReplayGuard(
  store: { useOnce(key: string, expiresAt: number, now: number): Promise<boolean> },
  now: () => number = Date.now,
): DPoPReplayGuard {
  return (key, expiresAt) => store.useOnce(key, expiresAt, now());
}
