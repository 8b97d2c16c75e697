/**
 * DPoP (RFC 9449) for the client: one ES256 key pair per client registration, proofs for token
 * requests (§5) and resource requests (§7), and server-provided nonces (§8, §9) cached per origin.
 *
 * The private key is kept in the token store as a JWK, so the encrypted file store persists it
 * encrypted with everything else (spec "Token theft" 1: a DPoP key is as sensitive as the tokens it
 * binds). Proofs are signed with jose.
 */
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT } from "jose";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import type { StoredDPoPKey } from "../stores/types.js";
import type { FetchLike } from "./http.js";

export type { StoredDPoPKey };

/** The one algorithm we sign proofs with (RFC 9449 §4.2: asymmetric, never `none`). */
export const DPOP_ALGORITHM = "ES256";

/**
 * Whether to ask for DPoP-bound tokens (RFC 9449 §5).
 *
 * `"auto"`: the resource offers DPoP (a `DPoP` challenge, RFC 9449 §7.1, or DPoP fields in its
 * metadata) and the authorization server can bind tokens with ES256 (it lists ES256 in
 * `dpop_signing_alg_values_supported`, or lists nothing, since RFC 8414 metadata is optional).
 * An authorization server advertising DPoP is not enough on its own: a resource that only speaks
 * `Bearer` refuses the `DPoP` scheme, and a token bound to a key cannot be sent as a bearer token
 * to a resource that checks bindings (RFC 9449 §7.2).
 * `"always"`: whenever the authorization server lists ES256 or the resource offers DPoP.
 */
export function wantsDPoP(
  mode: "auto" | "always" | "never",
  metadata: AuthorizationServerMetadata,
  resource: { offersDPoP?: boolean; boundTokensRequired?: boolean; algorithms?: readonly string[] } = {},
): boolean {
  if (mode === "never") return false;
  const algs = metadata.dpop_signing_alg_values_supported;
  const serverCan = algs === undefined ? undefined : algs.includes(DPOP_ALGORITHM);
  const resourceOffers =
    resource.offersDPoP === true ||
    resource.boundTokensRequired === true ||
    (resource.algorithms?.includes(DPOP_ALGORITHM) ?? false);
  if (mode === "always") return serverCan === true || (resourceOffers && serverCan !== false);
  return resourceOffers && serverCan !== false;
}

/** Creates a fresh key for a registration. */
export async function createDPoPKey(issuer: string, clientId: string): Promise<StoredDPoPKey> {
  const { privateKey, publicKey } = await generateKeyPair(DPOP_ALGORITHM, { extractable: true });
  const privateJwk = await exportJWK(privateKey);
  const { kty, crv, x, y } = await exportJWK(publicKey);
  return {
    issuer,
    client_id: clientId,
    alg: DPOP_ALGORITHM,
    private_jwk: privateJwk,
    // Only the public members go into proofs (RFC 9449 §4.2: jwk MUST NOT contain a private key).
    public_jwk: { kty, crv, x, y },
    created_at: Date.now(),
  };
}

/** `htu` (RFC 9449 §4.2): the request URI without query and fragment. */
export function htuOf(url: string | URL): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}

async function sha256Base64url(value: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(value));
  return Buffer.from(digest).toString("base64url");
}

/**
 * Signs proofs with one key and remembers the latest `DPoP-Nonce` each origin sent (RFC 9449 §8:
 * the nonce is used until the server provides another one).
 */
export class DPoPSigner {
  readonly #stored: StoredDPoPKey;
  readonly #nonces: Map<string, string>;
  #privateKey: Promise<CryptoKey> | undefined;
  #thumbprint: Promise<string> | undefined;

  /** `nonces` may be shared by several signers (nonces belong to servers, not keys). */
  constructor(stored: StoredDPoPKey, nonces: Map<string, string> = new Map()) {
    this.#stored = stored;
    this.#nonces = nonces;
  }

  get issuer(): string {
    return this.#stored.issuer;
  }

  get clientId(): string {
    return this.#stored.client_id;
  }

  /** RFC 7638 SHA-256 thumbprint of the public key (the `cnf.jkt` of bound tokens). */
  thumbprint(): Promise<string> {
    this.#thumbprint ??= calculateJwkThumbprint(this.#stored.public_jwk, "sha256");
    return this.#thumbprint;
  }

  /** The nonce last received from the origin of `url`, if any. */
  nonceFor(url: string | URL): string | undefined {
    return this.#nonces.get(new URL(url).origin);
  }

  /** Records a `DPoP-Nonce` response header (RFC 9449 §8.2, §9). */
  observe(url: string | URL, response: Response): void {
    const nonce = response.headers.get("dpop-nonce");
    // RFC 9449 §8.1: the nonce is NQCHAR (printable ASCII without the double quote).
    if (nonce && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(nonce)) this.#nonces.set(new URL(url).origin, nonce);
  }

  /**
   * A proof for one request (RFC 9449 §4.2): `typ` dpop+jwt, the public `jwk`, `jti`, `htm`,
   * `htu`, `iat`, the origin's nonce when one is known, and `ath` when an access token is sent.
   */
  async proof(method: string, url: string | URL, accessToken?: string): Promise<string> {
    this.#privateKey ??= importJWK(this.#stored.private_jwk, DPOP_ALGORITHM, {
      extractable: false,
    }) as Promise<CryptoKey>;
    const key = await this.#privateKey;
    const nonce = this.nonceFor(url);
    const payload: Record<string, unknown> = {
      jti: crypto.randomUUID(),
      htm: method.toUpperCase(),
      htu: htuOf(url),
    };
    if (nonce !== undefined) payload.nonce = nonce;
    // RFC 9449 §7.1: `ath` is the base64url SHA-256 of the ASCII access token.
    if (accessToken !== undefined) payload.ath = await sha256Base64url(accessToken);
    return new SignJWT(payload)
      .setProtectedHeader({ alg: DPOP_ALGORITHM, typ: "dpop+jwt", jwk: this.#stored.public_jwk })
      .setIssuedAt()
      .sign(key);
  }

  /** A fetch that records the nonces of every response it sees. */
  observing(fetchImpl: FetchLike): FetchLike {
    return async (input, init) => {
      const response = await fetchImpl(input, init);
      const url = input instanceof Request ? input.url : String(input);
      this.observe(url, response);
      return response;
    };
  }
}
