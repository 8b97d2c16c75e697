/**
 * The SQL of each write a verdict asks for (../rules.ts `StorageWrite`), the same for SQLite and
 * PostgreSQL in each driver's placeholders. The stores only run these statements, in order, inside
 * the transaction that read what was judged (sqlite/store.ts and postgres/store.ts `applyWrites`).
 */

import type { StorageWrite } from "../rules.js";
import { codeInsert, grantInsert, insertSql, type RowInsert, refreshTokenInsert } from "./rows.js";
import {
  type PlaceholderStyle,
  revokeGrantStatements,
  type Statement,
  updateDeviceAuthorizationStatement,
} from "./statements.js";

/**
 * A statement whose parameters each appear once, in order, rendered for both styles once (these
 * run on every code redemption and refresh; `render` would parse the text each time).
 */
function fixed(sql: string): Record<PlaceholderStyle, string> {
  let n = 0;
  return { "?": sql, $n: sql.replace(/\?/g, () => `$${++n}`) };
}

const MARK_CODE_USED = fixed("UPDATE authorization_codes SET consumed_at = ? WHERE code_hash = ?");
const MARK_ROTATED = fixed("UPDATE refresh_tokens SET rotated_at = ? WHERE token_hash = ?");
// An earlier first use of a successor is kept: it closed the race window then.
const MARK_SUCCESSOR_USED = fixed(
  "UPDATE refresh_tokens SET successor_used_at = ? WHERE token_hash = ? AND successor_used_at IS NULL",
);

function insertStatement(style: PlaceholderStyle, row: RowInsert): Statement {
  return { text: insertSql(row, style === "?" ? () => "?" : (n) => `$${n}`), values: row.values };
}

/** The statements of one write, in the order they run. */
export function writeStatements(style: PlaceholderStyle, write: StorageWrite): readonly Statement[] {
  switch (write.op) {
    case "revokeGrant":
      return revokeGrantStatements(style, write.grantId, write.now);
    case "markCodeUsed":
      return [{ text: MARK_CODE_USED[style], values: [write.now, write.codeHash] }];
    case "insertCode":
      return [insertStatement(style, codeInsert(write.code))];
    case "insertGrant":
      return [insertStatement(style, grantInsert(write.grant))];
    case "insertRefreshToken":
      return [insertStatement(style, refreshTokenInsert(write.token))];
    case "markRotated":
      return [{ text: MARK_ROTATED[style], values: [write.rotatedAt, write.tokenHash] }];
    case "markSuccessorUsed":
      return [{ text: MARK_SUCCESSOR_USED[style], values: [write.now, write.tokenHash] }];
    case "updateDevice":
      return [updateDeviceAuthorizationStatement(style, write.record)];
  }
}
