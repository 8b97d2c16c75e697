/**
 * The PostgreSQL store's writes inside one transaction: rows inserted with `$n` placeholders, a
 * grant revoked with its tokens (grant row first, the lock order of every transaction), the writes
 * of a verdict (../rules.ts `StorageWrite`, through `applyWrites`, the one place this store enacts
 * what a code redemption, a refresh rotation or a device poll was judged to write), and the two
 * halves of a code redemption (a claimed code judged, an unclaimed one found replayed or expired).
 * Apart from store.ts, which runs them.
 */

import type {
  AuthorizationCodeRecord,
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  RedeemCodeResult,
} from "../contract.js";
import { judgeAuthorizationCode, judgeUnclaimedCode, type StorageWrite } from "../rules.js";
import { insertSql, type RowInsert, rowToCode } from "../sql/rows.js";
import type { Statement } from "../sql/statements.js";
import { writeStatements } from "../sql/writes.js";
import type { Execute, Query } from "./pool.js";
import { revokeGrantChain } from "./revocation.js";

export type Tx = { query: Query; execute: Execute };

export const exec = (execute: Execute, statement: Statement) =>
  execute(statement.text, [...statement.values]);

/**
 * The grant row first, then its tokens (the lock order of every transaction); true when the grant
 * exists. Three statements (./revocation.ts) where the shared SQL runs five.
 */
export function revokeGrantRows(tx: Tx, grantId: string, now: number): Promise<boolean> {
  return revokeGrantChain(tx, grantId, now);
}

export function insert(execute: Execute, row: RowInsert): Promise<number> {
  return execute(
    insertSql(row, (n) => `$${n}`),
    row.values,
  );
}

/**
 * Writes that touch one row each, never a row another write of the same verdict touches (the
 * code, the new grant, the new refresh token, the token rotated and its parent), and take no lock
 * the store's lock order ranks: consecutive ones run as one statement ({@link runTogether}).
 */
const ONE_ROW_WRITES: ReadonlySet<StorageWrite["op"]> = new Set([
  "markCodeUsed",
  "insertCode",
  "insertGrant",
  "insertRefreshToken",
  "markRotated",
  "markSuccessorUsed",
]);

/**
 * Runs the writes of a verdict, in order, inside `tx`: a throw (a conflicting insert) aborts the
 * transaction with everything it wrote. The verdicts keep the lock order (a grant's row before its
 * tokens): a revocation's statements start with the grant row, and a rotation's marks touch only
 * tokens of the grant the caller locked first. Consecutive one-row writes go in one round trip: a
 * code redemption's code, grant and refresh token; a rotation's marks and new token.
 */
export async function applyWrites(tx: Tx, writes: readonly StorageWrite[]): Promise<void> {
  let together: Statement[] = [];
  const flush = async () => {
    if (together.length > 0) await runTogether(tx, together);
    together = [];
  };
  for (const write of writes) {
    if (ONE_ROW_WRITES.has(write.op)) {
      together.push(...writeStatements("$n", write));
      continue;
    }
    await flush();
    if (write.op === "revokeGrant") await revokeGrantRows(tx, write.grantId, write.now);
    else for (const statement of writeStatements("$n", write)) await exec(tx.execute, statement);
  }
  await flush();
}

/**
 * Statements as one: each a data-modifying WITH item (PostgreSQL runs every one, whether or not it
 * is read), its `$n` marks moved past the ones before it. They all see the same snapshot and none
 * sees another's rows, which is why only {@link ONE_ROW_WRITES} go here; a foreign key between
 * two of them (a refresh token of the grant inserted beside it) is checked at the statement's end,
 * when both rows are there. A conflicting insert fails the whole statement, as it failed alone.
 */
function runTogether(tx: Tx, statements: readonly Statement[]): Promise<number> {
  if (statements.length === 1) return exec(tx.execute, statements[0]!);
  const values: unknown[] = [];
  const items = statements.map((statement, i) => {
    const offset = values.length;
    values.push(...statement.values);
    return `w${i} AS (${statement.text.replace(/\$(\d+)/g, (_mark, n: string) => `$${Number(n) + offset}`)})`;
  });
  return tx.execute(`WITH ${items.join(", ")} SELECT 1`, values);
}

/**
 * A code this redemption could not claim: consumed (a replay, which revokes the grant of its first
 * redemption) or expired (../rules.ts `judgeUnclaimedCode`). `absent` is the answer when there is
 * no row at all.
 */
export async function unclaimedCode(
  tx: Tx,
  codeHash: string,
  now: number,
  absent: "not_found" | "expired",
): Promise<RedeemCodeResult> {
  const [row] = await tx.query("SELECT * FROM authorization_codes WHERE code_hash = $1", [codeHash]);
  if (!row) return { status: absent };
  const { writes, result } = judgeUnclaimedCode(rowToCode(row), now);
  await applyWrites(tx, writes);
  return result;
}

/**
 * A claimed code (its row now consumed by the claim), judged as it was before the claim. A throw
 * from `check` or `tokens` aborts the transaction: the claim is rolled back with it. A refused code
 * stays claimed.
 */
export async function redeemClaimed(
  tx: Tx,
  code: AuthorizationCodeRecord,
  now: number,
  check: CodeRedemptionCheck,
  tokens: CodeRedemptionTokens,
): Promise<RedeemCodeResult> {
  const { writes, result } = judgeAuthorizationCode(code, now, check, tokens, "claimed");
  await applyWrites(tx, writes);
  return result;
}
