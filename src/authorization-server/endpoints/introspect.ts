/**
 * The introspection endpoint (RFC 7662), for pre-registered confidential clients.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { formatScope } from "../../shared/scopes.js";
import { authenticateClient } from "../clients/authentication.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";
import { readForm } from "../core/request-body.js";
import { activeAccessToken } from "../grants/active-access-token.js";
import { accessTokenScopes, required } from "../grants/common.js";

const INACTIVE = { active: false } as const;

async function introspectAccessToken(
  ctx: ServerContext,
  token: string,
): Promise<Record<string, unknown> | undefined> {
  const claims = await ctx.keys.verifyAccessToken(token);
  if (!claims) return undefined;
  // Its grant live and its jti not revoked (grants/active-access-token.ts): no row per token.
  if (!(await activeAccessToken(ctx, claims.jti))) return INACTIVE;
  return {
    active: true,
    scope: claims.scope,
    client_id: claims.client_id,
    sub: claims.sub,
    aud: claims.aud,
    iss: claims.iss,
    exp: claims.exp,
    iat: claims.iat,
    jti: claims.jti,
    // RFC 9449 §6.2: a bound token's `cnf` goes to the resource server, and `token_type` MUST
    // then be DPoP (a resource server must not accept it as a bearer token, §7.2).
    ...(claims.cnf === undefined ? { token_type: "Bearer" } : { token_type: "DPoP", cnf: claims.cnf }),
  };
}

async function introspectRefreshToken(
  ctx: ServerContext,
  token: string,
): Promise<Record<string, unknown> | undefined> {
  const record = await ctx.store.getRefreshToken(sha256Base64url(token));
  if (!record) return undefined;
  const now = ctx.now();
  if (record.rotatedAt !== undefined || record.revokedAt !== undefined || record.expiresAt <= now)
    return INACTIVE;
  const grant = await ctx.store.getGrant(record.grantId);
  if (!grant || grant.revokedAt !== undefined || grant.expiresAt <= now) return INACTIVE;
  return {
    active: true,
    scope: formatScope(accessTokenScopes(record.scopes)),
    client_id: record.clientId,
    ...(grant.userId === undefined ? {} : { sub: grant.userId }),
    aud: grant.resource,
    iss: ctx.options.issuer,
    exp: Math.floor(Math.min(record.expiresAt, grant.expiresAt) / 1000),
    iat: Math.floor(record.createdAt / 1000),
    token_type: "refresh_token",
  };
}

/**
 * Token introspection (RFC 7662 §2). The caller must authenticate as a confidential client that an
 * operator configured (a resource server's credentials): RFC 7662 §2.1 requires authorization "to
 * prevent token scanning attacks", and a self-registered client is no such authority. Invalid,
 * expired, revoked and unknown tokens are all `{"active": false}` (§2.2).
 */
export const handleIntrospect: Endpoint = async (request, ctx) => {
  const form = await readForm(request);
  const { client, method } = await authenticateClient(
    request,
    form,
    ctx,
    endpointUrl(ctx.options.issuer, "introspect"),
  );
  if (method === "none" || client.source !== "preregistered") {
    throw new OAuthError("invalid_client", {
      description: "introspection requires the credentials of a configured confidential client",
    });
  }
  const token = required(form, "token");
  const order =
    form.get("token_type_hint") === "refresh_token"
      ? [introspectRefreshToken, introspectAccessToken]
      : [introspectAccessToken, introspectRefreshToken];
  let result: Record<string, unknown> | undefined;
  for (const look of order) {
    result = await look(ctx, token);
    if (result) break;
  }
  return jsonResponse(result ?? INACTIVE, { headers: NO_STORE });
};
