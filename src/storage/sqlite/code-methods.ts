/**
 * The SQLite store's authorization codes (storage contract "Authorization codes"): insert, and the
 * redemption of a stored or a sealed code, moved out of store.ts so the store reads by concern. The
 * judgement is every backend's (../rules.ts `judgeAuthorizationCode`); this module runs it under the
 * group commit's write lock (BEGIN IMMEDIATE), each redemption in its own savepoint.
 */
import type {
  AuthorizationCodeRecord,
  AuthorizationStore,
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  GrantRecord,
  IssuedTokens,
  RedeemCodeResult,
  SupersedeDecision,
} from "../contract.js";
import { judgeAuthorizationCode } from "../rules.js";
import { codeInsert, grantInsert, type Row, type RowInsert, rowToCode } from "../sql/rows.js";
import { type RetireIo, retireSuperseded } from "./superseded.js";

/** What the methods need from the store: its statement runners, the token inserts and its write. */
export interface SqliteCodeIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  run(text: string, ...params: unknown[]): number;
  insert(row: RowInsert): number;
  insertTokens(
    grant: GrantRecord,
    clientId: string,
    scopes: string[],
    tokens: Omit<IssuedTokens, "grantExpiresAt">,
    writeRefresh: boolean,
  ): boolean;
  revokeGrantRows(grantId: string, now: number): boolean;
  retireIo: RetireIo;
  write<T>(fn: () => T): Promise<T>;
}

type CodeMethods = Pick<
  AuthorizationStore,
  "insertAuthorizationCode" | "redeemAuthorizationCode" | "redeemSealedAuthorizationCode"
>;

export function sqliteCodeMethods(io: SqliteCodeIo): CodeMethods {
  const { one, run, insert, insertTokens, revokeGrantRows, retireIo, write } = io;

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
    const verdict = judgeAuthorizationCode(code, now, check, tokens);
    if (verdict.status === "replayed") revokeGrantRows(code.grantId, now);
    if (verdict.status === "refused" || verdict.status === "issue") {
      if (row) run("UPDATE authorization_codes SET consumed_at = ? WHERE code_hash = ?", now, codeHash);
      else insert(codeInsert({ ...code, consumedAt: now }));
    }
    if (verdict.status !== "issue") return verdict;
    const { grant, tokens: issued } = verdict;
    insert(grantInsert(grant));
    const refreshIssued = insertTokens(grant, code.clientId, code.scopes, issued, code.refreshAllowed);
    const superseded = supersedes && retireSuperseded(retireIo, grant, supersedes, now);
    return {
      status: "issued",
      code: { ...code, consumedAt: now },
      grant,
      refreshIssued,
      ...(superseded && { superseded }),
    };
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
