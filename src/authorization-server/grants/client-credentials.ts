/**
 * `grant_type=client_credentials` (OAuth 2.1 §4.2): a confidential client acting for itself.
 */
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { requireConfidentialClient } from "../policy/grants.js";
import { requireGrantWithoutUser } from "../policy/grants-without-user.js";
import { servedResource } from "../policy/resources.js";
import { grantableScopes } from "../policy/scopes.js";
import { issueGrantWithoutRefresh, requestedScopes, required } from "./common.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";

/**
 * `grant_type=client_credentials` (OAuth 2.1 §4.2): confidential clients only (§4.2.1) that the
 * operator knows (policy/grants-without-user.ts: a self-registered client acts for a user), a resource
 * is required (spec "Resource parameter"), the scope is what policy/scopes.ts allows, and no refresh token is issued (§4.2.3 "SHOULD NOT").
 */
export async function clientCredentialsGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  requireConfidentialClient(client, "client_credentials");
  const allowance = requireGrantWithoutUser(ctx, client, "client_credentials");
  const resource = servedResource(ctx, required(form, "resource"));
  const scopes = grantableScopes(ctx, client, {
    resource,
    requested: requestedScopes(form.get("scope")),
    ...(allowance.scopes ? { allowance: allowance.scopes } : {}),
  });
  const { grantId, response } = await issueGrantWithoutRefresh(
    ctx,
    { clientId: client.clientId, sub: client.clientId, resource, scopes },
    dpop.jkt,
  );
  ctx.audit?.({
    type: "grant_issued",
    grant_type: "client_credentials",
    client_id: client.clientId,
    grant_id: grantId,
  });
  return response;
}
