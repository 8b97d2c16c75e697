/**
 * A grant's revocation in PostgreSQL: three statements where the shared SQL
 * (../sql/statements.ts revokeGrantStatements) runs five. Revocation runs on every superseded
 * grant a code flow retires, on a replayed code, a reused refresh token and an explicit
 * revocation, and each statement is a round trip inside a transaction that holds row locks.
 *
 * What it keeps, in this order (each statement a fresh READ COMMITTED snapshot, taken after the
 * locks of the statements before it are held):
 * 1. the grant row (its change count says whether the grant exists; an earlier time is kept): it
 *    is locked first, the lock order of every transaction of the store (grant, then its tokens);
 * 2. the grants exchanged from it, down the chain (RFC 8693; RFC 7009 §2.1: what was derived from a
 *    revoked grant goes with it), locked before any token of theirs;
 * 3. in one statement, every token of the chain's grants (refresh and access, RFC 7009 §2.1;
 *    RFC 9700 §4.14.2 on reuse) and the upstream provider's token sets the grants hold. No new
 *    token of these grants can be committed after this statement's snapshot: issuing one takes its
 *    grant's row lock first (rotation: `SELECT ... FOR UPDATE`), which this transaction holds.
 *
 * Rows already revoked are left as they are (an earlier revocation time is kept, and no dead row
 * version is written for them); the grant row itself is always written, so it is always locked.
 */
import type { Tx } from "./transaction-writes.js";

/**
 * The grant and every grant exchanged from it; UNION: a cycle ends. The recursive step names
 * `exchanged_from IS NOT NULL` so that the partial index grants_exchanged_from answers it.
 */
const CHAIN = `WITH RECURSIVE chain(grant_id) AS (
  SELECT CAST($1 AS TEXT)
  UNION
  SELECT g.grant_id FROM grants g JOIN chain c ON g.exchanged_from = c.grant_id
  WHERE g.exchanged_from IS NOT NULL
)`;

/**
 * The chain's grant ids as one array, for `= ANY(...)` (the cast makes it an array expression, not
 * a subquery to compare row by row): an index condition the planner can use at
 * any table size. (`IN (SELECT grant_id FROM chain)` took the recursive CTE's guess of hundreds of
 * rows and joined a whole token table against it while the table held a few thousand rows.)
 */
const CHAIN_IDS = "(SELECT array_agg(grant_id) FROM chain)::text[]";

const REVOKE_GRANT = "UPDATE grants SET revoked_at = coalesce(revoked_at, $2) WHERE grant_id = $1";

export const REVOKE_DERIVED_GRANTS = `${CHAIN}
UPDATE grants SET revoked_at = $2
WHERE grant_id = ANY (${CHAIN_IDS}) AND grant_id <> $1 AND revoked_at IS NULL`;

export const REVOKE_TOKENS = `${CHAIN},
refresh AS (
  UPDATE refresh_tokens SET revoked_at = $2
  WHERE grant_id = ANY (${CHAIN_IDS}) AND revoked_at IS NULL RETURNING 1
),
access AS (
  UPDATE access_tokens SET revoked_at = $2
  WHERE grant_id = ANY (${CHAIN_IDS}) AND revoked_at IS NULL RETURNING 1
)
DELETE FROM upstream_token_sets
WHERE holder = ANY ((SELECT array_agg('grant:' || grant_id) FROM chain)::text[])`;

/** Revokes the grant, its chain and their tokens inside `tx`; true when the grant exists. */
export async function revokeGrantChain(tx: Tx, grantId: string, now: number): Promise<boolean> {
  const params = [grantId, now];
  const found = (await tx.execute(REVOKE_GRANT, params)) > 0;
  await tx.execute(REVOKE_DERIVED_GRANTS, params);
  await tx.execute(REVOKE_TOKENS, params);
  return found;
}
