/**
 * Keeping an access token usable: refresh ahead of expiry and after a rejection (RFC 6749 §6;
 * RFC 9449 §5 for DPoP-bound refresh tokens), once between every caller that shares the tokens:
 * single-flight within this process, and under the store's lock (`TokenStore.withLock`) across
 * processes, re-reading the stored tokens once the lock is held. Internal to the client.
 */
import type * as oauth from "oauth4webapi";
import { AuthorizationFlowError } from "../errors.js";
import { resourceParameter } from "../protocol/issuer-compat.js";
import { refreshAccessToken, type TokenRequestContext, toStoredTokens } from "../protocol/tokens.js";
import { type StoredTokens, type TokenStore, tokensKey } from "../stores/types.js";
import {
  type AuthState,
  bindTokens,
  clientFor,
  compatibilityReporter,
  dpopFor,
  keysFor,
  serverMetadata,
} from "./state.js";

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

/** Whether `tokens` are inside their refresh lead (or past expiry); never for a token without `expires_at`. */
function dueForRefresh(tokens: StoredTokens, refreshSkewSeconds: number | undefined): boolean {
  const lead = refreshLeadMs(tokens, refreshSkewSeconds);
  return tokens.expires_at !== undefined && tokens.expires_at - lead <= Date.now();
}

/** Refreshes ahead of expiry when possible; returns undefined when the token is unusable. */
export async function freshTokens(state: AuthState, tokens: StoredTokens): Promise<StoredTokens | undefined> {
  if (tokens.expires_at === undefined || !dueForRefresh(tokens, state.options.refreshSkewSeconds))
    return tokens;
  if (!tokens.refresh_token) return tokens.expires_at > Date.now() ? tokens : undefined;
  try {
    return await refreshTokens(state, tokens, false);
  } catch (error) {
    // A refresh ahead of expiry that meets an outage: the access token still works until it
    // expires, so the call goes on with it (the next call refreshes again).
    if (isOutage(error) && tokens.expires_at > Date.now()) return tokens;
    throw error;
  }
}

/**
 * `task` under the store's cross-process lock for one token set, where the store has one; a store
 * without `withLock` (a custom one) is refreshed under the in-process single flight alone.
 */
function underRefreshLock<T>(store: TokenStore, key: string, task: () => Promise<T>): Promise<T> {
  return store.withLock ? store.withLock(`refresh ${key}`, task) : task();
}

/**
 * Refresh, single-flight per issuer, client and resource: concurrent callers share one request,
 * and other processes over the same store wait on its lock. Once the lock is held the stored
 * tokens are read again: another process may have refreshed meanwhile, and its rotated refresh
 * token is the only one still valid (presenting ours again would be reuse, RFC 9700 §4.14.2, and
 * revoke the grant). The rotated refresh token is persisted, still under the lock, before the new
 * access token is used. `invalid_grant` drops the refresh token and returns undefined, so the
 * caller re-authorizes once.
 */
export function refreshTokens(
  state: AuthState,
  rejected: StoredTokens,
  afterRejection: boolean,
): Promise<StoredTokens | undefined> {
  const key = tokensKey(rejected.issuer, rejected.client_id, rejected.resource);
  return state.refreshFlight.run(key, () =>
    underRefreshLock(state.store, key, () => refreshLocked(state, key, rejected, afterRejection)),
  );
}

async function refreshLocked(
  state: AuthState,
  key: string,
  rejected: StoredTokens,
  afterRejection: boolean,
): Promise<StoredTokens | undefined> {
  const current = (await state.store.get("tokens", key)) ?? rejected;
  // Someone else (this process or another) already replaced the token: use theirs, unless it was
  // replaced by tokens that are themselves due (then they are refreshed with their own refresh token).
  if (
    current.access_token !== rejected.access_token &&
    (afterRejection || !dueForRefresh(current, state.options.refreshSkewSeconds))
  ) {
    return current;
  }
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
  const request = {
    refreshToken: current.refresh_token,
    resource: resourceParameter(
      state.options.issuerCompatibility,
      current.issuer,
      current.resource,
      "refresh",
      compatibilityReporter(state),
    ),
  };
  let response: oauth.TokenEndpointResponse;
  try {
    try {
      response = await refreshAccessToken(ctx, request);
    } catch (error) {
      const wait = outageWait(error);
      if (wait === undefined) throw error;
      // RFC 6749 §5.2 temporarily_unavailable with a short Retry-After: the server did not
      // process the grant, so presenting the same refresh token once more is safe (a code
      // redemption is never retried: the code is used once). Still under the refresh lock.
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
      response = await refreshAccessToken(ctx, request);
    }
  } catch (error) {
    if (isOutage(error)) {
      // An outage says nothing about the grant: the refresh token is kept for the next call.
      throw error;
    }
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
}

/** The longest Retry-After a refresh waits out before its one retry (longer: reported at once). */
const MAX_OUTAGE_WAIT_SECONDS = 5;

/** A 503 `temporarily_unavailable` from the token endpoint (RFC 6749 §5.2). */
function isOutage(error: unknown): error is AuthorizationFlowError {
  return (
    error instanceof AuthorizationFlowError &&
    error.status === 503 &&
    error.oauthError?.error === "temporarily_unavailable"
  );
}

/** The seconds to wait before retrying an outage answer once, or undefined: do not retry. */
function outageWait(error: unknown): number | undefined {
  if (!isOutage(error) || error.retryAfter === undefined) return undefined;
  return error.retryAfter <= MAX_OUTAGE_WAIT_SECONDS ? error.retryAfter : undefined;
}
