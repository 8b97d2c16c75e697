/**
 * `grant_type=authorization_code` (OAuth 2.1 §4.1.3): the code is redeemed once, by the client it
 * was issued to, with the PKCE verifier (RFC 7636 §4.6), redirect URI and resource it was bound to.
 */
import { timingSafeEqual } from "node:crypto";
import { sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import type { AuthorizationCodeRecord, ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { refuseGrantOfDisabledUser } from "../core/user-accounts.js";
import { approvedGrantResponse, drawTokens, tokensToWrite } from "./approved-grant.js";
import { matchResource, required } from "./common.js";
import { codeDPoPProblem, grantDPoPBinding, type TokenRequestDPoP } from "./dpop-binding.js";
import { supersededInSignIn } from "./superseded-grants.js";

/** RFC 7636 §4.1: code_verifier = 43*128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/** Whether `redirect_uri` in the token request matches the one the code was issued for (OAuth 2.1 §4.1.3). */
function redirectUriMatches(code: AuthorizationCodeRecord, sent: string | undefined): boolean {
  // Exact string comparison (spec "Redirect URIs": exact match; DESIGN.md principle 4).
  if (sent !== undefined) return sent === code.redirectUri;
  // OAuth 2.1 §4.1.3 (RFC 6749 §4.1.3): required if the authorization request included it.
  return !code.redirectUriSent;
}

/**
 * RFC 7636 §4.6: BASE64URL(SHA256(ASCII(code_verifier))) == code_challenge, as exact strings,
 * compared in constant time. One hash: the computed challenge's bytes are compared with the stored
 * one's directly. Only the stored challenge's length can show in the timing, and it is public (43
 * characters for every S256 challenge the authorization endpoint accepts); a stored value of
 * another length, or with any character outside ASCII, never equals the computed one.
 */
function pkceMatches(codeVerifier: string, codeChallenge: string): boolean {
  const computed = Buffer.from(sha256Base64url(codeVerifier), "latin1");
  const stored = Buffer.from(codeChallenge, "utf8");
  return computed.length === stored.length && timingSafeEqual(computed, stored);
}

/**
 * The checks a code must pass at redemption (run by the store inside the redemption transaction):
 * bound to the client, the redirect URI, the PKCE verifier, the resource and, with `dpop_jkt`, the
 * DPoP key (OAuth 2.1 §4.1.3, RFC 7636 §4.6, RFC 8707 §2, RFC 9449 §10). Exported for tests.
 */
export function codeCheck(
  client: ClientRecord,
  form: { redirectUri: string | undefined; codeVerifier: string; resource: string },
  dpop: TokenRequestDPoP = {},
): (code: AuthorizationCodeRecord) => OAuthError | undefined {
  return (code) => {
    const invalid = (detail: string) =>
      new OAuthError("invalid_grant", { description: "authorization code is invalid", detail });
    if (code.clientId !== client.clientId) return invalid("code was issued to another client");
    if (!redirectUriMatches(code, form.redirectUri)) return invalid("redirect_uri does not match");
    if (code.codeChallengeMethod !== "S256") return invalid("unsupported code challenge method");
    if (!pkceMatches(form.codeVerifier, code.codeChallenge)) {
      return invalid("PKCE verification failed");
    }
    // RFC 8707 §2 / spec "Resource parameter": the token request names the same resource.
    if (form.resource !== code.resource) {
      return new OAuthError("invalid_target", {
        description: "resource does not match the authorization request",
      });
    }
    // RFC 9449 §10: a code bound with `dpop_jkt` needs a proof of that key.
    return codeDPoPProblem(code.dpopJkt, dpop);
  };
}

/**
 * `grant_type=authorization_code` (OAuth 2.1 §4.1.3). The code is redeemed atomically: every
 * attempt consumes it, and a second use revokes the grant the first one created.
 */
export async function authorizationCodeGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  const code = required(form, "code");
  const codeVerifier = required(form, "code_verifier");
  // RFC 7636 §4.1 syntax; PKCE is mandatory (OAuth 2.1 §4.1.3).
  if (!CODE_VERIFIER.test(codeVerifier)) {
    throw new OAuthError("invalid_request", {
      description: "code_verifier must be 43-128 unreserved characters",
    });
  }
  // Spec "Resource parameter": MUST be sent in the token request too.
  const resource = matchResource(ctx, required(form, "resource"));
  const redirectUri = form.get("redirect_uri");

  // Drawn before the transaction; written only when the code allows refresh (refresh-policy.ts).
  const drawn = drawTokens(ctx);
  // RFC 9449 §5: a public client's refresh tokens are bound to the proof's key.
  const bindGrantTo = grantDPoPBinding(client, dpop);
  const codeHash = sha256Base64url(code);
  const check = codeCheck(client, { redirectUri, codeVerifier, resource }, dpop);
  const toWrite = (redeemed: AuthorizationCodeRecord) =>
    tokensToWrite(ctx, drawn, redeemed.grantId, redeemed.scopes, bindGrantTo);
  // The grants the new one supersedes, retired in the same transaction (superseded-grants.ts).
  const supersedes = supersededInSignIn(ctx);
  // A code this server sealed carries its record (sealed-code.ts); any other is looked up (a code
  // stored at issue, or one that is not a code of this server, which the store does not find).
  const sealed = ctx.codeSealer?.open(code, drawn.now);
  const result =
    sealed && ctx.store.redeemSealedAuthorizationCode
      ? await ctx.store.redeemSealedAuthorizationCode(
          { ...sealed, codeHash },
          drawn.now,
          check,
          toWrite,
          supersedes,
        )
      : await ctx.store.redeemAuthorizationCode(codeHash, drawn.now, check, toWrite, supersedes);
  switch (result.status) {
    case "issued":
      break;
    case "refused":
      throw result.error;
    case "replayed":
      ctx.audit?.({ type: "authorization_code_replayed", client_id: client.clientId });
      throw new OAuthError("invalid_grant", {
        description: "authorization code is invalid",
        detail: "code replayed",
      });
    case "expired":
      throw new OAuthError("invalid_grant", {
        description: "authorization code is invalid",
        detail: "code expired",
      });
    default:
      throw new OAuthError("invalid_grant", {
        description: "authorization code is invalid",
        detail: "unknown code",
      });
  }
  // An account disabled or removed since the code was issued gets nothing (issue 26; RFC 6749
  // §5.2 invalid_grant: the grant's resource owner no longer authorizes). Read after the store
  // committed the grant, which this revokes: a sealed code had no row the disabling could find.
  if (await refuseGrantOfDisabledUser(ctx.store, result.grant.grantId, result.grant.userId, drawn.now)) {
    throw new OAuthError("invalid_grant", {
      description: "authorization code is invalid",
      detail: "the user's account is disabled",
    });
  }
  return approvedGrantResponse(ctx, client, result, drawn, "authorization_code", dpop.jkt);
}
