/**
 * The revocation endpoint (RFC 7009): a refresh token ends its grant, an access token only itself.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { NO_STORE } from "../../shared/http.js";
import { parseScope } from "../../shared/scopes.js";
import { grantIdOfAccessTokenId } from "../../storage/access-token-id.js";
import { authenticateClient } from "../clients/authentication.js";
import type { Endpoint } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";
import { readForm } from "../core/request-body.js";
import { required } from "../grants/common.js";

function revoked(): Response {
  // RFC 7009 §2.2: 200 whether or not the token was valid; the body is ignored by clients.
  return new Response(null, { status: 200, headers: NO_STORE });
}

/**
 * Token revocation (RFC 7009 §2). A refresh token ends its whole grant (RFC 7009 §2.1 "SHOULD also
 * invalidate all access tokens based on the same authorization grant"); an access token (a JWT
 * signed by this server) ends only itself. `token_type_hint` is only a hint: both kinds are tried.
 * A token of another client is left alone and the answer is still 200, so revocation cannot be used
 * to probe which tokens exist.
 */
export const handleRevoke: Endpoint = async (request, ctx) => {
  const form = await readForm(request);
  const { client } = await authenticateClient(request, form, ctx, endpointUrl(ctx.options.issuer, "revoke"));
  const token = required(form, "token");
  const now = ctx.now();

  const tryRefresh = async (): Promise<boolean> => {
    const record = await ctx.store.getRefreshToken(sha256Base64url(token));
    if (!record) return false;
    if (record.clientId !== client.clientId) {
      ctx.log.warn("revocation_refused", {
        client_id: client.clientId,
        reason: "refresh token of another client",
      });
      return true;
    }
    await ctx.store.revokeGrant(record.grantId, now);
    ctx.audit?.({
      type: "grant_revoked",
      client_id: client.clientId,
      grant_id: record.grantId,
      by: "client",
    });
    return true;
  };
  const tryAccess = async (): Promise<boolean> => {
    const claims = await ctx.keys.verifyAccessToken(token);
    if (!claims) return false;
    // RFC 7009 §2.1: only the client the token was issued to may revoke it. The `client_id` claim
    // is what the server signed (a row, where one exists, was written from the same value).
    if (claims.client_id !== client.clientId) {
      ctx.log.warn("revocation_refused", {
        client_id: client.clientId,
        reason: "access token of another client",
      });
      return true;
    }
    const grantId = grantIdOfAccessTokenId(claims.jti);
    // No row was written at issuance (storage contract version 2): the revocation adds the token
    // to the revoked list, expiring with it. A jti without a grant id (issued before the change)
    // has a row, which is marked; the store does nothing for an unknown one.
    await ctx.store.revokeAccessToken(
      claims.jti,
      now,
      grantId === undefined
        ? undefined
        : {
            jti: claims.jti,
            grantId,
            clientId: claims.client_id,
            ...(claims.sub === claims.client_id ? {} : { userId: claims.sub }),
            scopes: [...parseScope(claims.scope)],
            resource: claims.aud,
            createdAt: claims.iat * 1000,
            expiresAt: claims.exp * 1000,
          },
    );
    ctx.audit?.({ type: "access_token_revoked", client_id: client.clientId, jti: claims.jti });
    return true;
  };
  const order =
    form.get("token_type_hint") === "access_token" ? [tryAccess, tryRefresh] : [tryRefresh, tryAccess];
  for (const attempt of order) if (await attempt()) break;
  return revoked();
};
