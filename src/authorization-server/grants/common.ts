/**
 * What the grants share: the `resource` parameter (RFC 8707 §2), requested scopes (RFC 6749 §3.3),
 * new access tokens (RFC 9068) and the token response (RFC 6749 §5.1).
 */

import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { formatScope, parseScope } from "../../shared/scopes.js";
import { accessTokenId } from "../../storage/access-token-id.js";
import type { ServerContext } from "../core/context.js";
import { newSortableId } from "../core/ids.js";
import { servedResource } from "../policy/resources.js";
import { OFFLINE_ACCESS } from "../policy/scopes.js";

/** The served resource a `resource` parameter names: policy/resources.ts decides, for every grant. */
export const matchResource = servedResource;

/** Parses a `scope` parameter; invalid characters are `invalid_scope` (RFC 6749 §3.3, §5.2). */
export function requestedScopes(value: string | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  try {
    return parseScope(value);
  } catch {
    throw new OAuthError("invalid_scope", { description: "scope contains invalid characters" });
  }
}

/** Scopes carried by an access token: `offline_access` concerns the authorization server only. */
export function accessTokenScopes(scopes: Iterable<string>): string[] {
  return [...scopes].filter((s) => s !== OFFLINE_ACCESS);
}

/** A new access token's times and the unique part of its `jti`, drawn before its grant is known. */
export interface DrawnAccessToken {
  unique: string;
  createdAt: number;
  expiresAt: number;
}

/** Timestamps and the unique id of a new access token. */
export function newAccessToken(ctx: ServerContext): DrawnAccessToken {
  const now = ctx.now();
  return {
    unique: newSortableId(now),
    createdAt: now,
    expiresAt: now + ctx.options.accessTokenTtlSeconds * 1000,
  };
}

/**
 * The access token of grant `grantId`: its `jti` names the grant (storage/access-token-id.ts), so
 * introspection and revocation find the grant without a row per token (docs/storage.md).
 */
export function accessTokenOf(
  grantId: string,
  drawn: DrawnAccessToken,
): { jti: string; createdAt: number; expiresAt: number } {
  return {
    jti: accessTokenId(grantId, drawn.unique),
    createdAt: drawn.createdAt,
    expiresAt: drawn.expiresAt,
  };
}

/**
 * Signs the RFC 9068 access token for a grant. `dpopJkt`, the thumbprint of the key the token
 * request proved (grants/dpop-binding.ts), binds it: `cnf.jkt` (RFC 9449 §6.1).
 */
export async function signAccessToken(
  ctx: ServerContext,
  token: { jti: string; createdAt: number; expiresAt: number },
  grant: { sub: string; clientId: string; resource: string; scopes: Iterable<string> },
  dpopJkt?: string,
): Promise<string> {
  return ctx.keys.signAccessToken({
    sub: grant.sub,
    client_id: grant.clientId,
    aud: grant.resource,
    scope: formatScope(accessTokenScopes(grant.scopes)),
    jti: token.jti,
    iat: Math.floor(token.createdAt / 1000),
    exp: Math.floor(token.expiresAt / 1000),
    ...(dpopJkt === undefined ? {} : { cnf: { jkt: dpopJkt } }),
  });
}

/**
 * A successful token response (RFC 6749 §5.1): JSON, `Cache-Control: no-store`, `Pragma: no-cache`.
 * `token_type` is `DPoP` for a token bound by {@link signAccessToken}'s `dpopJkt` (RFC 9449 §5:
 * MUST), `Bearer` otherwise.
 */
export function tokenResponse(
  body: {
    access_token: string;
    expires_in: number;
    scope: string;
    refresh_token?: string;
  },
  dpopJkt?: string,
): Response {
  const { refresh_token, ...rest } = body;
  return jsonResponse(
    {
      ...rest,
      token_type: dpopJkt === undefined ? "Bearer" : "DPoP",
      ...(refresh_token === undefined ? {} : { refresh_token }),
    },
    { headers: NO_STORE },
  );
}

/**
 * Issues a grant that has one access token and no refresh token (client credentials, OAuth 2.1
 * §4.2.3; the JWT bearer assertions, RFC 7523 §3.1): stores the grant with its access token, signs
 * the token (bound to `dpopJkt` when given) and answers the token response. `userId` is absent when
 * the client acts for itself. The caller audits with the grant id before it answers.
 */
export async function issueGrantWithoutRefresh(
  ctx: ServerContext,
  grant: { clientId: string; userId?: string; sub: string; resource: string; scopes: string[] },
  dpopJkt?: string,
): Promise<{ grantId: string; response: Response }> {
  const { clientId, userId, sub, resource, scopes } = grant;
  const grantId = newSortableId();
  const access = accessTokenOf(grantId, newAccessToken(ctx));
  await ctx.store.createGrantWithAccessToken(
    {
      grantId,
      clientId,
      ...(userId === undefined ? {} : { userId }),
      scopes,
      resource,
      createdAt: access.createdAt,
      expiresAt: access.expiresAt,
    },
    access,
  );
  const accessToken = await signAccessToken(ctx, access, { sub, clientId, resource, scopes }, dpopJkt);
  const response = tokenResponse(
    { access_token: accessToken, expires_in: ctx.options.accessTokenTtlSeconds, scope: formatScope(scopes) },
    dpopJkt,
  );
  return { grantId, response };
}

/** A required parameter, or `invalid_request` naming it. */
export function required(form: Map<string, string>, name: string): string {
  const value = form.get(name);
  if (value === undefined) throw new OAuthError("invalid_request", { description: `${name} is required` });
  return value;
}
