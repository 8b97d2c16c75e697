/**
 * Workload identity federation (the MCP `io.modelcontextprotocol/auth/wif` extension): a service
 * without a user presents its own JWT from a configured workload identity issuer (a Kubernetes
 * service-account issuer, a CI OIDC issuer) with the JWT bearer grant (RFC 7523 §2.1), and gets a
 * token like client credentials: no user, no refresh token. The operator maps each issuer's
 * subjects to the client they act as.
 */
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { JWT_BEARER_GRANT } from "../policy/grants.js";
import { requireGrantWithoutUser } from "../policy/grants-without-user.js";
import { servedResource } from "../policy/resources.js";
import { grantableScopes } from "../policy/scopes.js";
import { issueGrantWithoutRefresh, requestedScopes, required } from "./common.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";
import { invalidAssertion, useAssertionOnce, verifyAssertion } from "./jwt-assertion.js";

/**
 * The workload grant: a JWT from a trusted workload issuer with the `aud` configured for it (this
 * issuer by default), whose `sub` the operator mapped to the client that sent it; a resource
 * (required, as for client credentials); scopes within the request, the mapping, the resource and
 * the client's ceiling (policy/scopes.ts); `jti` used once unless the issuer is configured otherwise.
 */
export async function workloadIdentityGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  assertion: string,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  const config = ctx.options.workloadIdentity!;
  // No user is behind a workload's token: only for a client the operator knows.
  requireGrantWithoutUser(ctx, client, "workload_identity");
  const resource = servedResource(ctx, required(form, "resource"));
  const { payload, issuer } = await verifyAssertion(ctx, assertion, {
    issuers: config.issuers,
    audience: (i) => i.audience ?? ctx.options.issuer,
    maxLifetimeSeconds: config.maxAssertionLifetimeSeconds,
    requiredClaims: [],
    allowLoopback: config.dangerouslyAllowLoopbackForTesting,
  });
  // The assertion proves which workload is calling; the mapping decides which client it may be.
  const mapping = issuer.subjects.find((s) => s.subject === payload.sub && s.clientId === client.clientId);
  if (!mapping) throw invalidAssertion("this workload may not act as this client");
  const scopes = grantableScopes(ctx, client, {
    resource,
    requested: requestedScopes(form.get("scope")),
    ceilings: mapping.scopes ? [new Set(mapping.scopes)] : [],
    requireSome: true,
  });
  if (issuer.singleUse !== false) await useAssertionOnce(ctx, "workload", payload);

  const { grantId, response } = await issueGrantWithoutRefresh(
    ctx,
    { clientId: client.clientId, sub: client.clientId, resource, scopes },
    dpop.jkt,
  );
  ctx.audit?.({
    type: "grant_issued",
    grant_type: JWT_BEARER_GRANT,
    client_id: client.clientId,
    grant_id: grantId,
    assertion: "workload_identity",
    assertion_issuer: issuer.issuer,
  });
  return response;
}
