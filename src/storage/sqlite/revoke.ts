/**
 * Revoking a grant in SQLite (OAuth 2.1 §4.1.3 on a replayed code, RFC 9700 §4.14.2 on a reused
 * refresh token, RFC 7009 §2.1 on revocation): the grant, every grant exchanged from it down the
 * chain (RFC 8693), and the tokens and upstream token sets of each. The same rows and values as
 * the shared ../sql/statements.ts `revokeGrantStatements`, in fewer and cheaper statements: that
 * one is five statements, four of them walking the exchange chain again, rendered from named
 * parameters on every call; this is one statement that revokes the chain's grants and returns
 * them, then three fixed ones per grant found (a code flow that supersedes a grant ran it on each
 * redemption). SQLite has one writer, so PostgreSQL's lock order does not constrain it.
 */
import type { Row } from "../sql/rows.js";
import { grantHolder } from "../sql/upstream-tokens.js";

/**
 * The grant `?` and every grant exchanged from it, revoked (an earlier revocation time is kept),
 * their ids returned. UNION, not UNION ALL: a row is visited once, so even a cycle a damaged
 * database might hold ends (as in ../sql/statements.ts).
 */
export const REVOKE_GRANT_CHAIN_SQL = `WITH RECURSIVE chain(grant_id) AS (
  SELECT CAST(? AS TEXT)
  UNION
  SELECT g.grant_id FROM grants g JOIN chain c ON g.exchanged_from = c.grant_id
) UPDATE grants SET revoked_at = coalesce(revoked_at, ?) WHERE grant_id IN (SELECT grant_id FROM chain)
  RETURNING grant_id`;
const REVOKE_REFRESH_TOKENS_SQL =
  "UPDATE refresh_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE grant_id = ?";
const REVOKE_ACCESS_TOKENS_SQL =
  "UPDATE access_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE grant_id = ?";
/** The upstream provider's tokens kept for a grant die with it (../sql/upstream-tokens.ts). */
const DROP_UPSTREAM_TOKENS_SQL = "DELETE FROM upstream_token_sets WHERE holder = ?";

export interface RevokeIo {
  all(text: string, ...params: unknown[]): Row[];
  run(text: string, ...params: unknown[]): number;
}

/** Revokes grant `grantId`, what was exchanged from it, and their tokens; true when it exists. */
export function revokeGrantChain(io: RevokeIo, grantId: string, now: number): boolean {
  const revoked = io.all(REVOKE_GRANT_CHAIN_SQL, grantId, now).map((row) => String(row.grant_id));
  // The grant's own tokens go even when its row is gone, as with the shared statements.
  const chain = new Set([grantId, ...revoked]);
  for (const id of chain) {
    io.run(REVOKE_REFRESH_TOKENS_SQL, now, id);
    io.run(REVOKE_ACCESS_TOKENS_SQL, now, id);
    io.run(DROP_UPSTREAM_TOKENS_SQL, grantHolder(id));
  }
  return revoked.includes(grantId);
}
