/**
 * Shared test fixtures (not a test file): an issuer with an ES256 key pair, its JWKS served by a
 * real loopback server, and a token signer.
 */
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { type ListeningServer, listen } from "../../src/http/node.js";

export interface TestIssuer {
  issuer: string;
  jwksUri: string;
  /** How many times the JWKS was fetched. */
  readonly jwksFetches: number;
  /** Replaces the published keys (rotation). */
  publish(keys: JWK[]): void;
  publicJwk: JWK;
  privateKey: CryptoKey;
  sign(payload: JWTPayload, options?: SignOptions): Promise<string>;
  close(): Promise<void>;
}

export interface SignOptions {
  typ?: string | null;
  kid?: string;
  alg?: string;
  key?: CryptoKey | Uint8Array;
  /** Lifetime in seconds (default 300); ignored when `exp` is in the payload. */
  expiresIn?: number;
}

export async function newKey(kid: string, alg = "ES256"): Promise<{ publicJwk: JWK; privateKey: CryptoKey }> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  return { publicJwk, privateKey };
}

/** Starts a JWKS server on loopback; `issuer` is its URL. */
export async function startIssuer(): Promise<TestIssuer> {
  const { publicJwk, privateKey } = await newKey("k1");
  let keys: JWK[] = [publicJwk];
  let fetches = 0;
  const server: ListeningServer = await listen(async (request) => {
    if (new URL(request.url).pathname !== "/jwks") return new Response(null, { status: 404 });
    fetches++;
    return new Response(JSON.stringify({ keys }), { headers: { "content-type": "application/json" } });
  });
  const issuer = server.url;
  return {
    issuer,
    jwksUri: `${issuer}/jwks`,
    get jwksFetches() {
      return fetches;
    },
    publish(next) {
      keys = next;
    },
    publicJwk,
    privateKey,
    async sign(payload, options = {}) {
      const now = Math.floor(Date.now() / 1000);
      const header: Record<string, unknown> = { alg: options.alg ?? "ES256", kid: options.kid ?? "k1" };
      if (options.typ !== null) header.typ = options.typ ?? "at+jwt";
      const body: JWTPayload = {
        iss: issuer,
        iat: now,
        exp: now + (options.expiresIn ?? 300),
        jti: crypto.randomUUID(),
        ...payload,
      };
      return new SignJWT(body).setProtectedHeader(header as { alg: string }).sign(options.key ?? privateKey);
    },
    close: () => server.close(),
  };
}
