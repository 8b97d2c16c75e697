/**
 * The SQLite store's operator changes to accounts (contract.ts `changeUser`, `endUserAccess`), apart
 * from store.ts as the other *-methods.ts. Each runs in one write of the group commit, under the
 * write lock (`BEGIN IMMEDIATE`), so the administrators counted are the ones the change leaves.
 */
import type { AuthorizationStore } from "../contract.js";
import { judgeUserChange } from "../rules.js";
import { type Row, rowToUser } from "../sql/rows.js";
import type { Statement } from "../sql/statements.js";
import {
  activeUserGrantsStatement,
  enabledAdminsStatement,
  endUserSessionsStatements,
  removeUserStatements,
  updateUserStatement,
  userByIdStatement,
} from "../sql/users.js";

export interface SqliteUserIo {
  all(text: string, ...params: unknown[]): Row[];
  exec(statement: Statement): number;
  write<T>(fn: () => T): Promise<T>;
  revokeGrantRows(grantId: string, now: number): boolean;
  sqliteValue(value: unknown): unknown;
}

export function sqliteUserMethods({
  all,
  exec,
  write,
  revokeGrantRows,
  sqliteValue,
}: SqliteUserIo): Pick<AuthorizationStore, "changeUser" | "endUserAccess"> {
  const rows = (statement: Statement) => all(statement.text, ...statement.values.map(sqliteValue));
  return {
    async changeUser(id, change, now) {
      return write(() => {
        const [row] = rows(userByIdStatement("?", id, false));
        if (!row) return { status: "not_found" as const };
        const user = rowToUser(row);
        const admins = rows(enabledAdminsStatement("?", false)).length;
        const next = judgeUserChange(user, change, admins, now);
        if (next === "last_admin") return { status: "last_admin" as const };
        if (change === "remove") for (const statement of removeUserStatements("?", id)) exec(statement);
        else exec(updateUserStatement("?", next));
        return { status: "changed" as const, user: next };
      });
    },
    async endUserAccess(userId, now) {
      return write(() => {
        let grants = 0;
        for (const row of rows(activeUserGrantsStatement("?", userId))) {
          if (revokeGrantRows(String(row.grant_id), now)) grants++;
        }
        const [sessions = 0] = endUserSessionsStatements("?", userId).map(exec);
        return { grants, sessions };
      });
    },
  };
}
