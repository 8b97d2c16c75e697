/**
 * An interaction (../interaction.ts) loaded together with the browser it is bound to, and the
 * CSRF token of its forms.
 */
import { sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import type { InteractionRecord } from "../../storage/contract.js";
import type { ServerContext } from "../config/context.js";
import { bindingMatches, csrfMatches, csrfToken, isInteractionId } from "../interaction.js";
import { readCookie } from "./cookies.js";
import { errorPage } from "./error-page.js";

/** An interaction together with the binding secret of the browser it belongs to. */
export interface BoundInteraction {
  interaction: InteractionRecord;
  /** The browser's binding cookie (raw); it derives the CSRF token of the interaction's forms. */
  binding: string;
}

/**
 * Loads the interaction `id` for this browser. The binding cookie's hash must equal the one stored
 * at `/authorize` (constant time), so a continuation URL sent to someone else, or opened in another
 * browser, gets an error page (SECURITY.md "Consent and login pages": bound to the browser).
 */
export async function loadBoundInteraction(
  request: Request,
  ctx: ServerContext,
  id: string | null | undefined,
): Promise<BoundInteraction | Response> {
  const expired = () =>
    errorPage({
      status: 400,
      title: "This request has expired",
      message: "This sign-in request is no longer valid. Go back to the application and start again.",
    });
  if (!isInteractionId(id)) return expired();
  const interaction = await ctx.store.getInteraction(id, ctx.now());
  if (!interaction) return expired();
  const binding = readCookie(request, "binding", ctx);
  if (binding === undefined || !bindingMatches(binding, interaction)) {
    ctx.log.warn("interaction_browser_mismatch", { client_id: interaction.clientId });
    return errorPage({
      status: 403,
      title: "Wrong browser",
      message:
        "This link belongs to a sign-in that was started in another browser. For your safety it only works " +
        "in the browser that started it. Go back to the application and start again here.",
    });
  }
  return { interaction, binding };
}

/** The CSRF token of this interaction's forms. */
export function interactionCsrf(bound: BoundInteraction): string {
  return csrfToken(bound.binding, `interaction:${bound.interaction.id}`);
}

/** Checks a submitted CSRF token against the interaction's stored hash (constant time). */
export function interactionCsrfValid(bound: BoundInteraction, submitted: string | undefined): boolean {
  return (
    submitted !== undefined &&
    timingSafeEqualString(sha256Base64url(submitted), bound.interaction.csrfHash) &&
    // Also recompute from the cookie: the token must belong to this browser and this interaction.
    csrfMatches(submitted, interactionCsrf(bound))
  );
}

export function csrfFailurePage(): Response {
  return errorPage({
    status: 403,
    title: "Request refused",
    message:
      "This form was not sent from this page (missing or wrong security token). Reload the page and try again.",
  });
}
