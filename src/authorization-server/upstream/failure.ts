/**
 * Why an upstream sign-in failed: the closed set of reasons every upstream step reports
 * (pages/upstream-failure.ts turns each into the page a user understands).
 */

/** The closed set of reasons; each has one page. */
export type UpstreamFailureReason =
  | "unreachable"
  | "cancelled"
  | "provider_error"
  | "state_invalid"
  | "wrong_browser"
  | "nonce_mismatch"
  | "id_token_rejected"
  | "profile_invalid"
  | "email_not_verified"
  | "not_admitted"
  | "no_account"
  | "account_disabled";

/**
 * A failed step: the reason, and a private detail for the log (never shown). A class, told apart
 * with `instanceof`: a provider's JSON may carry any member name, so a shape test could be fooled.
 */
export class UpstreamFailure {
  constructor(
    readonly failure: UpstreamFailureReason,
    readonly detail?: string,
    /** The provider's `error` code, shown only when it has the RFC 6749 shape (see {@link failurePage}). */
    readonly providerError?: string,
  ) {}
}

export function failed(
  failure: UpstreamFailureReason,
  detail?: string,
  providerError?: string,
): UpstreamFailure {
  return new UpstreamFailure(failure, detail, providerError);
}
