/**
 * A signed identity assertion for the gateway's HTTP upstream: a short-lived JWT, in a header the
 * operator names, telling the upstream who called (`sub`), through which client (`client_id`) and
 * with which scopes (`scope`), signed by a key only the gateway holds. Plain identity headers are
 * believable only on a link no one else can reach; an assertion is believable wherever the
 * upstream checks the signature, the audience and the lifetime. It is not the client's token (MCP
 * spec, Security "Token passthrough"): the client's token never leaves the gateway.
 *
 * The JWT (RFC 7519), explicitly typed `gatehouse-identity+jwt` (RFC 8725 §3.11) so it cannot be
 * taken for an access token or an ID token: header `alg` (ES256 or EdDSA), `kid` (the RFC 7638
 * thumbprint of the public key); claims `iss` (the gateway's resource URL), `aud` (the upstream
 * URL: an assertion for one upstream is refused by another, RFC 7519 §4.1.3), `sub`, `client_id`,
 * `scope`, `iat`, `exp` (`lifetimeSeconds`, default 60), `jti`. One assertion is reused for the
 * same caller while more than half its lifetime is left (a signature per request costs more than
 * the relay): it is a bearer credential for its lifetime, not single-use, so the upstream must
 * not rely on `jti` being unique per request. docs/gateway.md says how the upstream verifies it.
 */
import { createPrivateKey, createPublicKey, type KeyObject, randomBytes } from "node:crypto";
import { calculateJwkThumbprint, exportJWK, type JWK, SignJWT } from "jose";
import type { AuthInfo } from "../resource-server/types.js";

export const IDENTITY_ASSERTION_TYP = "gatehouse-identity+jwt";
/** At most this many callers' assertions are kept for reuse. */
const MAX_CACHED = 1024;

export interface IdentityAssertionOptions {
  /** The gateway's private key: a P-256 key (ES256) or an Ed25519 key (EdDSA), PEM or KeyObject. */
  privateKey: string | KeyObject;
  /** `iss`: the gateway's resource URL. */
  issuer: string;
  /** `aud`: the upstream's URL. */
  audience: string;
  /** Lifetime in seconds (default 60, at most 300). */
  lifetimeSeconds?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

export interface IdentityAssertionSigner {
  /** The assertion for the caller behind `auth`. */
  assertion(auth: AuthInfo): Promise<string>;
  /** The public key as a JWK (with `kid`, `alg`, `use: "sig"`), for the upstream to verify with. */
  publicJwk(): Promise<JWK>;
}

export function identityAssertionSigner(options: IdentityAssertionOptions): IdentityAssertionSigner {
  const key =
    typeof options.privateKey === "string" ? createPrivateKey(options.privateKey) : options.privateKey;
  if (key.type !== "private") throw new TypeError("the identity assertion key must be a private key");
  const details = key.asymmetricKeyDetails;
  const alg =
    key.asymmetricKeyType === "ed25519"
      ? "EdDSA"
      : key.asymmetricKeyType === "ec" && details?.namedCurve === "prime256v1"
        ? "ES256"
        : undefined;
  // Asymmetric only: the upstream holds the public key and can verify, never sign (RFC 8725 §3.1).
  if (alg === undefined) throw new TypeError("the identity assertion key must be a P-256 or an Ed25519 key");
  const lifetime = options.lifetimeSeconds ?? 60;
  if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > 300) {
    throw new TypeError("lifetimeSeconds must be an integer from 1 to 300");
  }
  const now = options.now ?? Date.now;
  const publicJwk = (async () => {
    const jwk = await exportJWK(createPublicKey(key));
    return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg, use: "sig" } as JWK;
  })();
  const cache = new Map<string, { jwt: string; exp: number }>();

  return {
    publicJwk: () => publicJwk,
    async assertion(auth) {
      const scope = auth.scopes.join(" ");
      const cacheKey = JSON.stringify([auth.subject ?? null, auth.clientId ?? null, scope]);
      const seconds = Math.floor(now() / 1000);
      const cached = cache.get(cacheKey);
      if (cached && cached.exp - seconds > lifetime / 2) return cached.jwt;
      const exp = seconds + lifetime;
      const claims: Record<string, unknown> = { scope };
      if (auth.clientId !== undefined) claims.client_id = auth.clientId;
      const builder = new SignJWT(claims)
        .setProtectedHeader({ alg, typ: IDENTITY_ASSERTION_TYP, kid: (await publicJwk).kid! })
        .setIssuer(options.issuer)
        .setAudience(options.audience)
        .setIssuedAt(seconds)
        .setExpirationTime(exp)
        .setJti(randomBytes(16).toString("base64url"));
      if (auth.subject !== undefined) builder.setSubject(auth.subject);
      const jwt = await builder.sign(key);
      cache.delete(cacheKey);
      if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
      cache.set(cacheKey, { jwt, exp });
      return jwt;
    },
  };
}
