/**
 * When a refresh token is issued, how long its grant lives, how long a rotated token stays
 * redeemable in a refresh race, and the one interop rule that refuses a refresh
 * (docs/authorization-server.md "Refresh policy"). Rotation and reuse detection are the store's
 * (`rotateRefreshToken`, storage/rules.ts); this file decides only the policy around them.
 */

import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord, GrantRecord, RefreshTokenRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { declaredGrantTypes, mayUseGrantType } from "../policy/grants.js";
import { OFFLINE_ACCESS } from "../policy/scopes.js";

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
 *   one only when `offline_access` was granted (OpenID Connect Core §11), and may then use it
 *   (policy/grants.ts: the undeclared default includes `refresh_token`).
 * - A client that declared grant types without `refresh_token` never gets one.
 */
export function refreshAllowed(ctx: ServerContext, client: ClientRecord, scopes: readonly string[]): boolean {
  // Never a token the token endpoint would refuse: the same answer (policy/grants.ts) for both.
  if (!ctx.options.refresh.enabled || !mayUseGrantType(client, "refresh_token")) return false;
  if (declaredGrantTypes(client)) return true;
  return scopes.includes(OFFLINE_ACCESS);
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

/**
 * How long a rotated refresh token stays redeemable while none of its successors has been used
 * (`refreshTokens.reuseGraceSeconds`, default 30 s; the store's `rotateRefreshToken` `graceMs`; storage/rules.ts `isRefreshTokenReuse` applies it).
 *
 * Why a window at all, by default (RFC 9700 §4.14.2 asks for rotation with reuse detection, and
 * leaves the detection's precision to the server): coding agents and desktop clients refresh from
 * several processes or windows sharing one stored token, and under strict detection the second of
 * two simultaneous refreshes revokes the grant and logs the user out (reported against better-auth,
 * which now defaults to 30 s, FastMCP and others). Inside the window such a second redemption gets a
 * sibling successor. What strict detection is for is kept: once any successor has been used, the
 * legitimate client has moved on, and the rotated token presented again ends the grant at once,
 * window or not. What the window costs: a thief who redeems a stolen token within 30 s of its
 * rotation, before the client uses its successor, keeps a chain of their own, which revocation of
 * the grant (logout) or its lifetimes still end. The same window for every client: a confidential
 * client's refresh token is also bound to its credentials (RFC 9700 §4.14.2), and server-side
 * clients with several workers race the same way. `reuseGraceSeconds: 0` restores strict detection.
 */
export function reuseGraceMs(ctx: ServerContext): number {
  return ctx.options.refresh.reuseGraceSeconds * 1000;
}

/**
 * Idle expiry of the successor a rotation writes: its grant kind's idle lifetime, never past the
 * grant's absolute lifetime. A sibling (a rotated token redeemed again inside the race window)
 * counts from the first rotation and so expires with the first successor: the window never
 * extends a lifetime.
 */
export function successorExpiresAt(
  ctx: ServerContext,
  token: RefreshTokenRecord,
  grant: GrantRecord,
  now: number,
): number {
  const from = token.rotatedAt === undefined ? now : Math.min(token.rotatedAt, now);
  return Math.min(from + grantLifetimes(ctx, grant.scopes).idleMs, grant.expiresAt);
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
