import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { formatScope } from "../../shared/scopes.js";
import type { ClientRecord, GrantRecord, RefreshTokenRecord } from "../../storage/contract.js";
import type { ServerContext } from "../context.js";
import {
  matchResource,
  newAccessToken,
  requestedScopes,
  required,
  signAccessToken,
  tokenResponse,
} from "./common.js";

/**
 * The checks a refresh token must pass (run by the store on the live token, inside the rotation):
 * same client (OAuth 2.1 §4.3.1 "bound to the client"), a scope no wider than granted (RFC 6749
 * §6; narrower is allowed, also through the scope hierarchy), the same resource (RFC 8707 §2),
 * grant still within its absolute lifetime. A refusal leaves the old token usable.
 */
export function refreshCheck(
  ctx: ServerContext,
  client: ClientRecord,
  scope: Set<string> | undefined,
  resource: string | undefined,
  now: number,
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
 * revokes the whole grant.
 */
export async function refreshTokenGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
): Promise<Response> {
  const presented = required(form, "refresh_token");
  const scope = requestedScopes(form.get("scope"));
  const resourceParam = form.get("resource");
  const resource = resourceParam === undefined ? undefined : matchResource(ctx, resourceParam);

  const now = ctx.now();
  const access = newAccessToken(ctx);
  const next = randomToken();
  const result = await ctx.store.rotateRefreshToken(
    sha256Base64url(presented),
    now,
    refreshCheck(ctx, client, scope, resource, now),
    {
      accessToken: access,
      refreshToken: {
        tokenHash: sha256Base64url(next),
        createdAt: now,
        expiresAt: now + ctx.options.refresh.idleTtlSeconds * 1000,
      },
    },
    ctx.options.refresh.reuseGraceSeconds * 1000,
  );
  switch (result.status) {
    case "issued":
      break;
    case "refused":
      throw result.error;
    case "reused":
      ctx.log.warn("refresh_token_reused", { client_id: client.clientId });
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
  const accessToken = await signAccessToken(ctx, access, {
    sub: grant.userId ?? client.clientId,
    clientId: client.clientId,
    resource: grant.resource,
    scopes,
  });
  ctx.log.info("token_issued", {
    grant_type: "refresh_token",
    client_id: client.clientId,
    grant_id: grant.grantId,
  });
  return tokenResponse({
    access_token: accessToken,
    expires_in: ctx.options.accessTokenTtlSeconds,
    scope: formatScope(scopes),
    refresh_token: next,
  });
}
