/**
 * DPoP at the token endpoint (RFC 9449): which key, if any, a token request proves, and the rules
 * that bind codes, grants and access tokens to it. Proofs are checked by the one shared verifier
 * (src/shared/dpop-proof.ts); this file decides what the authorization server does with them.
 *
 * - §5: a valid proof binds the access token (`cnf.jkt`, §6.1; `token_type` DPoP); no proof, a
 *   Bearer token as before. A public client's refresh tokens are bound to the key of the proof that
 *   created the grant; a confidential client's are not (they are bound to its authentication).
 * - §5.2: a client registered with `dpop_bound_access_tokens: true` must always send a proof.
 * - §8: optional server nonces; §10: `dpop_jkt` binds the authorization code; §11.1: each proof
 *   `jti` is used once, recorded in the store so every instance refuses a replay.
 */
import { hkdfSync, randomBytes } from "node:crypto";
import {
  type DPoPProofVerifier,
  dpopProofVerifier,
  storeReplayGuard,
  type VerifiedDPoPProof,
} from "../../shared/dpop-proof.js";
import { OAuthError } from "../../shared/errors.js";
import { parseKeyEncryptionKey } from "../../shared/secret-envelope.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";

/** What a token request proved: the thumbprint to bind to, or none (a Bearer token). */
export interface TokenRequestDPoP {
  /** RFC 7638 SHA-256 thumbprint of the proof's key, when the request carried a valid proof. */
  jkt?: string;
}

/** RFC 7638 SHA-256 thumbprints are 32 bytes, base64url without padding: 43 characters. */
const THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;

/**
 * The `dpop_jkt` of an authorization request (RFC 9449 §10): the thumbprint the code will be bound
 * to, checked for form (`invalid_request` otherwise). With DPoP off it is an unknown parameter and
 * ignored (RFC 6749 §3.1).
 */
export function authorizationRequestJkt(ctx: ServerContext, value: string | undefined): string | undefined {
  if (value === undefined || !ctx.options.dpop?.enabled) return undefined;
  if (!THUMBPRINT.test(value)) {
    throw new OAuthError("invalid_request", {
      description: "dpop_jkt must be a base64url SHA-256 JWK thumbprint (43 characters)",
    });
  }
  return value;
}

/**
 * The secret of the token endpoint's DPoP nonces (RFC 9449 §8; the shared verifier's stateless
 * scheme). Derived (HKDF-SHA256, a label of its own) from the first key-encryption key when there
 * is one, so instances configured alike issue and accept the same nonces; otherwise random for
 * this process, and a restart costs each client one `use_dpop_nonce` round trip.
 */
export function dpopNonceSecret(
  issuer: string,
  keyEncryptionKeys: readonly (string | Uint8Array)[] | undefined,
): Uint8Array {
  const first = keyEncryptionKeys?.[0];
  if (first === undefined) return new Uint8Array(randomBytes(32));
  const ikm = parseKeyEncryptionKey(first, "keyEncryptionKeys[0]");
  return new Uint8Array(hkdfSync("sha256", ikm, "", `gatehouse dpop nonce v1\0${issuer}`, 32));
}

/** One verifier per server: it caches imported keys and knows the nonce secret. */
const verifiers = new WeakMap<ServerContext, DPoPProofVerifier>();

function verifierFor(ctx: ServerContext): DPoPProofVerifier | undefined {
  const settings = ctx.options.dpop;
  if (!settings?.enabled) return undefined;
  let verifier = verifiers.get(ctx);
  if (verifier === undefined) {
    verifier = dpopProofVerifier({
      algorithms: settings.signingAlgorithms,
      iatWindowSeconds: settings.iatWindowSeconds,
      // §11.1: through the store, so two instances on one database never both accept a proof.
      replayGuard: storeReplayGuard(ctx.store, ctx.now),
      ...(settings.requireNonce
        ? {
            nonce: {
              secret: settings.nonceSecret,
              lifetimeSeconds: settings.nonceLifetimeSeconds,
              // A nonce of this token endpoint is not one of a resource server sharing the secret (§9).
              context: endpointUrl(ctx.options.issuer, "token"),
            },
          }
        : {}),
      now: ctx.now,
    });
    verifiers.set(ctx, verifier);
  }
  return verifier;
}

/** RFC 9449 §5.2: a client registered with `dpop_bound_access_tokens: true` always sends proofs. */
export function clientRequiresDPoP(client: ClientRecord): boolean {
  return client.metadata.dpop_bound_access_tokens === true;
}

/**
 * Checks the `DPoP` header of a token request (RFC 9449 §5, §4.3) for an authenticated client.
 * `htm` must be POST and `htu` the token endpoint URL built from the configured issuer, never from
 * the request's Host header. Without DPoP configured the header is ignored (a Bearer token).
 * Throws `invalid_dpop_proof` (an invalid or replayed proof, or none from a client that must send
 * one) or `use_dpop_nonce` with a `DPoP-Nonce` header (§8).
 */
export async function verifyTokenRequestProof(
  request: Request,
  ctx: ServerContext,
  client: ClientRecord,
): Promise<TokenRequestDPoP> {
  const verifier = verifierFor(ctx);
  if (verifier === undefined) return {};
  const proof = request.headers.get("dpop");
  if (proof === null) {
    if (clientRequiresDPoP(client)) {
      throw new OAuthError("invalid_dpop_proof", {
        description: "this client must send a DPoP proof with every token request",
        detail: "DPoP header missing for a dpop_bound_access_tokens client",
      });
    }
    return {};
  }
  const verified: VerifiedDPoPProof = await verifier.verify({
    proof,
    method: "POST",
    url: endpointUrl(ctx.options.issuer, "token"),
  });
  return { jkt: verified.jkt };
}

/**
 * The `DPoP-Nonce` a response carries when the server requires nonces (RFC 9449 §8.2: a new nonce
 * may come with a successful response, sparing the client a `use_dpop_nonce` round trip).
 */
export function withDPoPNonce(response: Response, ctx: ServerContext): Response {
  const nonce = verifierFor(ctx)?.currentNonce();
  if (nonce !== undefined) response.headers.set("dpop-nonce", nonce);
  return response;
}

/**
 * RFC 9449 §10: a code whose authorization request carried `dpop_jkt` is redeemed only with a
 * proof of that key ("If they do not match, it MUST reject the request"). The code is bound like
 * to its PKCE verifier, so a mismatch is `invalid_grant`; the attempt consumes the code.
 */
export function codeDPoPProblem(codeJkt: string | undefined, dpop: TokenRequestDPoP): OAuthError | undefined {
  if (codeJkt === undefined) return undefined;
  if (dpop.jkt === codeJkt) return undefined;
  return new OAuthError("invalid_grant", {
    description: "authorization code is invalid",
    detail:
      dpop.jkt === undefined ? "code bound by dpop_jkt, no DPoP proof" : "code bound to another DPoP key",
  });
}

/**
 * RFC 9449 §5: a refresh token bound to a key "MUST" be presented with a proof of that key. No
 * proof is `invalid_dpop_proof` (the client can retry with one); a proof of another key is
 * `invalid_grant` (the token is not valid for that key). Either way the token stays as it was.
 */
export function refreshDPoPProblem(
  grantJkt: string | undefined,
  dpop: TokenRequestDPoP,
): OAuthError | undefined {
  if (grantJkt === undefined || dpop.jkt === grantJkt) return undefined;
  if (dpop.jkt === undefined) {
    return new OAuthError("invalid_dpop_proof", {
      description: "this refresh token requires a DPoP proof",
      detail: "refresh token bound to a DPoP key, no proof",
    });
  }
  return new OAuthError("invalid_grant", {
    description: "refresh token is invalid",
    detail: "refresh token bound to another DPoP key",
  });
}

/**
 * The key a new grant's refresh tokens are bound to (RFC 9449 §5): the proof's, for a public
 * client only. A confidential client's refresh tokens are already bound to its authentication, and
 * leaving them unbound lets it rotate DPoP keys (§5 allows it).
 */
export function grantDPoPBinding(client: ClientRecord, dpop: TokenRequestDPoP): string | undefined {
  return client.tokenEndpointAuthMethod === "none" ? dpop.jkt : undefined;
}
