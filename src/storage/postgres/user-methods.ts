/**
 * The PostgreSQL store's operator changes to accounts (contract.ts `changeUser`, `endUserAccess`),
 * apart from store.ts as the other *-methods.ts. A change locks the enabled administrators' rows
 * first, then the user's (one order for every such transaction), so two changes taking
 * administrators away are serialised and the second counts what the first left.
 */
import type { AuthorizationStore } from "../contract.js";
import { judgeUserChange } from "../rules.js";
import { rowToUser } from "../sql/rows.js";
import {
  activeUserGrantsStatement,
  enabledAdminsStatement,
  endUserSessionsStatements,
  removeUserStatements,
  updateUserStatement,
  userByIdStatement,
} from "../sql/users.js";
import type { Db } from "./pool.js";
import { exec, revokeGrantRows } from "./transaction-writes.js";

export function postgresUserMethods(
  transaction: Db["transaction"],
): Pick<AuthorizationStore, "changeUser" | "endUserAccess"> {
  return {
    async changeUser(id, change, now) {
      return transaction(async (tx) => {
        const admins = enabledAdminsStatement("$n", true);
        const adminCount = (await tx.query(admins.text, [...admins.values])).length;
        const byId = userByIdStatement("$n", id, true);
        const [row] = await tx.query(byId.text, [...byId.values]);
        if (!row) return { status: "not_found" as const };
        const next = judgeUserChange(rowToUser(row), change, adminCount, now);
        if (next === "last_admin") return { status: "last_admin" as const };
        if (change === "remove") {
          for (const statement of removeUserStatements("$n", id)) await exec(tx.execute, statement);
        } else {
          await exec(tx.execute, updateUserStatement("$n", next));
        }
        return { status: "changed" as const, user: next };
      });
    },
    async endUserAccess(userId, now) {
      return transaction(async (tx) => {
        const active = activeUserGrantsStatement("$n", userId);
        let grants = 0;
        for (const row of await tx.query(active.text, [...active.values])) {
          if (await revokeGrantRows(tx, String(row.grant_id), now)) grants++;
        }
        const counts: number[] = [];
        for (const statement of endUserSessionsStatements("$n", userId))
          counts.push(await exec(tx.execute, statement));
        return { grants, sessions: counts[0] ?? 0 };
      });
    },
  };
}
