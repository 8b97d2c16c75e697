/**
 * `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693) for downstream calls: a
 * resource server that received a user's access token exchanges it for one issued for a downstream
 * resource, naming itself in `act` (RFC 8693 §4.1). Which client serves which resource, and which
 * resources it may exchange for, is the operator's `tokenExchange.policies`.
 */
import { decodeJwt } from "jose";

import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { formatScope, parseScope } from "../../shared/scopes.js";
import { accessTokenId } from "../../storage/access-token-id.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { AccessTokenClaims, ActorClaim, ServerContext } from "../core/context.js";
import { newSortableId } from "../core/ids.js";
import type { TokenExchangePolicy } from "../core/options.js";
import { requireConfidentialClient } from "../policy/grants.js";
import { requireGrantWithoutUser } from "../policy/grants-without-user.js";
import { servedResource } from "../policy/resources.js";
import { grantableScopes } from "../policy/scopes.js";
import { activeAccessToken } from "./active-access-token.js";
import { accessTokenScopes, requestedScopes, required } from "./common.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";

export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
/** RFC 8693 §3: the only token type this server takes as a subject and issues. */
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

/** Deepest `act` chain accepted in a subject token: longer chains are refused, not truncated. */
const MAX_ACTOR_DEPTH = 8;

/** RFC 8693 §2.2.2: an invalid or unacceptable subject token is `invalid_request`. */
function refusedSubject(description: string, detail?: string): OAuthError {
  return new OAuthError("invalid_request", { description, ...(detail ? { detail } : {}) });
}

/** The actor chain of a verified subject token, or undefined; a malformed chain is refused. */
function actorChain(value: unknown, depth = 1): ActorClaim | undefined {
  if (value === undefined) return undefined;
  if (depth > MAX_ACTOR_DEPTH) throw refusedSubject("subject_token actor chain is too deep");
  if (typeof value !== "object" || value === null || typeof (value as ActorClaim).sub !== "string") {
    throw refusedSubject("subject_token act claim is malformed");
  }
  const nested = actorChain((value as { act?: unknown }).act, depth + 1);
  return { sub: (value as ActorClaim).sub, ...(nested ? { act: nested } : {}) };
}

/**
 * Whether a grant this server exchanged from `origin` (a grant id, or undefined for a grant made
 * otherwise) descends from a revoked or vanished grant: each origin up the chain must be live (RFC
 * 7009 §2.1: what was derived from a revoked grant goes with it). The store revokes down the chain
 * (AuthorizationStore.revokeGrant); this walk up it also covers a revocation that ran before the
 * derived grant was written. A chain longer than the deepest `act` accepted is refused.
 */
async function revokedUpstream(ctx: ServerContext, origin: string | undefined): Promise<boolean> {
  for (let depth = 0; origin !== undefined; depth++) {
    if (depth > MAX_ACTOR_DEPTH) return true;
    const grant = await ctx.store.getGrant(origin);
    if (!grant || grant.revokedAt !== undefined) return true;
    origin = grant.exchangedFrom;
  }
  return false;
}

/**
 * The subject token as this server issued it: signature with one of our keys, `typ`, `iss` and
 * `exp` (KeyManager.verifyAccessToken), then its state: its grant live and its jti not revoked
 * (the same judgement as introspection, active-access-token.ts), nor any grant it was exchanged from.
 */
async function verifySubjectToken(ctx: ServerContext, token: string) {
  const claims = await ctx.keys.verifyAccessToken(token);
  if (!claims) throw refusedSubject("subject_token is not a valid access token of this server");
  // Its grant live and its jti not revoked (active-access-token.ts): no row per token.
  const active = await activeAccessToken(ctx, claims.jti);
  if (!active) throw refusedSubject("subject_token is not active");
  const { grant } = active;
  // The grants it was exchanged from must be live too.
  if (await revokedUpstream(ctx, grant.grantId)) throw refusedSubject("subject_token is not active");
  const record = { grantId: grant.grantId, userId: grant.userId, expiresAt: claims.exp * 1000 };
  // The signature is verified above, so its payload can be read for the one claim not returned.
  const act = actorChain(decodeJwt(token).act);
  return { claims, record, act };
}

/**
 * The one target of the new token (RFC 8693 §2.1 `resource` and `audience`). Gatehouse's tokens
 * carry one audience, a resource it serves, so both parameters name resources and, when both are
 * given, must name the same one.
 */
function targetResource(ctx: ServerContext, form: Map<string, string>): string {
  const resource = form.get("resource");
  const audience = form.get("audience");
  if (resource === undefined && audience === undefined) {
    throw new OAuthError("invalid_request", { description: "resource or audience is required" });
  }
  const fromResource = resource === undefined ? undefined : servedResource(ctx, resource);
  const fromAudience = audience === undefined ? undefined : servedResource(ctx, audience);
  if (fromResource !== undefined && fromAudience !== undefined && fromResource !== fromAudience) {
    throw new OAuthError("invalid_target", { description: "resource and audience name different resources" });
  }
  return (fromResource ?? fromAudience)!;
}

/**
 * Scopes of the new token: a subset of the subject token's, of the target resource's, of the
 * policy's and of the client's ceiling; never wider (RFC 8693 §2.1 `scope`, §5 "narrowed").
 */
function exchangedScopes(
  ctx: ServerContext,
  client: ClientRecord,
  policy: TokenExchangePolicy,
  target: string,
  subjectScope: string,
  requested: Set<string> | undefined,
): string[] {
  return grantableScopes(ctx, client, {
    resource: target,
    requested,
    ceilings: [
      new Set(accessTokenScopes(parseScope(subjectScope))),
      ...(policy.scopes ? [new Set(policy.scopes)] : []),
    ],
    requireSome: true,
  });
}

/**
 * Token exchange (RFC 8693 §2): an authenticated confidential client, a subject access token of
 * this server issued for a resource the client serves, a target that policy allows, scopes never
 * wider, an `act` claim naming the client, and no refresh token.
 */
export async function tokenExchangeGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  // RFC 8693 §2.1: client authentication; the exchanging party must be a service that proves who it is.
  requireConfidentialClient(client, "token_exchange");
  // The user approved the subject token's client, not this one: only a client the operator knows.
  requireGrantWithoutUser(ctx, client, "token_exchange");
  const subjectToken = required(form, "subject_token");
  if (required(form, "subject_token_type") !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError("invalid_request", {
      description: `subject_token_type must be ${ACCESS_TOKEN_TYPE}`,
    });
  }
  // Delegation is the authenticated client acting; a separate actor token is not taken (RFC 8693 §2.1).
  if (form.has("actor_token") || form.has("actor_token_type")) {
    throw new OAuthError("invalid_request", { description: "actor_token is not supported" });
  }
  const requestedType = form.get("requested_token_type");
  if (requestedType !== undefined && requestedType !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError("invalid_request", {
      description: `requested_token_type must be ${ACCESS_TOKEN_TYPE}`,
    });
  }
  const requested = requestedScopes(form.get("scope"));
  const target = targetResource(ctx, form);
  const subject = await verifySubjectToken(ctx, subjectToken);

  const policies = (ctx.options.tokenExchange?.policies ?? []).filter((p) => p.clientId === client.clientId);
  // The subject token must have been issued for a resource this client serves: a service may only
  // exchange tokens that were sent to it (RFC 8693 §2.2.2 "unacceptable based on policy").
  const served = policies.filter((p) => p.fromResource === subject.claims.aud);
  if (served.length === 0) {
    throw refusedSubject("subject_token was not issued for a resource this client serves");
  }
  const policy = served.find((p) => p.toResources.includes(target));
  if (!policy) {
    throw new OAuthError("invalid_target", {
      description: "this client may not exchange tokens for that resource",
    });
  }
  const scopes = exchangedScopes(ctx, client, policy, target, subject.claims.scope, requested);

  const now = ctx.now();
  // The new token never outlives the one it was exchanged for.
  const expiresAt = Math.min(now + ctx.options.accessTokenTtlSeconds * 1000, subject.record.expiresAt);
  const grantId = newSortableId(now);
  // The jti names the grant (storage/access-token-id.ts): no row is written for the token.
  const access = { jti: accessTokenId(grantId, newSortableId(now)), createdAt: now, expiresAt };
  await ctx.store.createGrantWithAccessToken(
    {
      grantId,
      clientId: client.clientId,
      ...(subject.record.userId === undefined ? {} : { userId: subject.record.userId }),
      scopes,
      resource: target,
      createdAt: now,
      expiresAt,
      // Revoking the subject token's grant revokes this one (RFC 7009 §2.1; the store follows the link).
      exchangedFrom: subject.record.grantId,
    },
    access,
  );
  // A revocation of the chain that ran between the check above and this write found no derived
  // grant to revoke: look again now that it is written. Either that revocation sees this grant, or
  // this look sees the revocation.
  if (await revokedUpstream(ctx, subject.record.grantId)) {
    await ctx.store.revokeGrant(grantId, now);
    throw refusedSubject("subject_token is not active");
  }
  // RFC 8693 §4.1: the current actor outermost, earlier actors nested inside it.
  const act: ActorClaim = { sub: client.clientId, ...(subject.act ? { act: subject.act } : {}) };
  const claims: AccessTokenClaims = {
    sub: subject.claims.sub,
    client_id: client.clientId,
    aud: target,
    scope: formatScope(scopes),
    jti: access.jti,
    iat: Math.floor(now / 1000),
    exp: Math.floor(expiresAt / 1000),
    act,
    // RFC 9449 §6.1: a proof on the exchange binds the new token to that key, as for any grant.
    ...(dpop.jkt === undefined ? {} : { cnf: { jkt: dpop.jkt } }),
  };
  const accessToken = await ctx.keys.signAccessToken(claims);
  ctx.audit?.({
    type: "token_exchanged",
    client_id: client.clientId,
    grant_id: grantId,
    subject_client_id: subject.claims.client_id,
    from_resource: policy.fromResource,
    to_resource: target,
  });
  // RFC 8693 §2.2.1: `issued_token_type` is required; no refresh token for a delegated call.
  return jsonResponse(
    {
      access_token: accessToken,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: dpop.jkt === undefined ? "Bearer" : "DPoP",
      expires_in: Math.max(0, Math.floor((expiresAt - now) / 1000)),
      scope: formatScope(scopes),
    },
    { headers: NO_STORE },
  );
}
