/**
 * The resource server's calls to its authorization server (token exchange, upstream tokens): one
 * POST of a form with client authentication (RFC 6749 §2.3.1), one deadline for the request and the
 * body, a byte cap on the answer, and the OAuth error response (RFC 6749 §5.2) mapped to an
 * {@link OAuthError}. No token or secret is ever put in an error.
 */
import { declaresMoreThan, readTextUpTo, TOO_LARGE } from "../shared/bounded-body.js";
import { GatehouseError, GatehouseTypeError, OAuthError, type OAuthErrorCode } from "../shared/errors.js";
import { isLoopbackHost } from "../shared/resource-uri.js";

/** This resource server's credentials at the authorization server (default `client_secret_basic`). */
export interface ClientSecretAuth {
  clientId: string;
  clientSecret: string;
  method?: "client_secret_basic" | "client_secret_post";
}

/** How a call names itself in its errors (public text: never a token or a secret). */
export interface CallLabels {
  /** The message of a `timeout` error. */
  timeout: string;
  /** The start of a `network` error's message (the error's name follows). */
  failure: string;
  /** What a `too_large` error calls the body. */
  response: string;
  /** What `bad_body` and `http_status` errors say answered. */
  endpoint: string;
}

export interface PostFormOptions {
  clientAuth: Required<ClientSecretAuth>;
  /** Deadline for the request and the body, in ms. */
  timeoutMs: number;
  /** Cap on the response body in bytes. */
  maxResponseBytes: number;
  fetch: typeof fetch;
  labels: CallLabels;
}

/** RFC 6749 §2.3.1: client_id and secret are form-urlencoded before Basic encoding. */
function basicCredentials(clientId: string, secret: string): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, "+");
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString("base64")}`;
}

/** `value` as an absolute https URL (plain http only on a loopback host); `name` says which option. */
export function checkedEndpoint(value: string | URL, name: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", `${name} must be an absolute URL`);
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `${name} must be https (http only for loopback hosts)`,
    );
  }
  return url.href;
}

/** The client credentials with their method defaulted; `who` names the caller in the error. */
export function checkedClientAuth(
  auth: ClientSecretAuth | undefined,
  who: string,
): Required<ClientSecretAuth> {
  const { clientId, clientSecret, method = "client_secret_basic" } = auth ?? ({} as ClientSecretAuth);
  if (
    typeof clientId !== "string" ||
    clientId === "" ||
    typeof clientSecret !== "string" ||
    clientSecret === ""
  ) {
    throw new GatehouseTypeError("ERR_INVALID_OPTION", `${who}: clientAuth needs clientId and clientSecret`);
  }
  return { clientId, clientSecret, method };
}

/** The body as text, refusing more than `maxBytes` (counted as they arrive, not as declared). */
export async function boundedText(response: Response, maxBytes: number, what: string): Promise<string> {
  const tooLarge = () => new GatehouseError("too_large", `${what} is larger than ${maxBytes} bytes`);
  if (declaresMoreThan(response.headers, maxBytes)) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  const text = await readTextUpTo(response.body, maxBytes);
  if (text === TOO_LARGE) throw tooLarge();
  return text;
}

/**
 * POSTs `form` to `endpoint` with client authentication (RFC 6749 §2.3.1: Basic, or the credentials
 * in the form for `client_secret_post`) and answers the status and the JSON object of the body.
 * Throws a `GatehouseError` (`network`, `timeout`, `too_large`, `bad_body`) when there is none.
 */
export async function postForm(
  endpoint: string,
  form: URLSearchParams,
  options: PostFormOptions,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const { clientId, clientSecret, method } = options.clientAuth;
  const { labels } = options;
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  };
  if (method === "client_secret_post") {
    form.set("client_id", clientId);
    form.set("client_secret", clientSecret);
  } else {
    headers.authorization = basicCredentials(clientId, clientSecret);
  }
  // One deadline for the request and the body.
  const signal = AbortSignal.timeout(options.timeoutMs);
  let status: number;
  let text: string;
  try {
    const response = await options.fetch(endpoint, {
      method: "POST",
      headers,
      body: form.toString(),
      redirect: "manual",
      signal,
    });
    status = response.status;
    text = await boundedText(response, options.maxResponseBytes, labels.response);
  } catch (error) {
    if (error instanceof GatehouseError) throw error;
    const timedOut = signal.aborted;
    throw new GatehouseError(
      timedOut ? "timeout" : "network",
      timedOut ? labels.timeout : `${labels.failure}: ${(error as Error).name}`,
      { cause: error },
    );
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new TypeError("not an object");
    return { status, body: parsed as Record<string, unknown> };
  } catch {
    throw new GatehouseError("bad_body", `${labels.endpoint} answered ${status} without a JSON object`);
  }
}

/**
 * The error for a non-200 answer: an {@link OAuthError} when the body names one of `codes`
 * (RFC 6749 §5.2; the description is public text), else a `GatehouseError` `http_status`.
 */
export function errorResponse(
  body: Record<string, unknown>,
  status: number,
  codes: ReadonlySet<string>,
  labels: CallLabels,
): Error {
  if (typeof body.error === "string" && codes.has(body.error)) {
    return new OAuthError(body.error as OAuthErrorCode, {
      ...(typeof body.error_description === "string" ? { description: body.error_description } : {}),
      status,
    });
  }
  return new GatehouseError("http_status", `${labels.endpoint} answered ${status}`);
}
