/**
 * The SQLite store's authorization codes (storage contract "Authorization codes"): insert, and the
 * redemption of a stored or a sealed code, moved out of store.ts so the store reads by concern. The
 * judgement and what it writes are every backend's (../rules.ts `judgeAuthorizationCode`); this
 * module reads the code and runs the verdict's writes under the group commit's write lock (BEGIN
 * IMMEDIATE), each redemption in its own savepoint.
 */
import type {
  AuthorizationCodeRecord,
  AuthorizationStore,
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  RedeemCodeResult,
  SupersedeDecision,
} from "../contract.js";
import { judgeAuthorizationCode, type StorageWrite } from "../rules.js";
import { codeInsert, type Row, type RowInsert, rowToCode } from "../sql/rows.js";
import { type RetireIo, retireSuperseded } from "./superseded.js";

/** What the methods need from the store: its statement runners, the writer of verdicts, its write. */
export interface SqliteCodeIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  insert(row: RowInsert): number;
  applyWrites(writes: readonly StorageWrite[]): void;
  retireIo: RetireIo;
  write<T>(fn: () => T): Promise<T>;
}

type CodeMethods = Pick<
  AuthorizationStore,
  "insertAuthorizationCode" | "redeemAuthorizationCode" | "redeemSealedAuthorizationCode"
>;

export function sqliteCodeMethods(io: SqliteCodeIo): CodeMethods {
  const { one, insert, applyWrites, retireIo, write } = io;

  /**
   * One code redemption inside a batch (contract `redeemAuthorizationCode`): the stored row, or for
   * a sealed code without one, the sealed record, inserted as the consumed row when the judgement
   * consumes it. The batch serialises redemptions, so a second one of the same code finds the row.
   */
  function redeemCode(
    codeHash: string,
    sealed: AuthorizationCodeRecord | undefined,
    now: number,
    check: CodeRedemptionCheck,
    tokens: CodeRedemptionTokens,
    supersedes: SupersedeDecision | undefined,
  ): RedeemCodeResult {
    const row = one("SELECT * FROM authorization_codes WHERE code_hash = ?", codeHash);
    const code = row ? rowToCode(row) : sealed;
    if (!code) return { status: "not_found" };
    // A throw from `check` or `tokens` (inside the judgement) rolls back this operation's
    // savepoint: the code stays unused (a sealed one stays unwritten).
    const { writes, result } = judgeAuthorizationCode(code, now, check, tokens, row ? "row" : "sealed");
    applyWrites(writes);
    if (result.status !== "issued" || !supersedes) return result;
    const superseded = retireSuperseded(retireIo, result.grant, supersedes, now);
    return { ...result, ...(superseded && { superseded }) };
  }

  return {
    async insertAuthorizationCode(code) {
      await write(() => insert(codeInsert(code)));
    },
    async redeemAuthorizationCode(codeHash, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      return write(() => redeemCode(codeHash, undefined, now, check, tokens, supersedes));
    },
    async redeemSealedAuthorizationCode(code, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      const sealed = { ...code };
      delete sealed.consumedAt;
      return write(() => redeemCode(code.codeHash, sealed, now, check, tokens, supersedes));
    },
  };
}
