/**
 * Revocation orchestration (RFC 7009): logging out of stored token sets, and revoking a refresh
 * token a step-up superseded. Internal to the client; `AuthClient.logout` is the public entry.
 */
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import { revokeToken } from "../protocol/revocation.js";
import type { StoredClient, StoredTokens } from "../stores/types.js";
import type { LogoutOutcome, LogoutResult } from "./options.js";
import { type AuthState, clientFor, keysFor, serverMetadata } from "./state.js";

/**
 * Logs out of one resource (its PRM `resource` value) or of all: revokes each stored refresh
 * token and live access token at the authorization server's `revocation_endpoint` when it has
 * one (RFC 7009 §2.1, authenticated as registered), then forgets the tokens locally — also when
 * revocation failed, which the outcome reports. `revoke: false` only forgets.
 */
export async function logout(
  state: AuthState,
  resource: string | undefined,
  options: { revoke?: boolean },
): Promise<LogoutResult> {
  const outcomes: LogoutOutcome[] = [];
  let removed = 0;
  for (const [key, tokens] of await state.store.list("tokens")) {
    if (resource !== undefined && tokens.resource !== resource) continue;
    const outcome =
      options.revoke === false ? { revocation: "skipped" as const } : await revokeStored(state, tokens);
    outcomes.push({
      resource: tokens.resource,
      issuer: tokens.issuer,
      client_id: tokens.client_id,
      ...outcome,
    });
    await state.store.delete("tokens", key);
    removed++;
  }
  return { removed, outcomes };
}

async function revokeStored(
  state: AuthState,
  tokens: StoredTokens,
): Promise<Pick<LogoutOutcome, "revocation" | "error">> {
  const live: Array<[string, "refresh_token" | "access_token"]> = [];
  if (tokens.refresh_token) live.push([tokens.refresh_token, "refresh_token"]);
  if (tokens.expires_at === undefined || tokens.expires_at > Date.now()) {
    live.push([tokens.access_token, "access_token"]);
  }
  if (!live.length) return { revocation: "nothing_to_revoke" };
  let metadata: AuthorizationServerMetadata;
  try {
    metadata = await serverMetadata(state, tokens.issuer, false);
  } catch (error) {
    return { revocation: "failed", error };
  }
  if (!metadata.revocation_endpoint) return { revocation: "no_endpoint" };
  const client = await revocationClient(state, tokens);
  let revoked = 0;
  for (const [token, hint] of live) {
    try {
      const result = await revokeToken(
        { metadata, client, fetch: state.fetch, ...keysFor(state, client) },
        token,
        hint,
      );
      if (result === "revoked") revoked++;
    } catch (error) {
      return { revocation: "failed", error };
    }
  }
  return { revocation: revoked ? "revoked" : "unsupported" };
}

/**
 * The registration to authenticate a revocation with. A pre-registered client this instance was
 * not configured with is not stored, so it is tried as a public client (RFC 7009 §2.1: the
 * `client_id` identifies it); a confidential one is then refused by the server and reported.
 */
async function revocationClient(state: AuthState, tokens: StoredTokens): Promise<StoredClient> {
  return (
    (await clientFor(state, tokens.issuer, tokens.client_id)) ?? {
      issuer: tokens.issuer,
      client_id: tokens.client_id,
      token_endpoint_auth_method: "none",
      source: "preregistered",
      registered_at: 0,
    }
  );
}

/**
 * After a step-up: the superseded refresh token is revoked in the background (never awaited by
 * the request that triggered it, never logged); a failure becomes a `revocation_failed` event.
 */
export function revokeSuperseded(
  state: AuthState,
  previous: StoredTokens,
  metadata: AuthorizationServerMetadata,
): void {
  const refreshToken = previous.refresh_token;
  if (!refreshToken || !metadata.revocation_endpoint) return;
  const work = (async () => {
    try {
      const client = await revocationClient(state, previous);
      await revokeToken(
        { metadata, client, fetch: state.fetch, ...keysFor(state, client) },
        refreshToken,
        "refresh_token",
      );
    } catch (error) {
      state.options.onEvent?.({
        type: "revocation_failed",
        resource: previous.resource,
        issuer: previous.issuer,
        reason: error instanceof Error ? error.message : String(error),
      });
    }
  })();
  state.background.add(work);
  void work.finally(() => state.background.delete(work));
}
