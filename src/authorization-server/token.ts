import { OAuthError } from "../shared/errors.js";
import { authenticateClient } from "./client-authentication.js";
import type { Endpoint, ServerContext } from "./context.js";
import { authorizationCodeGrant } from "./grants/authorization-code.js";
import { clientCredentialsGrant } from "./grants/client-credentials.js";
import { refreshTokenGrant } from "./grants/refresh-token.js";
import { supportedGrantTypes } from "./metadata.js";
import { endpointUrl } from "./paths.js";
import { readForm } from "./request-body.js";

/** Records first use so an unused dynamic registration's expiry is lifted (SECURITY.md "Dynamic registration"). */
async function markUsed(
  ctx: ServerContext,
  client: { clientId: string; expiresAt?: number; lastUsedAt?: number },
) {
  if (client.expiresAt === undefined && client.lastUsedAt !== undefined) return;
  try {
    await ctx.store.markClientUsed(client.clientId, ctx.now());
  } catch (error) {
    ctx.log.warn("mark_client_used_failed", { client_id: client.clientId, reason: (error as Error).message });
  }
}

/**
 * The token endpoint (OAuth 2.1 §3.2): form body only, client authentication, then one grant type.
 * Every response, success or error, carries `Cache-Control: no-store` (RFC 6749 §5.1).
 */
export const handleToken: Endpoint = async (request, ctx) => {
  const form = await readForm(request);
  const grantType = form.get("grant_type");
  if (grantType === undefined)
    throw new OAuthError("invalid_request", { description: "grant_type is required" });
  if (!supportedGrantTypes(ctx).includes(grantType)) {
    throw new OAuthError("unsupported_grant_type", { description: "grant_type is not supported" });
  }
  const { client } = await authenticateClient(request, form, ctx, endpointUrl(ctx.options.issuer, "token"));
  // RFC 6749 §5.2 unauthorized_client: the client is not registered for this grant type
  // (RFC 7591 §2: undeclared grant_types default to ["authorization_code"]).
  const registered = client.grantTypes.length > 0 ? client.grantTypes : ["authorization_code"];
  if (!registered.includes(grantType)) {
    throw new OAuthError("unauthorized_client", {
      description: "client is not allowed to use this grant_type",
    });
  }
  let response: Response;
  switch (grantType) {
    case "authorization_code":
      response = await authorizationCodeGrant(ctx, client, form);
      break;
    case "refresh_token":
      response = await refreshTokenGrant(ctx, client, form);
      break;
    default:
      response = await clientCredentialsGrant(ctx, client, form);
  }
  await markUsed(ctx, client);
  return response;
};
