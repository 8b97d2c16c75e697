/**
 * From an upstream identity to a local account: found by (provider, subject) only, created on a
 * first sign-in when the operator allows it, its profile fields refreshed at each sign-in.
 */
import { randomToken } from "../../shared/crypto.js";
import { StorageConflictError, type UserRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import type { ResolvedUpstreamProvider, UpstreamProfile } from "../core/upstream-options.js";
import { isUsableAccount } from "../core/user-accounts.js";
import { failed, type UpstreamFailure } from "./failure.js";

/**
 * The password hash of an account created from an upstream identity. It is not in the
 * `scrypt$N$r$p$salt$hash` form, so `verifyPassword` refuses every password against it; the login
 * page still spends a dummy hash's time on it (pages/login.ts), so such a username cannot be told
 * from a real one by timing. An operator may later give the account a password.
 */
export const NO_PASSWORD = "!upstream-only";

/** Usernames are labels for the pages and the admin; the account is keyed by the identity. */
const MAX_USERNAME = 200;

function usernameCandidates(provider: ResolvedUpstreamProvider, profile: UpstreamProfile): string[] {
  const label = profile.username ?? profile.email;
  const candidates = label === undefined ? [] : [`${provider.id}:${label}`];
  candidates.push(`${provider.id}:${profile.subject}`, `${provider.id}:${profile.subject}:${randomToken(6)}`);
  return candidates.filter((c) => c.length <= MAX_USERNAME);
}

/**
 * The local user of `profile`: the one linked to (provider, subject), or a new one when the
 * provider allows account creation. An e-mail address never links: a provider may let anyone
 * claim any address, and addresses are reassigned.
 */
export async function localAccountFor(
  ctx: ServerContext,
  provider: ResolvedUpstreamProvider,
  profile: UpstreamProfile,
): Promise<{ userId: string; created: boolean } | UpstreamFailure> {
  const now = ctx.now();
  const fields = {
    ...(profile.email === undefined ? {} : { email: profile.email }),
    emailVerified: profile.emailVerified,
    ...((profile.name ?? profile.username) === undefined
      ? {}
      : { displayName: (profile.name ?? profile.username)! }),
  };
  const linked = await ctx.store.getUpstreamIdentity(provider.id, profile.subject);
  if (linked) {
    await ctx.store.recordUpstreamSignIn({
      providerId: provider.id,
      subject: profile.subject,
      ...fields,
      lastSignInAt: now,
    });
    // A disabled account (user-accounts.ts) is not signed in through its provider either; the
    // provider has already said who this is, so naming the reason reveals nothing to a stranger.
    if (!isUsableAccount(await ctx.store.getUser(linked.userId)))
      return failed("account_disabled", "the linked account is disabled");
    return { userId: linked.userId, created: false };
  }
  if (!provider.createAccounts) return failed("no_account", "no linked account and createAccounts is off");
  for (const username of usernameCandidates(provider, profile)) {
    const user: UserRecord = {
      id: randomToken(16),
      username,
      passwordHash: NO_PASSWORD,
      isAdmin: false,
      createdAt: now,
    };
    try {
      await ctx.store.createUserWithUpstreamIdentity(user, {
        providerId: provider.id,
        subject: profile.subject,
        userId: user.id,
        ...fields,
        createdAt: now,
        lastSignInAt: now,
      });
      return { userId: user.id, created: true };
    } catch (error) {
      if (!(error instanceof StorageConflictError)) throw error;
      // Either the username is taken (try the next) or a parallel first sign-in linked it first.
      const raced = await ctx.store.getUpstreamIdentity(provider.id, profile.subject);
      if (raced) return { userId: raced.userId, created: false };
    }
  }
  return failed("no_account", "no free username");
}
