/**
 * Error pages of the browser side: never a redirect, so nothing reaches an unvalidated redirect URI
 * (OAuth 2.1 §4.1.2.1).
 */
import type { OAuthError } from "../../shared/errors.js";
import { type ClientRecord, StorageUnavailableError } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { clientFacts } from "./client-info.js";
import { html, page } from "./html.js";
import { htmlResponse } from "./security-headers.js";

export interface ErrorPageOptions {
  status: number;
  title: string;
  message: string;
  /** Error code to show (public, e.g. `invalid_request`). */
  code?: string;
  /** Shown as "who is asking" when known. */
  client?: ClientRecord;
  redirectUri?: string;
  /**
   * For untrusted clients: the error response URL the user may choose to send back to the client
   * after seeing who it is (no automatic redirect, SECURITY.md "Authorization endpoint").
   */
  returnUrl?: string;
}

/** An error page: never a redirect, so nothing reaches an unvalidated redirect URI. */
export function errorPage(options: ErrorPageOptions): Response {
  const body = html`<h1>${options.title}</h1>
<p class="error" data-testid="error-message">${options.message}${
    options.code ? html` <span class="muted">(<code>${options.code}</code>)</span>` : ""
  }</p>
${options.client ? clientFacts(options.client, options.redirectUri) : ""}
${
  options.returnUrl
    ? html`<p>You can tell the application that the request failed, or simply close this page.</p>
<div class="actions"><a class="button" data-testid="return-to-client" href="${options.returnUrl}">Return to the application</a></div>`
    : html`<p class="muted">You can close this page.</p>`
}`;
  return htmlResponse(page(options.title, body), { status: options.status });
}

/** A page for an `OAuthError` shown instead of redirecting (public description only, never `detail`). */
export function oauthErrorPage(error: OAuthError, extra: Partial<ErrorPageOptions> = {}): Response {
  return errorPage({
    // A page is not an HTTP authentication challenge: 401 (which needs WWW-Authenticate) becomes 400.
    status: error.status >= 400 && error.status < 500 && error.status !== 401 ? error.status : 400,
    title: "This request cannot be completed",
    message: error.description ?? "The request is not valid.",
    code: error.code,
    ...extra,
  });
}

/**
 * What a page shows when something outside the request failed: storage down → 503 (SECURITY.md
 * "Storage, faults and load"), anything else → 500. The cause reaches the log, never the page.
 */
export function unexpectedErrorPage(ctx: ServerContext, where: string, error: unknown): Response {
  if (error instanceof StorageUnavailableError) {
    ctx.log.warn("storage_unavailable", { where });
    const response = errorPage({
      status: 503,
      title: "Temporarily unavailable",
      message: "The service is temporarily unavailable. Please try again in a moment.",
    });
    response.headers.set("retry-after", "5");
    return response;
  }
  ctx.log.error("page_failed", { where, error: error instanceof Error ? error.name : typeof error });
  return errorPage({
    status: 500,
    title: "Something went wrong",
    message: "The server could not complete this step.",
  });
}
