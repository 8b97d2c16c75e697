/**
 * The SQLite store's side of superseded grants: the sign-in's active grants a code redemption is
 * offered, read and retired inside the redemption's own write (contract `redeemAuthorizationCode`,
 * `supersedes`). One write instead of a redemption, a read and a revocation after it: every
 * signed-in code flow ran all three (authorization-server/grants/superseded-grants.ts decides which
 * grants; this only applies the decision).
 */
import type { GrantRecord, SignInGrantKey, SupersedeCandidate, SupersedeDecision } from "../contract.js";
import { signInGrantKey } from "../rules.js";
import { type Row, rowToSupersedeCandidate } from "../sql/rows.js";

/**
 * The active grants of one sign-in, oldest first, with the decision's columns only. The user's
 * index finds the rows; the unary `+` keeps client_id from competing for it (store.ts listGrants).
 */
export const SUPERSEDE_CANDIDATES_SQL = `SELECT grant_id, scopes, created_at, dpop_jkt, step_up_requested_at FROM grants
  WHERE user_id = ? AND +client_id = ? AND resource = ? AND session_hash = ? AND revoked_at IS NULL
  ORDER BY created_at, grant_id`;

export function candidateParams(key: SignInGrantKey): string[] {
  return [key.userId, key.clientId, key.resource, key.sessionHash];
}

/** What retiring needs from the store, inside its write. */
export interface RetireIo {
  all(text: string, ...params: unknown[]): Row[];
  run(text: string, ...params: unknown[]): number;
  inTransaction(): boolean;
  revokeGrantRows(grantId: string, now: number): boolean;
}

/**
 * Runs inside the redemption's write, after the new grant is inserted. Every grant it can see was
 * committed (or written earlier in this transaction) before the new one: the write lock orders
 * redemptions, so of two concurrent redemptions of one sign-in only the later sees the other.
 * A throwing decision (or statement) undoes only the retirement, the redemption stays, and the
 * result says nothing was decided (the caller retires after the commit, and logs). The reading and
 * the decision write nothing, so only the revocations get a savepoint of their own, and only when
 * there is something to retire (two statements fewer for a flow that supersedes nothing).
 */
export function retireSuperseded(
  io: RetireIo,
  grant: GrantRecord,
  supersedes: SupersedeDecision,
  now: number,
): string[] | undefined {
  const key = signInGrantKey(grant);
  if (key === undefined) return [];
  let retired: string[];
  try {
    const candidates: SupersedeCandidate[] = [];
    for (const row of io.all(SUPERSEDE_CANDIDATES_SQL, ...candidateParams(key))) {
      if (row.grant_id !== grant.grantId) candidates.push(rowToSupersedeCandidate(row, key));
    }
    const picked = new Set(supersedes(grant, candidates));
    retired = candidates.filter((c) => picked.has(c.grantId)).map((c) => c.grantId);
  } catch (error) {
    // SQLite rolled the whole transaction back (I/O error, disk full): the redemption fails with it.
    if (!io.inTransaction()) throw error;
    return undefined;
  }
  if (retired.length === 0) return retired;
  io.run("SAVEPOINT supersede");
  try {
    for (const grantId of retired) io.revokeGrantRows(grantId, now);
    io.run("RELEASE supersede");
    return retired;
  } catch (error) {
    if (!io.inTransaction()) throw error;
    io.run("ROLLBACK TO supersede");
    io.run("RELEASE supersede");
    return undefined;
  }
}
