/**
 * The PostgreSQL store's writes inside one transaction: rows inserted with `$n` placeholders, a
 * grant revoked with its tokens (grant row first, the lock order of every transaction), the tokens
 * a grant is issued, and the two halves of a code redemption (a claimed code judged and issued, an
 * unclaimed one found replayed or expired). Apart from store.ts, which runs them.
 */

import type {
  AuthorizationCodeRecord,
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  GrantRecord,
  IssuedTokens,
  RedeemCodeResult,
} from "../contract.js";
import { authorizationCodeState, issuedTokenRecords, judgeAuthorizationCode } from "../rules.js";
import {
  accessTokenInsert,
  grantInsert,
  insertSql,
  type RowInsert,
  refreshTokenInsert,
  rowToCode,
} from "../sql/rows.js";
import { revokeGrantStatements, type Statement } from "../sql/statements.js";
import type { Execute, Query } from "./pool.js";

export type Tx = { query: Query; execute: Execute };

export const exec = (execute: Execute, statement: Statement) =>
  execute(statement.text, [...statement.values]);

/** The grant row first, then its tokens (the lock order of every transaction); true when the grant exists. */
export async function revokeGrantRows(tx: Tx, grantId: string, now: number): Promise<boolean> {
  const changes: number[] = [];
  for (const statement of revokeGrantStatements("$n", grantId, now))
    changes.push(await exec(tx.execute, statement));
  return changes[0]! > 0;
}

export function insert(execute: Execute, row: RowInsert): Promise<number> {
  return execute(
    insertSql(row, (n) => `$${n}`),
    row.values,
  );
}

/**
 * A code this redemption could not claim: consumed (a replay, which revokes the grant of its first
 * redemption) or expired. `absent` is the answer when there is no row at all. The claim's condition
 * is exactly the state `live`: a row that reads as live here was inserted after the claim ran, and
 * this request does not redeem it.
 */
export async function unclaimedCode(
  tx: Tx,
  codeHash: string,
  now: number,
  absent: "not_found" | "expired",
): Promise<RedeemCodeResult> {
  const [row] = await tx.query("SELECT * FROM authorization_codes WHERE code_hash = $1", [codeHash]);
  if (!row) return { status: absent };
  const code = rowToCode(row);
  const replayed = authorizationCodeState(code, now) === "consumed";
  if (replayed) await revokeGrantRows(tx, code.grantId, now);
  return { status: replayed ? "replayed" : "expired" };
}

/**
 * A claimed code (its row now consumed), judged as it was before the claim. A throw from `check` or
 * `tokens` aborts the transaction: the claim is rolled back with it. A refused code stays claimed.
 */
export async function redeemClaimed(
  tx: Tx,
  code: AuthorizationCodeRecord,
  now: number,
  check: CodeRedemptionCheck,
  tokens: CodeRedemptionTokens,
): Promise<RedeemCodeResult> {
  const verdict = judgeAuthorizationCode(code, now, check, tokens);
  if (verdict.status !== "issue") return verdict;
  const { grant, tokens: issued } = verdict;
  await insert(tx.execute, grantInsert(grant));
  const refreshIssued = await insertTokens(
    tx,
    grant,
    code.clientId,
    code.scopes,
    issued,
    code.refreshAllowed,
  );
  return { status: "issued", code: { ...code, consumedAt: now }, grant, refreshIssued };
}

export async function insertTokens(
  tx: Tx,
  grant: GrantRecord,
  clientId: string,
  scopes: string[],
  tokens: Omit<IssuedTokens, "grantExpiresAt">,
  writeRefresh: boolean,
  rotatedFrom?: string,
): Promise<boolean> {
  const { access, refresh } = issuedTokenRecords(grant, clientId, scopes, tokens, writeRefresh, rotatedFrom);
  await insert(tx.execute, accessTokenInsert(access));
  if (!refresh) return false;
  await insert(tx.execute, refreshTokenInsert(refresh));
  return true;
}
