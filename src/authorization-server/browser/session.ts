/**
 * A browser's sign-in: the session cookie's record in the store, started at login and ended at
 * logout.
 */
import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import type { SessionRecord, UserRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { isUsableAccount } from "../core/user-accounts.js";
import { clearCookie, readCookie, serializeCookie } from "./cookies.js";

/** How long a sign-in lasts in one browser. */
export const SESSION_TTL_SECONDS = 12 * 60 * 60;

export interface CurrentSession {
  record: SessionRecord;
  user: UserRecord;
  /** The raw cookie value (only ever used to derive CSRF tokens; never logged or stored). */
  cookieValue: string;
}

/** The signed-in user of this browser, from the session cookie (stored hashed), if still valid. */
export async function currentSession(
  request: Request,
  ctx: ServerContext,
): Promise<CurrentSession | undefined> {
  const cookieValue = readCookie(request, "session", ctx);
  if (cookieValue === undefined) return undefined;
  const record = await ctx.store.getSession(sha256Base64url(cookieValue), ctx.now());
  if (!record) return undefined;
  const user = await ctx.store.getUser(record.userId);
  // A disabled account has no sign-in, even through a session started while it was being disabled.
  if (!user || !isUsableAccount(user)) return undefined;
  return { record, user, cookieValue };
}

/**
 * Starts a session for `userId` after a successful login. The value is always fresh, never one the
 * browser brought along (no session fixation). Returns the `Set-Cookie` value.
 */
export async function startSession(ctx: ServerContext, userId: string): Promise<string> {
  return (await startSessionRecord(ctx, userId)).cookie;
}

/** {@link startSession}, also returning the stored record (the upstream sign-in keeps tokens by its hash). */
export async function startSessionRecord(
  ctx: ServerContext,
  userId: string,
): Promise<{ cookie: string; record: SessionRecord }> {
  const value = randomToken(32);
  const now = ctx.now();
  const record = {
    idHash: sha256Base64url(value),
    userId,
    createdAt: now,
    expiresAt: now + SESSION_TTL_SECONDS * 1000,
  };
  await ctx.store.createSession(record);
  return { cookie: serializeCookie("session", value, ctx, SESSION_TTL_SECONDS), record };
}

/** Ends the session server-side and returns the `Set-Cookie` value that clears it in the browser. */
export async function endSession(ctx: ServerContext, session: CurrentSession | undefined): Promise<string> {
  if (session) await ctx.store.deleteSession(session.record.idHash);
  return clearCookie("session", ctx);
}
