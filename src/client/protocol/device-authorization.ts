/**
 * The device authorization grant (RFC 8628) on the wire: the device authorization request (§3.1)
 * and its response (§3.2), checked before anything in it is shown to the user, then the polling
 * of the token endpoint (§3.4) with the answers of §3.5: `authorization_pending` (poll again),
 * `slow_down` (poll again, 5 s slower), `access_denied` and `expired_token` (stop). Every body is
 * read under its cap (response-limits.ts); the `device_code` is a secret and appears in no message.
 */
import * as oauth from "oauth4webapi";
import { AuthorizationFlowError } from "../errors.js";
import { deviceAuthorizationEndpoint } from "./discovery.js";
import { assertSecureUrl, type FetchLike, wireOptions } from "./http.js";
import { explainNetworkError } from "./network-errors.js";
import {
  clientAuthentication,
  endpointOAuthError,
  grantRequest,
  type TokenRequestContext,
} from "./tokens.js";

/** RFC 8628 §3.4: the grant type of the token request. */
export const DEVICE_CODE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code";

/** RFC 8628 §3.2: without an `interval`, clients MUST wait 5 seconds between polls. */
const DEFAULT_INTERVAL_SECONDS = 5;
/** RFC 8628 §3.5: on `slow_down` the interval grows by 5 seconds, for this and all later polls. */
const SLOW_DOWN_SECONDS = 5;
/** A server asking for less than a second is not polled faster than once a second. */
const MIN_INTERVAL_SECONDS = 1;
/**
 * However long a server says its codes live, the client waits at most this long: a login nobody
 * finishes must end (common servers give 10 to 15 minutes, the longest 30).
 */
const MAX_WAIT_SECONDS = 30 * 60;
/** How long one request (the device authorization request, one poll) may take. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Consecutive transport failures while polling before the flow gives up. */
const MAX_TRANSPORT_FAILURES = 3;
/** RFC 8628 §6.1 suggests short user codes; anything this long is not meant for a person. */
const MAX_USER_CODE_LENGTH = 64;
const MAX_URI_LENGTH = 2048;

/**
 * Characters that a terminal or a bidirectional renderer would interpret: C0 and C1 controls, DEL,
 * and the Unicode direction marks, embeddings, overrides and isolates. A user code or URI from the
 * server carrying one could rewrite what the user sees (a fake URI, a hidden line).
 */
const UNPRINTABLE = /[\p{Cc}\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/** A checked device authorization response (RFC 8628 §3.2). */
export interface DeviceAuthorization {
  /** Secret: proves this device's side of the grant when polling; never shown or logged. */
  deviceCode: string;
  /** What the user enters on the verification page. */
  userCode: string;
  /** Where the user goes, on any device (https, or http on loopback). */
  verificationUri: string;
  /** The same page with the user code filled in, when the server offers one (§3.3.1). */
  verificationUriComplete?: string;
  /** When the codes stop working (ms since the epoch), at most 30 minutes from now. */
  expiresAt: number;
  /** Seconds between polls (§3.2 `interval`, default 5), at least 1 and at most the codes' lifetime. */
  interval: number;
}

function nonconforming(step: string, message: string, cause?: unknown): AuthorizationFlowError {
  return new AuthorizationFlowError("invalid_document", message, {
    kind: "nonconforming",
    step,
    ...(cause !== undefined && { cause }),
  });
}

/** A user code to print: non-empty, short, nothing a terminal would interpret. */
function displayableCode(value: string, step: string): string {
  if (value.length === 0 || value.length > MAX_USER_CODE_LENGTH || UNPRINTABLE.test(value)) {
    throw nonconforming(
      step,
      `user_code is empty, longer than ${MAX_USER_CODE_LENGTH} characters or holds control characters; not shown`,
    );
  }
  return value;
}

/** A verification URI to print and open: short, printable, https (http only on loopback). */
function displayableUri(value: string, member: string, step: string): string {
  if (value.length > MAX_URI_LENGTH || UNPRINTABLE.test(value)) {
    throw nonconforming(
      step,
      `${member} is longer than ${MAX_URI_LENGTH} characters or holds control characters; not shown`,
    );
  }
  // The page where the user signs in: the same rule as the authorization endpoint's.
  assertSecureUrl(value, `${step}: ${member}`);
  return value;
}

/** Maps what the device authorization request threw to our error, never quoting a code. */
function deviceAuthorizationError(error: unknown, step: string, endpoint: string): AuthorizationFlowError {
  if (error instanceof AuthorizationFlowError) return error;
  const answered = endpointOAuthError(error, "oauth_error", "device authorization", step);
  if (answered) return answered;
  if (explainNetworkError(error) !== undefined || (error instanceof TypeError && error.cause !== undefined)) {
    return new AuthorizationFlowError(
      "transport_failed",
      "could not reach the device authorization endpoint",
      {
        kind: "transport",
        step,
        cause: error,
        url: endpoint,
      },
    );
  }
  return nonconforming(step, "device authorization response does not conform", error);
}

/**
 * RFC 8628 §3.1: asks for a device code and a user code for `resource` (RFC 8707, as in every
 * authorization request here), `scope` and, with `consentPrompt`, `prompt=consent`, authenticated as the client is registered, at the
 * server's `device_authorization_endpoint`. The answer is checked before it is returned: the
 * codes and URIs are printable, the URIs https (http on loopback), the lifetime positive.
 */
export async function requestDeviceAuthorization(
  ctx: TokenRequestContext,
  options: {
    /** Undefined only under an issuer's `resource: "omit"` setting (issuer-compat.ts). */
    resource: string | undefined;
    scope?: string | undefined;
    consentPrompt?: boolean;
    /** Cancels the request (which also gives up after 30 s). */
    signal?: AbortSignal | undefined;
  },
): Promise<DeviceAuthorization> {
  const { metadata } = ctx;
  const step = `device authorization request (RFC 8628 §3.1, ${metadata.issuer})`;
  const endpoint = deviceAuthorizationEndpoint(metadata, step);
  // Mix-up defence: a registration of one issuer is never presented to another issuer's endpoint.
  if (ctx.client.issuer !== metadata.issuer) {
    throw new AuthorizationFlowError("issuer_mismatch", "client registration belongs to another issuer", {
      kind: "refused",
      step,
    });
  }
  const as = metadata as oauth.AuthorizationServer;
  const client: oauth.Client = { client_id: ctx.client.client_id };
  const parameters: Record<string, string> = {
    ...(options.resource !== undefined && { resource: options.resource }),
    ...(options.scope !== undefined && { scope: options.scope }),
    // OpenID Connect Core §11, as in the code flow (authorization.ts `needsConsentPrompt`): an
    // OpenID provider grants offline_access only with prompt=consent, and takes the
    // authorization request's parameters here too.
    ...(options.consentPrompt && { prompt: "consent" }),
  };
  let answer: oauth.DeviceAuthorizationResponse;
  try {
    const response = await oauth.deviceAuthorizationRequest(
      as,
      client,
      clientAuthentication(ctx.client, ctx.keys),
      parameters,
      wireOptions(
        boundedInTime(ctx.fetch, options.signal),
        [endpoint],
        "device authorization response",
        step,
      ),
    );
    answer = await oauth.processDeviceAuthorizationResponse(as, client, response);
  } catch (error) {
    // Cancelled by the caller: its reason, as for any aborted request.
    if (options.signal?.aborted) throw options.signal.reason;
    throw deviceAuthorizationError(error, step, endpoint);
  }
  const interval = answer.interval ?? DEFAULT_INTERVAL_SECONDS;
  if (!(answer.expires_in > 0) || !(interval > 0)) {
    throw nonconforming(step, "expires_in and interval must be positive numbers of seconds");
  }
  // The client's own clock bounds the login: at most 30 minutes, whatever the server says.
  const lifetime = Math.min(answer.expires_in, MAX_WAIT_SECONDS);
  return {
    deviceCode: answer.device_code,
    userCode: displayableCode(answer.user_code, step),
    verificationUri: displayableUri(answer.verification_uri, "verification_uri", step),
    ...(answer.verification_uri_complete !== undefined && {
      verificationUriComplete: displayableUri(
        answer.verification_uri_complete,
        "verification_uri_complete",
        step,
      ),
    }),
    expiresAt: Date.now() + lifetime * 1000,
    // Never faster than once a second, never longer than the codes live (issue 22: an interval
    // above 2^31 ms overflowed setTimeout into a 1 ms timer, and a poll loop of ~200 a second).
    interval: Math.min(Math.max(interval, MIN_INTERVAL_SECONDS), lifetime),
  };
}

/**
 * `fetchImpl` whose every request gives up after {@link REQUEST_TIMEOUT_MS} (a server that never
 * answers does not hold the login up for ever) and ends when `signal` is aborted.
 */
function boundedInTime(fetchImpl: FetchLike, signal: AbortSignal | undefined): FetchLike {
  return (input, init) => {
    const signals = [AbortSignal.timeout(REQUEST_TIMEOUT_MS)];
    if (signal) signals.push(signal);
    if (init?.signal) signals.push(init.signal);
    return fetchImpl(input, { ...init, signal: AbortSignal.any(signals) });
  };
}

/** setTimeout turns any delay above this into 1 ms (Node's TIMEOUT_MAX). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Waits `ms` (never more than the timer can hold), or rejects with the signal's reason once aborted. */
function waitFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const delay = Math.min(Math.max(ms, 0), MAX_TIMER_MS);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, delay);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export interface PollOptions {
  /** The same `resource` as in the device authorization request (RFC 8707 §2.2), or undefined with it. */
  resource: string | undefined;
  /** Stops the polling: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** How the pause between polls is taken (default: a timer that the signal cuts short). */
  wait?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

function expired(step: string, fromServer?: AuthorizationFlowError): AuthorizationFlowError {
  return new AuthorizationFlowError(
    "authorization_timed_out",
    "the user code expired before the login was approved; start the login again",
    {
      kind: fromServer ? "oauth" : "action",
      step,
      ...(fromServer && { status: fromServer.status, oauthError: fromServer.oauthError, cause: fromServer }),
    },
  );
}

/**
 * RFC 8628 §3.4-3.5: polls the token endpoint with the device code every `interval` seconds until
 * the user approves (the token response), denies (`authorization_denied`) or the codes expire
 * (`authorization_timed_out`, from the server's `expired_token` or the client's own clock, which
 * ends the flow when the codes' lifetime, at most 30 minutes, is over: no pause runs past it).
 * `slow_down` adds 5 seconds to the interval for good; a transport failure (a poll unanswered
 * after 30 s among them) doubles it (§3.5, exponential backoff), and three in a row end the flow.
 * The signal ends the wait and a poll in flight alike. The context's DPoP key, when it has one,
 * proves possession on every poll (RFC 9449 §5).
 */
export async function pollDeviceAuthorization(
  ctx: TokenRequestContext,
  authorization: DeviceAuthorization,
  options: PollOptions,
): Promise<oauth.TokenEndpointResponse> {
  const step = `device authorization, polling the token endpoint (RFC 8628 §3.4, ${ctx.metadata.issuer})`;
  const wait = options.wait ?? waitFor;
  const polling: TokenRequestContext = { ...ctx, fetch: boundedInTime(ctx.fetch, options.signal) };
  let interval = authorization.interval;
  let transportFailures = 0;
  for (;;) {
    // The client's own clock ends the flow (RFC 8628 §3.5 leaves polling to the client): a pause
    // never runs past the codes' lifetime, however the interval grew (slow_down, backoff) or what
    // the server sent, so no timer is ever asked for more than 30 minutes (setTimeout's limit is
    // 2^31 - 1 ms). The poll at the end of the lifetime is the last: the server's answer to it
    // (tokens for a login approved just in time, or expired_token) is the one the user sees.
    const remaining = authorization.expiresAt - Date.now();
    if (remaining <= 0) throw expired(step);
    await wait(Math.min(interval * 1000, remaining), options.signal);
    options.signal?.throwIfAborted();
    try {
      return await grantRequest(polling, DEVICE_CODE_GRANT_TYPE, {
        device_code: authorization.deviceCode,
        ...(options.resource !== undefined && { resource: options.resource }),
      });
    } catch (error) {
      // Cancelled by the caller mid-request: its reason, as for any aborted request.
      if (options.signal?.aborted) throw options.signal.reason;
      if (!(error instanceof AuthorizationFlowError)) throw error;
      const answer = error.kind === "oauth" ? error.oauthError?.error : undefined;
      if (error.kind === "transport") {
        transportFailures++;
        if (transportFailures >= MAX_TRANSPORT_FAILURES) throw error;
        interval *= 2;
      } else {
        transportFailures = 0;
        if (answer === "slow_down") interval += SLOW_DOWN_SECONDS;
        else if (answer === "access_denied") {
          throw new AuthorizationFlowError(
            "authorization_denied",
            "the login was denied on the verification page",
            {
              kind: "oauth",
              step,
              ...(error.status !== undefined && { status: error.status }),
              ...(error.oauthError && { oauthError: error.oauthError }),
              cause: error,
            },
          );
        } else if (answer === "expired_token") throw expired(step, error);
        else if (answer !== "authorization_pending") throw error;
      }
    }
  }
}
