/**
 * Presenting a token to a protected resource: the `Authorization` header (RFC 6750 §2.1, spec
 * "Access token usage"), or for a DPoP-bound token the DPoP scheme with a proof (RFC 9449 §7.1),
 * and recognising a resource's demand for a DPoP nonce (RFC 9449 §9). Internal to the client.
 */
import { findChallenge, parseWWWAuthenticate } from "../../shared/www-authenticate.js";
import type { DPoPSigner } from "../protocol/dpop.js";
import type { StoredTokens } from "../stores/types.js";
import { type AuthState, dpopFor, isDPoPToken } from "./state.js";

/** RFC 9449 §9: a 401 whose `DPoP` challenge says `use_dpop_nonce` and that carries `DPoP-Nonce`. */
export function isNonceChallenge(response: Response): boolean {
  const header = response.headers.get("www-authenticate");
  if (response.status !== 401 || !header || !response.headers.has("dpop-nonce")) return false;
  return findChallenge(parseWWWAuthenticate(header), "DPoP")?.params.error === "use_dpop_nonce";
}

/**
 * The request with the token. A DPoP-bound token goes with the DPoP scheme and a fresh proof
 * over method, URL and token (RFC 9449 §7.1); a bound token whose key is gone is not sent.
 */
export async function withToken(
  state: AuthState,
  request: Request,
  tokens: StoredTokens | undefined,
): Promise<{ request: Request; signer?: DPoPSigner }> {
  const copy = request.clone();
  if (!tokens) return { request: copy };
  const headers = new Headers(copy.headers);
  if (isDPoPToken(tokens)) {
    const signer = await dpopFor(state, tokens.issuer, tokens.client_id, false);
    if (!signer || (tokens.dpop_jkt !== undefined && tokens.dpop_jkt !== (await signer.thumbprint()))) {
      return { request: copy };
    }
    headers.set("authorization", `DPoP ${tokens.access_token}`);
    headers.set("dpop", await signer.proof(copy.method, copy.url, tokens.access_token));
    return { request: new Request(copy, { headers }), signer };
  }
  // RFC 6750 §2.1 and spec "Access token usage": the header on every request, never the query.
  headers.set("authorization", `Bearer ${tokens.access_token}`);
  return { request: new Request(copy, { headers }) };
}
