/**
 * Enterprise-managed authorization (the MCP `io.modelcontextprotocol/enterprise-managed-authorization`
 * extension): an identity assertion JWT authorization grant (ID-JAG,
 * draft-ietf-oauth-identity-assertion-authz-grant) from a configured enterprise identity provider,
 * presented with the JWT bearer grant (RFC 7523 §2.1), becomes an access token for the user it
 * names. The user is an external subject: `<issuer>|<sub>` (docs/authorization-server.md).
 */
import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { JWT_BEARER_GRANT, requireConfidentialClient } from "../policy/grants.js";
import { servedResource } from "../policy/resources.js";
import { grantableScopes } from "../policy/scopes.js";
import { issueGrantWithoutRefresh, requestedScopes } from "./common.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";
import {
  assertedScopes,
  ID_JAG_TYP,
  invalidAssertion,
  useAssertionOnce,
  verifyAssertion,
} from "./jwt-assertion.js";

/** The local user id of an identity provider's subject: provider and subject, never e-mail alone. */
export function externalSubject(issuer: string, sub: string): string {
  return `${issuer}|${sub}`;
}

/**
 * The resource the grant is for: the request's `resource` (RFC 8707), or the assertion's when the
 * request names none; the assertion's `resource` claim must name the same one.
 */
function grantedResource(ctx: ServerContext, form: Map<string, string>, claim: unknown): string {
  const claimed = typeof claim === "string" ? [claim] : Array.isArray(claim) ? claim : [];
  if (claimed.length === 0 || !claimed.every((r) => typeof r === "string")) {
    throw invalidAssertion("assertion resource claim is missing or malformed");
  }
  const requested = form.get("resource");
  const target = servedResource(ctx, requested ?? (claimed[0] as string));
  const named = claimed.some((r) => {
    try {
      return servedResource(ctx, r as string) === target;
    } catch {
      return false;
    }
  });
  if (!named) throw invalidAssertion("assertion was issued for another resource");
  return target;
}

/**
 * The identity assertion grant: a client that authenticates (a pre-registered confidential client,
 * or a Client ID Metadata Document client with `private_key_jwt` whose document lists the grant:
 * an ID-JAG acts for the user it names, so policy/grants-without-user.ts does not stand in the way),
 * an ID-JAG (`typ` oauth-id-jag+jwt) from a
 * trusted identity provider whose `aud` is this issuer, whose `client_id` is the authenticated
 * client and whose `resource` is the requested one; scopes within the request, the assertion, the
 * resource and the client's ceiling (policy/scopes.ts); `jti` used once across instances; no refresh token (the client
 * asks the identity provider again, which keeps the enterprise in control).
 */
export async function identityAssertionGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  assertion: string,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  const config = ctx.options.enterpriseAuthorization!;
  // The ID-JAG names a client; only that client, proving who it is, may redeem it.
  requireConfidentialClient(client, "identity_assertion");
  const { payload, issuer } = await verifyAssertion(ctx, assertion, {
    issuers: config.identityProviders,
    audience: () => ctx.options.issuer,
    typ: ID_JAG_TYP,
    maxLifetimeSeconds: config.maxAssertionLifetimeSeconds,
    requiredClaims: ["jti", "client_id", "resource"],
    allowLoopback: config.dangerouslyAllowLoopbackForTesting,
  });
  if (payload.client_id !== client.clientId) throw invalidAssertion("assertion was issued to another client");
  if (issuer.clients && !issuer.clients.includes(client.clientId)) {
    throw new OAuthError("unauthorized_client", {
      description: "client may not use this identity provider's assertions",
    });
  }
  const resource = grantedResource(ctx, form, payload.resource);
  const asserted = assertedScopes(payload.scope);
  const scopes = grantableScopes(ctx, client, {
    resource,
    requested: requestedScopes(form.get("scope")),
    ceilings: asserted ? [asserted] : [],
    requireSome: true,
  });
  // Last: a request refused for another reason does not burn the assertion.
  await useAssertionOnce(ctx, "id-jag", payload);

  const userId = externalSubject(issuer.issuer, payload.sub);
  const { grantId, response } = await issueGrantWithoutRefresh(
    ctx,
    { clientId: client.clientId, userId, sub: userId, resource, scopes },
    dpop.jkt,
  );
  ctx.audit?.({
    type: "grant_issued",
    grant_type: JWT_BEARER_GRANT,
    client_id: client.clientId,
    grant_id: grantId,
    assertion: "identity_assertion",
    assertion_issuer: issuer.issuer,
    user_id: userId,
  });
  return response;
}
