/**
 * What the grants a user approved in the browser (the authorization code, the device code) issue
 * the same way: the tokens written with the new grant inside the store's transaction, and, once it
 * is committed, the signed access token, the audit event, the retirement of superseded grants (unless
 * the store did it in the transaction) and the token response (RFC 6749 §5.1).
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { formatScope } from "../../shared/scopes.js";
import type { ClientRecord, GrantRecord, IssuedTokens } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { randomToken } from "../core/random.js";
import { bindKeptTokens } from "../vault/upstream-tokens.js";
import {
  accessTokenOf,
  accessTokenScopes,
  type DrawnAccessToken,
  newAccessToken,
  signAccessToken,
  tokenResponse,
} from "./common.js";
import { grantLifetimes } from "./refresh-policy.js";
import { retireSupersededGrants } from "./superseded-grants.js";

/** Tokens drawn before the store's transaction; written only if the grant is created. */
export interface DrawnTokens {
  now: number;
  /** The access token's times and unique id; its `jti` names the grant (common.ts accessTokenOf). */
  access: DrawnAccessToken;
  /** Written only when the approval allows refresh (refresh-policy.ts). */
  refreshToken?: string;
}

export function drawTokens(ctx: ServerContext): DrawnTokens {
  const refreshToken = ctx.options.refresh.enabled ? randomToken() : undefined;
  return {
    now: ctx.now(),
    access: newAccessToken(ctx),
    ...(refreshToken === undefined ? {} : { refreshToken }),
  };
}

/**
 * What the store writes with the new grant: the access token, the refresh token (idle expiry
 * within the grant's absolute lifetime, refresh-policy.ts `grantLifetimes`), and the DPoP key the
 * grant's refresh tokens are bound to, if any (RFC 9449 §5).
 */
export function tokensToWrite(
  ctx: ServerContext,
  drawn: DrawnTokens,
  grantId: string,
  scopes: readonly string[],
  bindGrantTo: string | undefined,
): IssuedTokens {
  const { idleMs, absoluteMs } = grantLifetimes(ctx, scopes);
  return {
    // A store of contract version 2 writes no row for it; one of version 1 still does.
    accessToken: accessTokenOf(grantId, drawn.access),
    ...(drawn.refreshToken === undefined
      ? {}
      : {
          refreshToken: {
            tokenHash: sha256Base64url(drawn.refreshToken),
            createdAt: drawn.now,
            expiresAt: drawn.now + Math.min(idleMs, absoluteMs),
          },
        }),
    grantExpiresAt: drawn.now + absoluteMs,
    ...(bindGrantTo === undefined ? {} : { grantDpopJkt: bindGrantTo }),
  };
}

/**
 * The token response for a grant the store has just created: the RFC 9068 access token (bound to
 * `dpopJkt` when the request proved a key), a `grant_issued` audit event, the grants it supersedes
 * retired, and the refresh token when one was written. `scope` lists `offline_access` only when a
 * refresh token comes with it.
 */
export async function approvedGrantResponse(
  ctx: ServerContext,
  client: ClientRecord,
  issued: { grant: GrantRecord; refreshIssued: boolean; superseded?: string[] },
  drawn: DrawnTokens,
  grantType: "authorization_code" | "urn:ietf:params:oauth:grant-type:device_code",
  dpopJkt: string | undefined,
): Promise<Response> {
  const { grant } = issued;
  if (grant.userId === undefined) throw new Error(`${grantType} grant has no user`);
  const accessToken = await signAccessToken(
    ctx,
    accessTokenOf(grant.grantId, drawn.access),
    { sub: grant.userId, clientId: client.clientId, resource: grant.resource, scopes: grant.scopes },
    dpopJkt,
  );
  ctx.audit?.({
    type: "grant_issued",
    grant_type: grantType,
    client_id: client.clientId,
    grant_id: grant.grantId,
  });
  // Before the retirement: the new grant takes the session's kept upstream tokens, the old lose theirs.
  await bindKeptTokens(ctx, grant);
  await retireSupersededGrants(ctx, grant, issued.superseded);
  const refreshToken = issued.refreshIssued ? drawn.refreshToken : undefined;
  return tokenResponse(
    {
      access_token: accessToken,
      expires_in: ctx.options.accessTokenTtlSeconds,
      scope: formatScope(refreshToken !== undefined ? grant.scopes : accessTokenScopes(grant.scopes)),
      ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
    },
    dpopJkt,
  );
}
