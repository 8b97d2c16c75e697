/**
 * When a refresh token is issued, how long its grant lives, and the one interop rule that refuses a
 * refresh (docs/authorization-server.md "Refresh policy"). Rotation and reuse detection are the
 * store's (`rotateRefreshToken`); this file decides only the policy around them.
 */

import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord, GrantRecord, RefreshTokenRecord } from "../../storage/contract.js";
import type { ServerContext } from "../config/context.js";
import { OFFLINE_ACCESS } from "../config/resolve-options.js";

/**
 * Whether redeeming a code for these scopes issues a refresh token.
 *
 * - A client that declared the `refresh_token` grant (RFC 7591 §2 `grant_types`; the spec's
 *   refresh-token section: clients SHOULD include it) gets one, with or without `offline_access`.
 *   Clients in the field (the MCP TypeScript SDK v1) declare the grant but never ask for
 *   `offline_access`; without a refresh token their user would see the browser every time the
 *   short-lived access token expires. What `offline_access` adds is lifetime: see
 *   {@link grantLifetimes}.
 * - A client that declared no grant types (a pre-registered client configured without them) gets
 *   one only when `offline_access` was granted (OpenID Connect Core §11).
 * - A client that declared grant types without `refresh_token` never gets one.
 */
export function refreshAllowed(ctx: ServerContext, client: ClientRecord, scopes: readonly string[]): boolean {
  if (!ctx.options.refresh.enabled) return false;
  if (client.grantTypes.includes("refresh_token")) return true;
  return client.grantTypes.length === 0 && scopes.includes(OFFLINE_ACCESS);
}

/**
 * Idle and absolute lifetimes (milliseconds) of a grant with these scopes: the configured
 * `refreshTokens` limits when the user granted `offline_access` (access while they are away), the
 * shorter `refreshTokens.withoutOfflineAccess` ones otherwise (access while they keep using the
 * client).
 */
export function grantLifetimes(
  ctx: ServerContext,
  scopes: readonly string[],
): { idleMs: number; absoluteMs: number } {
  const limits = scopes.includes(OFFLINE_ACCESS)
    ? ctx.options.refresh
    : ctx.options.refresh.withoutOfflineAccess;
  return { idleMs: limits.idleTtlSeconds * 1000, absoluteMs: limits.absoluteTtlSeconds * 1000 };
}

/** How long after a co-hosted resource server's `insufficient_scope` a refresh is refused. */
export const STEP_UP_REFRESH_WINDOW_MS = 60_000;

/**
 * The step-up interop rule: a refresh of a grant whose current access token a co-hosted resource
 * server has just refused for insufficient scope answers `invalid_grant`, leaving the grant and the
 * refresh token as they are.
 *
 * Why: a refresh can never widen a grant (RFC 6749 §6), so a client that answers a 403
 * `insufficient_scope` by refreshing (the MCP TypeScript SDK v1 does, then gives up) would only get
 * the same scopes back. `invalid_grant` sends it into a fresh authorization with the challenged
 * scopes instead, which is what the spec asks of it ("Client handling (scope upgrade)"). Nothing is
 * revoked or rotated, so the rule can only ever cost the client a consent page, and only inside
 * {@link STEP_UP_REFRESH_WINDOW_MS} after the refusal of a token issued with this refresh token or
 * later: a refresh after the window, or a second refresh after one that succeeded, is not touched.
 * The mark is set through `AuthorizationServer.requestStepUp` by a gate's `onInsufficientScope`.
 */
export function stepUpRefusal(
  token: RefreshTokenRecord,
  grant: GrantRecord,
  now: number,
): OAuthError | undefined {
  const markedAt = grant.stepUpRequestedAt;
  if (markedAt === undefined || markedAt < token.createdAt) return undefined;
  if (now - markedAt >= STEP_UP_REFRESH_WINDOW_MS) return undefined;
  return new OAuthError("invalid_grant", {
    description: "the resource asked for more scope than this grant holds; authorize again",
    detail: "refresh refused after insufficient_scope at a co-hosted resource (step-up)",
  });
}
