/**
 * The PostgreSQL store's side of superseded grants: the sign-in's active grants a code redemption
 * is offered, read and retired inside the redemption's own transaction (contract
 * `redeemAuthorizationCode`, `supersedes`). Before, the authorization server did it after the
 * commit: a read, then a transaction of its own per retired grant (BEGIN, the revocation, COMMIT),
 * on every signed-in code flow past the bound (authorization-server/grants/superseded-grants.ts
 * decides which grants; this only applies the decision).
 *
 * Ordering across instances. READ COMMITTED alone would let two concurrent redemptions of one
 * sign-in each miss the other (neither committed when the other reads), leaving both grants active
 * where the rule keeps one. So the retirement first takes a transaction-scoped advisory lock on the
 * sign-in (user, client, resource, session hash), held to COMMIT: redemptions of one sign-in pass
 * this point one at a time, and the next one's read (a fresh snapshot, taken after the lock is
 * granted) sees the grant the previous one committed. Of two concurrent redemptions exactly the
 * later sees, and may retire, the other; never both each other.
 *
 * Locks: the lock is taken after the new grant and its tokens are written, and what the holder then
 * locks are committed grants of the sign-in (grant row first, then its tokens: the store's lock
 * order). A redemption waiting on the lock holds only its own code row and its uncommitted grant
 * and token rows, which no other transaction can see, so the wait cannot close a cycle.
 */
import type { GrantRecord, SignInGrantKey, SupersedeCandidate, SupersedeDecision } from "../contract.js";
import { signInGrantKey } from "../rules.js";
import { rowToSupersedeCandidate } from "../sql/rows.js";
import type { Tx } from "./transaction-writes.js";

/**
 * The active grants of one sign-in, oldest first, with the decision's columns only (the
 * grants_active_by_session index finds them: user and session hash, active only).
 */
export const SUPERSEDE_CANDIDATES_SQL = `SELECT grant_id, scopes, created_at, dpop_jkt, step_up_requested_at FROM grants
  WHERE user_id = $1 AND client_id = $2 AND resource = $3 AND session_hash = $4 AND revoked_at IS NULL
  ORDER BY created_at, grant_id COLLATE "C"`;

export function candidateParams(key: SignInGrantKey): string[] {
  return [key.userId, key.clientId, key.resource, key.sessionHash];
}

/**
 * The advisory lock of one sign-in: the two-integer form (its own key space, apart from the
 * migration's single-key lock), the first half naming the schema (two stores on one database
 * share the lock table) and the second the sign-in. A hash collision only makes two sign-ins
 * wait for each other.
 */
const LOCK_SIGN_IN_SQL = "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))";

/** What retiring needs from the store, inside the redemption's transaction. */
export interface RetireIo {
  tx: Tx;
  schema: string;
  /** Revokes a grant with its tokens inside `tx` (grant row first); true when it exists. */
  revokeGrantRows(tx: Tx, grantId: string, now: number): Promise<boolean>;
}

/**
 * Runs inside the redemption's transaction, after the new grant is written. Answers the grants it
 * retired, or undefined when the decision threw (nothing retired; the caller retires after the
 * commit, and logs). A failing statement fails the redemption with it (PostgreSQL aborts the
 * transaction; the code stays unconsumed, so the client may try again).
 */
export async function retireSuperseded(
  io: RetireIo,
  grant: GrantRecord,
  supersedes: SupersedeDecision,
  now: number,
): Promise<string[] | undefined> {
  const key = signInGrantKey(grant);
  if (key === undefined) return [];
  const { tx } = io;
  await tx.query(LOCK_SIGN_IN_SQL, [
    `gatehouse.supersede:${io.schema}`,
    [key.userId, key.clientId, key.resource, key.sessionHash].join("\n"),
  ]);
  const candidates: SupersedeCandidate[] = [];
  for (const row of await tx.query(SUPERSEDE_CANDIDATES_SQL, candidateParams(key))) {
    if (row.grant_id !== grant.grantId) candidates.push(rowToSupersedeCandidate(row, key));
  }
  let picked: Set<string>;
  try {
    picked = new Set(supersedes(grant, candidates));
  } catch {
    return undefined;
  }
  const retired = candidates.filter((c) => picked.has(c.grantId)).map((c) => c.grantId);
  for (const grantId of retired) await io.revokeGrantRows(tx, grantId, now);
  return retired;
}
