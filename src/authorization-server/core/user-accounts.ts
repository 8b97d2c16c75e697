/**
 * An operator's changes to accounts (issue 26, offboarding), one place for `gatehouse users` and
 * the admin page: disable, enable, give or take the administrator role, remove. Disabling and
 * removing end what the user holds: every grant (refresh tokens at once; introspection answers
 * inactive; RFC 7009 §2.1), every browser session, the upstream tokens kept for them, and device
 * approvals not yet redeemed. The last enabled administrator cannot be disabled, removed or
 * demoted (storage/rules.ts `judgeUserChange`).
 *
 * Order matters: the account is changed first (committed), then its access ended. A code or device
 * grant redeemed meanwhile is either committed before the revocation reads the user's grants (and
 * revoked there) or reads the changed account afterwards ({@link refuseGrantOfDisabledUser}), so
 * no grant of a disabled user survives.
 */
import type {
  AuthorizationStore,
  EndedUserAccess,
  UserChange,
  UserChangeResult,
  UserRecord,
} from "../../storage/contract.js";

/** A user who may sign in and be issued grants: one that exists and is not disabled. */
export function isUsableAccount(user: UserRecord | undefined): boolean {
  return user !== undefined && user.disabledAt === undefined;
}

export type AccountChangeResult =
  | (Extract<UserChangeResult, { status: "changed" }> & { ended?: EndedUserAccess })
  | Exclude<UserChangeResult, { status: "changed" }>;

/** Applies `change` to user `userId`; disabling and removing then end the user's access. */
export async function changeAccount(
  store: AuthorizationStore,
  userId: string,
  change: UserChange,
  now: number,
): Promise<AccountChangeResult> {
  const result = await store.changeUser(userId, change, now);
  if (result.status !== "changed" || (change !== "disable" && change !== "remove")) return result;
  return { ...result, ended: await store.endUserAccess(userId, now) };
}

/**
 * After the store issued grant `grantId` for `userId` (a code redemption, a device poll): when the
 * account is disabled or removed by now, the grant is revoked and true returned, and the caller
 * answers with an error instead of the tokens. Sealed codes leave no row the disabling could find,
 * so this read is what stops them.
 */
export async function refuseGrantOfDisabledUser(
  store: AuthorizationStore,
  grantId: string,
  userId: string | undefined,
  now: number,
): Promise<boolean> {
  if (userId === undefined || isUsableAccount(await store.getUser(userId))) return false;
  await store.revokeGrant(grantId, now);
  return true;
}
