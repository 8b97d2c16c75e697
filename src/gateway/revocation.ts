/**
 * How a revocation reaches a running stdio child (issue 24, `--stdio`): a child holds the
 * credentials it was started with (the user's upstream token in its environment), so the gateway
 * stops it once it learns that the access behind them is gone, in two ways:
 *
 * - Introspection (RFC 7662): an `active: false` answer for a token that an earlier answer found
 *   active, before that token's own `exp`, is a revocation (RFC 7009 §2, or the user's access
 *   ended): every child of that token's `sub` is stopped. An inactive answer after `exp` is an
 *   expiry and stops nothing (the client refreshes). An inactive answer names no user (RFC 7662
 *   §2.2), so the gateway remembers the `sub` of the tokens it saw active, by the token's SHA-256
 *   (a hash, never the token), bounded; only introspection calls pay for it, not cache hits.
 * - The store shared with Gatehouse's authorization server (`--data`, `--database-url`): each
 *   child's grant (the one named by the `jti` of the token that started it) and its kept upstream
 *   token sets are read every `everyMs`, off the request path; a grant revoked, expired or gone,
 *   or a set deleted (revoked, its refresh refused) or replaced (rotated: the child's copy is an
 *   old one) stops the child. The client's next `initialize` starts a new one, which fetches fresh
 *   credentials or is refused. A session whose own token's grant is gone is ended the same way.
 */
import { createHash } from "node:crypto";
import type { AccessTokenVerifier } from "../resource-server/types.js";
import { grantIdOfAccessTokenId } from "../storage/access-token-id.js";
import type { AuthorizationStore } from "../storage/contract.js";

/** Tokens whose `sub` is remembered for {@link watchIntrospection}: beyond, the oldest go first. */
const MAX_REMEMBERED = 10_000;

function tokenHash(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}

/**
 * `inner` (an introspection verifier, under the gateway's cache) with `onRevoked(sub)` called when
 * a token it answered active before its `exp` is now refused as `invalid_token`. Other failures
 * (the endpoint unavailable: `temporarily_unavailable`) say nothing about the token.
 */
export function watchIntrospection(
  inner: AccessTokenVerifier,
  onRevoked: (subject: string) => void,
  now: () => number = Date.now,
): AccessTokenVerifier {
  const seen = new Map<string, { subject: string; expiresAt: number }>();
  return {
    async verify(token) {
      const key = tokenHash(token);
      try {
        const auth = await inner.verify(token);
        if (auth.subject !== undefined) {
          seen.delete(key);
          if (seen.size >= MAX_REMEMBERED) seen.delete(seen.keys().next().value as string);
          seen.set(key, { subject: auth.subject, expiresAt: auth.expiresAt });
        }
        return auth;
      } catch (error) {
        const known = seen.get(key);
        if (known !== undefined && (error as { code?: unknown }).code === "invalid_token") {
          seen.delete(key);
          // Before its exp, an inactive token was revoked (RFC 7662 §2.2: inactive names no reason).
          if (known.expiresAt * 1000 > now()) onRevoked(known.subject);
        }
        throw error;
      }
    },
  };
}

/** The store reads the check needs: the authorization server's own store, shared. */
export type RevocationStore = Pick<AuthorizationStore, "getGrant" | "getUpstreamTokens" | "getAccessToken">;

/** What a child or a session was started with, as checked against the store. */
export interface AccessRecord {
  /** The `jti` of the token (of the start, or the session's latest request). */
  tokenId: string | undefined;
  /** Versions of the kept upstream token sets at the start, by provider (first check fills it). */
  versions?: Map<string, number>;
}

export type AccessState =
  | "live"
  | "revoked"
  | "upstream_token_revoked"
  | "upstream_token_rotated"
  | "unknown";

/**
 * Reads one access record's state: `unknown` when there is nothing to check (a token without
 * `jti`); `revoked` when the grant is revoked, expired or not stored (an unknown grant is no
 * grant: closed, not open); with `providers`, the kept sets' presence and versions.
 */
export async function accessState(
  store: RevocationStore,
  record: AccessRecord,
  providers: readonly string[],
  now: number,
): Promise<AccessState> {
  const jti = record.tokenId;
  if (jti === undefined) return "unknown";
  // The grant a Gatehouse access token names (storage/access-token-id.ts), else its row's.
  const grantId = grantIdOfAccessTokenId(jti) ?? (await store.getAccessToken(jti))?.grantId;
  if (grantId === undefined) return "revoked";
  const grant = await store.getGrant(grantId);
  if (grant === undefined || grant.revokedAt !== undefined || grant.expiresAt <= now) return "revoked";
  for (const provider of providers) {
    const set = await store.getUpstreamTokens(grantId, provider);
    if (set === undefined) return "upstream_token_revoked";
    record.versions ??= new Map();
    const at = record.versions.get(provider);
    if (at === undefined) record.versions.set(provider, set.version);
    else if (at !== set.version) return "upstream_token_rotated";
  }
  return "live";
}
