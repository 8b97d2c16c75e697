/**
 * Keeping an access token usable: refresh ahead of expiry and after a rejection, single-flight
 * (RFC 6749 §6; RFC 9449 §5 for DPoP-bound refresh tokens). Internal to the client.
 */
import type * as oauth from "oauth4webapi";
import { AuthorizationFlowError } from "../errors.js";
import { refreshAccessToken, type TokenRequestContext, toStoredTokens } from "../protocol/tokens.js";
import { type StoredTokens, tokensKey } from "../stores/types.js";
import { type AuthState, bindTokens, clientFor, dpopFor, keysFor, serverMetadata } from "./state.js";

/**
 * How long before expiry to refresh: `refreshSkewSeconds` (default 30 s), but never more than a
 * third of the token's own lifetime. A fixed lead at or above the lifetime (a 10 s or 30 s demo
 * token) would refresh before every single call; scaled, a token is used for two thirds of its life.
 */
function refreshLeadMs(tokens: StoredTokens, refreshSkewSeconds: number | undefined): number {
  // A lead the caller chose is used as given.
  if (refreshSkewSeconds !== undefined) return refreshSkewSeconds * 1000;
  const lead = DEFAULT_REFRESH_LEAD_SECONDS * 1000;
  if (tokens.expires_at === undefined) return lead;
  const lifetime = tokens.expires_at - tokens.obtained_at;
  return lifetime > 0 ? Math.min(lead, lifetime / 3) : lead;
}

const DEFAULT_REFRESH_LEAD_SECONDS = 30;

/** Refreshes ahead of expiry when possible; returns undefined when the token is unusable. */
export async function freshTokens(state: AuthState, tokens: StoredTokens): Promise<StoredTokens | undefined> {
  const lead = refreshLeadMs(tokens, state.options.refreshSkewSeconds);
  if (tokens.expires_at === undefined || tokens.expires_at - lead > Date.now()) return tokens;
  if (!tokens.refresh_token) return tokens.expires_at > Date.now() ? tokens : undefined;
  return refreshTokens(state, tokens, false);
}

/**
 * Refresh, single-flight per issuer, client and resource: concurrent callers share one request.
 * The rotated refresh token is persisted before the new access token is used. `invalid_grant`
 * drops the refresh token and returns undefined, so the caller re-authorizes once.
 */
export function refreshTokens(
  state: AuthState,
  rejected: StoredTokens,
  afterRejection: boolean,
): Promise<StoredTokens | undefined> {
  const key = tokensKey(rejected.issuer, rejected.client_id, rejected.resource);
  return state.refreshFlight.run(key, async () => {
    const current = (await state.store.get("tokens", key)) ?? rejected;
    // Someone else already replaced the rejected token: use theirs.
    if (afterRejection && current.access_token !== rejected.access_token) return current;
    if (!current.refresh_token) return undefined;
    const metadata = await serverMetadata(state, current.issuer, false);
    const client = await clientFor(state, current.issuer, current.client_id);
    if (!client) return undefined;
    // RFC 9449 §5: a refresh token issued with DPoP is bound to the same key.
    const dpop = await dpopFor(state, current.issuer, current.client_id, false);
    const ctx: TokenRequestContext = {
      metadata,
      client,
      fetch: state.fetch,
      ...keysFor(state, client),
      ...(dpop && { dpop }),
    };
    let response: oauth.TokenEndpointResponse;
    try {
      response = await refreshAccessToken(ctx, {
        refreshToken: current.refresh_token,
        resource: current.resource,
      });
    } catch (error) {
      if (error instanceof AuthorizationFlowError && error.kind === "oauth") {
        // invalid_grant (or any refusal): the grant is gone; keep nothing that would loop.
        const { refresh_token: _dropped, ...rest } = current;
        await state.store.set("tokens", key, { ...rest, expires_at: 0 });
        return undefined;
      }
      throw error;
    }
    const next = await bindTokens(
      toStoredTokens(
        response,
        { issuer: current.issuer, client_id: current.client_id, resource: current.resource },
        current,
      ),
      dpop,
    );
    await state.store.set("tokens", key, next);
    state.options.onEvent?.({ type: "refreshed", resource: current.resource, issuer: current.issuer });
    return next;
  });
}
