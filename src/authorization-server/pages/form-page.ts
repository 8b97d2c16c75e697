import { OAuthError } from "../../shared/errors.js";
import type { Endpoint } from "../context.js";
import { errorPage, oauthErrorPage, unexpectedErrorPage } from "./error-page.js";

export interface FormPageOptions {
  /** Names the page in the log line of an unexpected failure. */
  where: string;
  /** GET: renders the page. */
  show: Endpoint;
  /** POST: takes the form's decision. */
  submit: Endpoint;
  /** The 405 page's message, telling the user what to use instead. */
  useInstead: string;
}

/**
 * The endpoint of an HTML page that is shown with GET and submitted with POST (login, consent,
 * account, admin). Any other method is answered 405 with `Allow` (RFC 9110 §15.5.6); an
 * `OAuthError` becomes an error page with its public description only, and anything else goes
 * through `unexpectedErrorPage` (503 when storage is down, otherwise 500, the cause logged only).
 */
export function formPage(options: FormPageOptions): Endpoint {
  return async (request, ctx) => {
    try {
      if (request.method === "GET") return await options.show(request, ctx);
      if (request.method === "POST") return await options.submit(request, ctx);
      const response = errorPage({ status: 405, title: "Method not allowed", message: options.useInstead });
      response.headers.set("allow", "GET, POST");
      return response;
    } catch (error) {
      if (error instanceof OAuthError) return oauthErrorPage(error);
      return unexpectedErrorPage(ctx, options.where, error);
    }
  };
}
