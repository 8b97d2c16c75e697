/**
 * The skeleton every page endpoint shares: GET shows, POST submits, a cross-site POST is refused
 * (./cross-site-post.ts) and anything unexpected becomes an error page.
 */
import { OAuthError } from "../../shared/errors.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { crossSitePost } from "./cross-site-post.js";
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
 * The 403 for a POST another site sent (./cross-site-post.ts): refused before the form is read,
 * so nothing changed. The page says so without naming the header.
 */
function crossSiteRefusal(request: Request, ctx: ServerContext, where: string): Response | undefined {
  const refusal = crossSitePost(request, ctx.options.issuer);
  if (!refusal) return undefined;
  ctx.log.warn("cross_site_post_refused", { where, header: refusal.header, value: refusal.value });
  return errorPage({
    status: 403,
    title: "Request refused",
    message:
      "This form was sent from another site, so it was not accepted and nothing was changed. " +
      "If you were signing in or approving an application, go back to it and start again.",
  });
}

/**
 * The endpoint of an HTML page that is shown with GET and submitted with POST (login, consent,
 * account, admin). A POST another site sent is refused first (403, `crossSiteRefusal`). Any
 * other method is answered 405 with `Allow` (RFC 9110 §15.5.6); an `OAuthError` becomes an error
 * page with its public description only, and anything else goes through `unexpectedErrorPage`
 * (503 when storage is down, otherwise 500, the cause logged only).
 */
export function formPage(options: FormPageOptions): Endpoint {
  return async (request, ctx, info) => {
    try {
      if (request.method === "GET") return await options.show(request, ctx, info);
      if (request.method === "POST") {
        return crossSiteRefusal(request, ctx, options.where) ?? (await options.submit(request, ctx, info));
      }
      const response = errorPage({ status: 405, title: "Method not allowed", message: options.useInstead });
      response.headers.set("allow", "GET, POST");
      return response;
    } catch (error) {
      if (error instanceof OAuthError) return oauthErrorPage(error);
      return unexpectedErrorPage(ctx, options.where, error);
    }
  };
}
