/**
 * Who may sign in through a provider: the operator's admission rules, judged here only. Every rule
 * configured must pass; the library's `admit` callback has the last word.
 */

import type { ResolvedUpstreamProvider, UpstreamProfile } from "../core/upstream-options.js";
import { failed, type UpstreamFailure } from "./failure.js";

/** The domain of an address (after the last `@`), lowercased; undefined when it has none. */
function emailDomain(email: string): string | undefined {
  const at = email.lastIndexOf("@");
  return at > 0 && at < email.length - 1 ? email.slice(at + 1).toLowerCase() : undefined;
}

/**
 * Undefined when `profile` is admitted, otherwise why not:
 *
 * - `emailDomains`: the address must be verified by the provider (`email_verified: true`, GitHub's
 *   verified list), or anyone could claim an address at the domain; its domain must be listed
 *   exactly (no suffix match: `evil-example.com` is not `example.com`).
 * - `githubOrganizations`: a membership the organisations endpoint lists.
 * - `googleHostedDomains`: the ID token's `hd` (Google sets it only for Workspace accounts).
 * - `entraTenants`: the ID token's `tid`.
 * - `admit`: the application's own rule; a throw counts as a refusal.
 */
export async function admissionFailure(
  provider: ResolvedUpstreamProvider,
  profile: UpstreamProfile,
): Promise<UpstreamFailure | undefined> {
  const rules = provider.admission;
  if (rules.emailDomains) {
    if (profile.email === undefined || !profile.emailVerified) {
      return failed("email_not_verified", "no verified e-mail address");
    }
    const domain = emailDomain(profile.email);
    if (domain === undefined || !rules.emailDomains.includes(domain)) {
      return failed("not_admitted", "e-mail domain not admitted");
    }
  }
  if (rules.githubOrganizations) {
    const member = (profile.organizations ?? []).some((o) => rules.githubOrganizations!.includes(o));
    if (!member) return failed("not_admitted", "no admitted organisation");
  }
  if (rules.googleHostedDomains) {
    if (profile.hostedDomain === undefined || !rules.googleHostedDomains.includes(profile.hostedDomain)) {
      return failed("not_admitted", "hosted domain not admitted");
    }
  }
  if (rules.entraTenants) {
    if (profile.tenantId === undefined || !rules.entraTenants.includes(profile.tenantId)) {
      return failed("not_admitted", "tenant not admitted");
    }
  }
  if (rules.admit) {
    let admitted: boolean;
    try {
      admitted = (await rules.admit(profile)) === true;
    } catch {
      admitted = false;
    }
    if (!admitted) return failed("not_admitted", "the admit callback refused");
  }
  return undefined;
}
