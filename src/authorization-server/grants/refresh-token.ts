/**
 * `grant_type=refresh_token` (OAuth 2.1 §4.3): the checks a refresh token must pass and its
 * rotation on every use (§4.3.1); reuse detection is the store's `rotateRefreshToken`.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { formatScope } from "../../shared/scopes.js";
import type { ClientRecord, GrantRecord, RefreshTokenRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { randomToken } from "../core/random.js";
import {
  accessTokenOf,
  matchResource,
  newAccessToken,
  requestedScopes,
  required,
  signAccessToken,
  tokenResponse,
} from "./common.js";
import { refreshDPoPProblem, type TokenRequestDPoP } from "./dpop-binding.js";
import { reuseGraceMs, stepUpRefusal, successorExpiresAt } from "./refresh-policy.js";

/**
 * The checks a refresh token must pass (run by the store on the live token, inside the rotation):
 * same client (OAuth 2.1 §4.3.1 "bound to the client"), a scope no wider than granted (RFC 6749
 * §6; narrower is allowed, also through the scope hierarchy), the same resource (RFC 8707 §2),
 * grant still within its absolute lifetime, a proof of the grant's DPoP key when it has one (RFC
 * 9449 §5), and no step-up just asked for by a co-hosted resource
 * ({@link stepUpRefusal}). A refusal leaves the old token usable.
 */
export function refreshCheck(
  ctx: ServerContext,
  client: ClientRecord,
  scope: Set<string> | undefined,
  resource: string | undefined,
  now: number,
  dpop: TokenRequestDPoP = {},
): (token: RefreshTokenRecord, grant: GrantRecord) => { error?: OAuthError; scopes?: string[] } {
  return (token, grant) => {
    const invalid = (detail: string) =>
      ({
        error: new OAuthError("invalid_grant", { description: "refresh token is invalid", detail }),
      }) as const;
    if (token.clientId !== client.clientId || grant.clientId !== client.clientId) {
      return invalid("refresh token belongs to another client");
    }
    if (grant.expiresAt <= now) return invalid("grant reached its absolute lifetime");
    // RFC 9449 §5: a bound refresh token is used only with a proof of its key.
    const unbound = refreshDPoPProblem(grant.dpopJkt, dpop);
    if (unbound) return { error: unbound };
    const stepUp = stepUpRefusal(token, grant, now);
    if (stepUp) return { error: stepUp };
    if (resource !== undefined && resource !== grant.resource) {
      return { error: new OAuthError("invalid_target", { description: "resource differs from the grant" }) };
    }
    if (scope === undefined || scope.size === 0) return { scopes: [...token.scopes] };
    const missing = ctx.hierarchy.missing(token.scopes, scope);
    if (missing.size > 0) {
      // RFC 6749 §6: the requested scope MUST NOT include any scope not originally granted.
      return { error: new OAuthError("invalid_scope", { description: "requested scope exceeds the grant" }) };
    }
    return { scopes: [...scope] };
  };
}

/**
 * `grant_type=refresh_token` (OAuth 2.1 §4.3). Every use rotates the token (spec "Token theft":
 * MUST rotate for public clients; Gatehouse rotates for all); a rotated token presented again
 * revokes the whole grant, except inside the race window while none of its successors has been
 * used (refresh-policy.ts `reuseGraceMs`), where it gets a sibling successor.
 */
export async function refreshTokenGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  const presented = required(form, "refresh_token");
  const scope = requestedScopes(form.get("scope"));
  const resourceParam = form.get("resource");
  const resource = resourceParam === undefined ? undefined : matchResource(ctx, resourceParam);

  // A step-up mark still being written in this process must be seen (refresh-policy.ts).
  if (ctx.pendingStepUps?.size) await Promise.all(ctx.pendingStepUps);
  const now = ctx.now();
  const access = newAccessToken(ctx);
  const next = randomToken();
  const result = await ctx.store.rotateRefreshToken(
    sha256Base64url(presented),
    now,
    refreshCheck(ctx, client, scope, resource, now, dpop),
    // The successor keeps the idle lifetime of its grant's kind and never outlives the grant; a
    // sibling issued in a refresh race expires with the first successor (refresh-policy.ts).
    (token, grant) => ({
      // Its jti names the grant; a store of contract version 2 writes no row for it.
      accessToken: accessTokenOf(grant.grantId, access),
      refreshToken: {
        tokenHash: sha256Base64url(next),
        createdAt: now,
        expiresAt: successorExpiresAt(ctx, token, grant, now),
      },
    }),
    reuseGraceMs(ctx),
  );
  switch (result.status) {
    case "issued":
      break;
    case "refused":
      throw result.error;
    case "reused":
      ctx.audit?.({ type: "refresh_token_reused", client_id: client.clientId });
      throw new OAuthError("invalid_grant", {
        description: "refresh token is invalid",
        detail: "rotated token reused",
      });
    default:
      throw new OAuthError("invalid_grant", {
        description: "refresh token is invalid",
        detail: result.status,
      });
  }
  const { grant, scopes } = result;
  // The new access token follows the proof of this request (RFC 9449 §5), bound refresh or not.
  const accessToken = await signAccessToken(
    ctx,
    accessTokenOf(grant.grantId, access),
    { sub: grant.userId ?? client.clientId, clientId: client.clientId, resource: grant.resource, scopes },
    dpop.jkt,
  );
  ctx.audit?.({ type: "grant_refreshed", client_id: client.clientId, grant_id: grant.grantId });
  return tokenResponse(
    {
      access_token: accessToken,
      expires_in: ctx.options.accessTokenTtlSeconds,
      scope: formatScope(scopes),
      refresh_token: next,
    },
    dpop.jkt,
  );
}
