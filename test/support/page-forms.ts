/**
 * Picks a form on one of Gatehouse's pages by its purpose, never by its position: the account page
 * carries a "Withdraw" form per authorization before its "Sign out" form, so a helper that took the
 * first form's fields (or the first value of each field name across the page) signed nobody out and
 * withdrew a consent instead, and a test meant to pin sign-out could not fail.
 */
import { hiddenFields } from "./flow.js";

/**
 * The hidden fields of the one form on `html` whose hidden `action` field is `purpose` (the account
 * page's `logout`, `revoke`, `revoke-grant`), plus the form's `action` URL as `formAction`. Throws
 * when no form, or more than one, has that purpose: a test never guesses.
 */
export function formFor(
  html: string,
  purpose: string,
): { fields: Record<string, string>; formAction: string } {
  const matches = [...html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/g)]
    .map((m) => ({ attributes: m[1]!, fields: hiddenFields(m[2]!) }))
    .filter((f) => f.fields.action === purpose);
  if (matches.length !== 1) throw new Error(`expected one form for "${purpose}", found ${matches.length}`);
  const formAction = /\baction="([^"]*)"/.exec(matches[0]!.attributes)?.[1] ?? "";
  return { fields: matches[0]!.fields, formAction: formAction.replace(/&amp;/g, "&") };
}

/**
 * The query string of the one review button (a GET form with a hidden `review` field, the account
 * and admin pages' destructive buttons) on `html` whose review is `review` and whose hidden fields
 * include `match`. Throws when none, or more than one, matches.
 */
export function reviewQuery(html: string, review: string, match: Record<string, string> = {}): string {
  const matches = [...html.matchAll(/<form method="get"[^>]*>([\s\S]*?)<\/form>/g)]
    .map((m) => hiddenFields(m[1]!))
    .filter((f) => f.review === review && Object.entries(match).every(([k, v]) => f[k] === v));
  if (matches.length !== 1) throw new Error(`expected one "${review}" button, found ${matches.length}`);
  return new URLSearchParams(matches[0]!).toString();
}
