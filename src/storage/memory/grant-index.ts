/**
 * The memory store's indexes over its grants and tokens, as the SQL stores have theirs
 * (`refresh_tokens_grant_id`, `access_tokens_grant_id`, `grants_active_by_session`): the tokens of
 * each grant, and the active grants of each sign-in (user, client, resource, session).
 *
 * Why: without them a code redemption looked through every grant for the ones it supersedes, a
 * grant's revocation through every token, and a purge through every access token for every grant,
 * so each flow cost more than the one before and a purge grew with the square of the history
 * (bench/authorization-server.mjs --store memory: sessions 0.72 → 0.35 of the peer's CPU within
 * nine seconds of flows).
 *
 * The store calls these as it writes; each index holds keys only (the records stay in the store's
 * maps), so an entry is never stale as long as every write that adds, revokes or drops a grant or
 * token tells the index.
 */
import type { GrantRecord, SignInGrantKey } from "../contract.js";

/** The sign-in a grant belongs to, when it has one (a user's session), as one map key. */
function signInKey(key: SignInGrantKey): string {
  return JSON.stringify([key.userId, key.clientId, key.resource, key.sessionHash]);
}

function grantSignInKey(grant: GrantRecord): string | undefined {
  const { userId, sessionHash, clientId, resource } = grant;
  if (userId === undefined || sessionHash === undefined) return undefined;
  return signInKey({ userId, clientId, resource, sessionHash });
}

/** Adds `value` to the set under `key`, creating it. */
function addTo(map: Map<string, Set<string>>, key: string, value: string): void {
  const set = map.get(key);
  if (set) set.add(value);
  else map.set(key, new Set([value]));
}

/** Removes `value` from the set under `key`, and the set once empty. */
function removeFrom(map: Map<string, Set<string>>, key: string, value: string): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

const NONE: ReadonlySet<string> = new Set();

export interface GrantIndex {
  /** A grant was stored (active unless it carries `revokedAt`). */
  grantStored(grant: GrantRecord): void;
  /** A grant was revoked: it leaves its sign-in's active grants. */
  grantRevoked(grant: GrantRecord): void;
  /** A grant was dropped (purge). */
  grantDropped(grant: GrantRecord): void;
  /** Ids of the active grants of one sign-in. */
  activeGrantsOf(key: SignInGrantKey): ReadonlySet<string>;
  refreshStored(grantId: string, tokenHash: string): void;
  refreshDropped(grantId: string, tokenHash: string): void;
  accessStored(grantId: string, jti: string): void;
  accessDropped(grantId: string, jti: string): void;
  /** Hashes of a grant's refresh tokens. */
  refreshTokensOf(grantId: string): ReadonlySet<string>;
  /** `jti`s of a grant's access tokens. */
  accessTokensOf(grantId: string): ReadonlySet<string>;
  /** Ids of the grants exchanged from a grant (RFC 8693; `GrantRecord.exchangedFrom`). */
  exchangedFrom(grantId: string): ReadonlySet<string>;
}

export function createGrantIndex(): GrantIndex {
  const activeBySignIn = new Map<string, Set<string>>();
  const refreshByGrant = new Map<string, Set<string>>();
  const accessByGrant = new Map<string, Set<string>>();
  // As the SQL stores' grants_exchanged_from: revoking a grant finds the grants derived from it.
  const derivedByOrigin = new Map<string, Set<string>>();
  const leaveSignIn = (grant: GrantRecord) => {
    const key = grantSignInKey(grant);
    if (key !== undefined) removeFrom(activeBySignIn, key, grant.grantId);
  };
  return {
    grantStored(grant) {
      const key = grantSignInKey(grant);
      if (key !== undefined && grant.revokedAt === undefined) addTo(activeBySignIn, key, grant.grantId);
      if (grant.exchangedFrom !== undefined) addTo(derivedByOrigin, grant.exchangedFrom, grant.grantId);
    },
    grantRevoked: leaveSignIn,
    grantDropped(grant) {
      leaveSignIn(grant);
      if (grant.exchangedFrom !== undefined) removeFrom(derivedByOrigin, grant.exchangedFrom, grant.grantId);
    },
    activeGrantsOf: (key) => activeBySignIn.get(signInKey(key)) ?? NONE,
    refreshStored: (grantId, tokenHash) => addTo(refreshByGrant, grantId, tokenHash),
    refreshDropped: (grantId, tokenHash) => removeFrom(refreshByGrant, grantId, tokenHash),
    accessStored: (grantId, jti) => addTo(accessByGrant, grantId, jti),
    accessDropped: (grantId, jti) => removeFrom(accessByGrant, grantId, jti),
    refreshTokensOf: (grantId) => refreshByGrant.get(grantId) ?? NONE,
    accessTokensOf: (grantId) => accessByGrant.get(grantId) ?? NONE,
    exchangedFrom: (grantId) => derivedByOrigin.get(grantId) ?? NONE,
  };
}
