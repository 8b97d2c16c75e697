/**
 * The token endpoint (OAuth 2.1 §3.2): form body, client authentication, then one grant handler.
 */
import { OAuthError } from "../../shared/errors.js";
import { authenticateClient } from "../clients/authentication.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";
import { clientRateLimitKey, enforceTokenRateLimit, tokenClientRateLimitKey } from "../core/rate-limit.js";
import { readForm } from "../core/request-body.js";
import { verifyTokenRequestProof, withDPoPNonce } from "../grants/dpop-binding.js";
import { grantHandler } from "../grants/grant-types.js";
import { mayUseGrantType } from "../policy/grants.js";

/**
 * How stale a client's `lastUsedAt` may get before a token request writes it again: the admin
 * page's "Last used" moves with later logins and refreshes without a write per token request.
 */
export const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Records use: the first use lifts an unused dynamic registration's expiry (SECURITY.md "Dynamic
 * registration"); later uses move `lastUsedAt` once it is older than LAST_USED_RESOLUTION_MS.
 */
async function markUsed(
  ctx: ServerContext,
  client: { clientId: string; expiresAt?: number; lastUsedAt?: number },
) {
  if (
    client.expiresAt === undefined &&
    client.lastUsedAt !== undefined &&
    ctx.now() - client.lastUsedAt < LAST_USED_RESOLUTION_MS
  ) {
    return;
  }
  try {
    await ctx.store.markClientUsed(client.clientId, ctx.now());
  } catch (error) {
    ctx.log.warn("mark_client_used_failed", { client_id: client.clientId, reason: (error as Error).message });
  }
}

/**
 * The token endpoint (OAuth 2.1 §3.2): form body only, client authentication, the DPoP proof if
 * any (RFC 9449 §5), then one grant type. Every response, success or error, carries
 * `Cache-Control: no-store` (RFC 6749 §5.1).
 */
export const handleToken: Endpoint = async (request, ctx, info) => {
  const limits = ctx.options.tokenRateLimit ?? { perClientPerMinute: 0, perAddressPerMinute: 0 };
  const address = clientRateLimitKey(info);
  // Per address before authentication: bounds secret guessing from one place (a high budget, since
  // many users may share an address); per client after it, and only for a client that proved who it
  // is: a public client's id is known to anyone, so counting it would let anyone lock out every user
  // of that application.
  await enforceTokenRateLimit(
    ctx,
    { kind: "address", key: `addr:${address}`, perMinute: limits.perAddressPerMinute },
    { address },
  );
  const form = await readForm(request);
  const grantType = form.get("grant_type");
  if (grantType === undefined)
    throw new OAuthError("invalid_request", { description: "grant_type is required" });
  const handler = grantHandler(ctx, grantType);
  if (!handler) {
    throw new OAuthError("unsupported_grant_type", { description: "grant_type is not supported" });
  }
  const { client } = await authenticateClient(request, form, ctx, endpointUrl(ctx.options.issuer, "token"));
  if (client.tokenEndpointAuthMethod !== "none") {
    const clientKey = tokenClientRateLimitKey(client.clientId);
    await enforceTokenRateLimit(
      ctx,
      {
        kind: clientKey.startsWith("host:") ? "host" : "client",
        key: clientKey,
        perMinute: limits.perClientPerMinute,
      },
      { clientId: client.clientId, address },
    );
  }
  // RFC 6749 §5.2 unauthorized_client: the client may not use this grant type (policy/grants.ts,
  // with the one default for a client that declared none).
  if (!mayUseGrantType(client, grantType)) {
    throw new OAuthError("unauthorized_client", {
      description: "client is not allowed to use this grant_type",
    });
  }
  // RFC 9449 §5: after client authentication, so a client that must send proofs (§5.2) is known
  // and unauthenticated requests cost no store write; before the grant, which binds to the key.
  const dpop = await verifyTokenRequestProof(request, ctx, client);
  const response = await handler(ctx, client, form, dpop);
  await markUsed(ctx, client);
  return withDPoPNonce(response, ctx);
};
