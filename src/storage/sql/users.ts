/**
 * The SQL of an operator's changes to accounts (contract.ts `changeUser`, `endUserAccess`), shared
 * word for word by SQLite and PostgreSQL; each store runs them inside its own transaction. What a
 * change may do is judged once, in ../rules.ts `judgeUserChange`.
 */
import type { UserRecord } from "../contract.js";
import { type PlaceholderStyle, render, type Statement } from "./statements.js";

/**
 * The enabled administrators, in id order. With `lock` (PostgreSQL) their rows are locked
 * (`FOR UPDATE`): two transactions taking administrators away wait for each other, and the second
 * counts again after the first committed (READ COMMITTED re-checks a locked row's condition), so
 * two administrators disabling each other at once cannot leave none.
 */
export function enabledAdminsStatement(style: PlaceholderStyle, lock: boolean): Statement {
  return render(
    `SELECT id FROM users WHERE is_admin = :yes AND disabled_at IS NULL ORDER BY id${lock ? " FOR UPDATE" : ""}`,
    { yes: true },
    style,
  );
}

export function userByIdStatement(style: PlaceholderStyle, id: string, lock: boolean): Statement {
  return render(`SELECT * FROM users WHERE id = :id${lock ? " FOR UPDATE" : ""}`, { id }, style);
}

/** Writes the fields a change may touch: the administrator role and the disabled mark. */
export function updateUserStatement(style: PlaceholderStyle, user: UserRecord): Statement {
  return render(
    "UPDATE users SET is_admin = :isAdmin, disabled_at = :disabledAt WHERE id = :id",
    { isAdmin: user.isAdmin, disabledAt: user.disabledAt ?? null, id: user.id },
    style,
  );
}

/** A removed user goes with its consents and its links to upstream identities. */
export function removeUserStatements(style: PlaceholderStyle, id: string): Statement[] {
  return [
    "DELETE FROM consents WHERE user_id = :id",
    "DELETE FROM upstream_identities WHERE user_id = :id",
    "DELETE FROM users WHERE id = :id",
  ].map((sql) => render(sql, { id }, style));
}

/** The user's grants not yet revoked (each is then revoked with revokeGrantStatements). */
export function activeUserGrantsStatement(style: PlaceholderStyle, userId: string): Statement {
  return render(
    "SELECT grant_id FROM grants WHERE user_id = :userId AND revoked_at IS NULL ORDER BY grant_id",
    { userId },
    style,
  );
}

/**
 * After the grants: the user's sessions (the first statement's count), every upstream token set of
 * the user whoever holds it (a session's, or a grant's the revocation left), and the device
 * authorizations the user approved that no device has redeemed yet, now denied (RFC 8628 §3.5: the
 * device's next poll gets `access_denied`).
 */
export function endUserSessionsStatements(style: PlaceholderStyle, userId: string): Statement[] {
  return [
    "DELETE FROM sessions WHERE user_id = :userId",
    "DELETE FROM upstream_token_sets WHERE user_id = :userId",
    "UPDATE device_authorizations SET status = 'denied' WHERE user_id = :userId AND status = 'approved'",
  ].map((sql) => render(sql, { userId }, style));
}
