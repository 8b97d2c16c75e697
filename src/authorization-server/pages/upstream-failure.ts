/**
 * The page a user understands for each reason an upstream sign-in failed (upstream/failure.ts),
 * through the browser side's one error page. Nothing the provider sent reaches these pages but an
 * error code of the RFC 6749 §4.1.2.1 shape; the provider's `error_description` never does.
 */
import { errorPage } from "../browser/error-page.js";
import type { UpstreamFailure, UpstreamFailureReason } from "../upstream/failure.js";

/** RFC 6749 §4.1.2.1: `error` is ASCII without quotes or backslashes; shown only if also short and plain. */
const PLAIN_ERROR_CODE = /^[a-z][a-z0-9_]{0,63}$/;

const PAGES: Record<
  UpstreamFailureReason,
  { status: number; title: string; message: (name: string) => string }
> = {
  unreachable: {
    status: 502,
    title: "Sign-in provider unreachable",
    message: (name) =>
      `${name} could not be reached or did not answer as expected. Try again in a few minutes.`,
  },
  cancelled: {
    status: 400,
    title: "Sign-in cancelled",
    message: (name) =>
      `The sign-in at ${name} was cancelled, so you are not signed in. Go back to the application to start again.`,
  },
  provider_error: {
    status: 400,
    title: "Sign-in not completed",
    message: (name) => `${name} did not complete the sign-in. Go back to the application and try again.`,
  },
  state_invalid: {
    status: 400,
    title: "This sign-in could not be verified",
    message: () =>
      "This sign-in answer does not belong to a sign-in started here, has expired or was already used. " +
      "Go back to the application and start again.",
  },
  wrong_browser: {
    status: 403,
    title: "Wrong browser",
    message: () =>
      "This sign-in was started in another browser. For your safety it only completes in the browser " +
      "that started it. Start again here.",
  },
  nonce_mismatch: {
    status: 400,
    title: "This sign-in could not be verified",
    message: (name) => `The answer from ${name} does not belong to this sign-in. Start again.`,
  },
  id_token_rejected: {
    status: 400,
    title: "This sign-in could not be verified",
    message: (name) =>
      `The answer from ${name} was not issued for this server, or is no longer valid. Start again; if it keeps happening, tell your administrator.`,
  },
  profile_invalid: {
    status: 502,
    title: "Sign-in not completed",
    message: (name) => `${name} did not say who you are. Try again later, or tell your administrator.`,
  },
  email_not_verified: {
    status: 403,
    title: "E-mail address not verified",
    message: (name) =>
      `Your e-mail address at ${name} is not verified. Verify it at ${name}, then sign in again.`,
  },
  not_admitted: {
    status: 403,
    title: "Not allowed to sign in here",
    message: (name) =>
      `Your ${name} account is not allowed to sign in to this server (its domain, organisation or tenant is not admitted). Ask your administrator if you think this is wrong.`,
  },
  no_account: {
    status: 403,
    title: "No account here",
    message: (name) =>
      `There is no account on this server for your ${name} sign-in, and new accounts are not created automatically. Ask your administrator to create one for you.`,
  },
  account_disabled: {
    status: 403,
    title: "Account disabled",
    message: () =>
      "The account on this server for your sign-in is disabled. Ask an administrator of this server to enable it.",
  },
};

/** The page of a failed upstream sign-in. `providerName` is configuration, never the provider's answer. */
export function failurePage(failure: UpstreamFailure, providerName: string): Response {
  const page = PAGES[failure.failure];
  const code = failure.providerError;
  return errorPage({
    status: page.status,
    title: page.title,
    message: page.message(providerName),
    ...(code !== undefined && PLAIN_ERROR_CODE.test(code) ? { code } : {}),
  });
}
