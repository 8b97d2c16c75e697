/**
 * The binding of an interaction (../interaction.ts) to the browser that started it: made at
 * `/authorize`, checked by the login and consent pages and the upstream sign-in's callback,
 * released with the answer. Also the CSRF token of the interaction's forms.
 */
import { sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import type { InteractionRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { randomToken } from "../core/random.js";
import {
  interactionCookieName,
  interactionCookies,
  readCookie,
  readNamedCookie,
  serializeNamedCookie,
} from "./cookies.js";
import { errorPage } from "./error-page.js";
import {
  bindingMatches,
  csrfMatches,
  csrfToken,
  INTERACTION_TTL_MS,
  isInteractionId,
} from "./interaction.js";

/**
 * How many interactions one browser may have in progress at once (a desktop host starting its MCP
 * servers at launch opens one per server). Beyond it `/authorize` drops the oldest binding cookies.
 * 16 cookies of about 105 bytes each keep the Cookie header under 2 KB, well within proxies'
 * 8 KB header lines, and the issuer's cookies far below the 50 per domain browsers must keep
 * (RFC 6265 §6.1), so a flood of authorization requests cannot make the browser evict the session.
 */
export const MAX_BROWSER_INTERACTIONS = 16;

/**
 * An interaction binding cookie's value: the browser secret (32 random bytes, base64url), a dot,
 * and the interaction's creation time in base 36 milliseconds, which only orders the cookies for
 * {@link MAX_BROWSER_INTERACTIONS} (it is no secret and proves nothing).
 */
const INTERACTION_COOKIE_VALUE = /^([A-Za-z0-9_-]{43})\.([0-9a-z]{1,11})$/;

/**
 * Binds a new interaction `id` to this browser: a fresh secret in a cookie of the interaction's own
 * (SECURITY.md "Consent and login pages": bound to the browser that started the flow). One cookie
 * per interaction, never one shared by the browser's interactions: two authorization requests
 * started together (two tabs, two servers at launch) both arrive without a cookie, and with one
 * name the browser would keep only the last answer's, so the other tab's continuation would be
 * refused as another browser's. Returns the secret (the interaction stores its hash) and the
 * `Set-Cookie` values: the new cookie, living as long as the interaction, and the deletion of the
 * oldest ones beyond {@link MAX_BROWSER_INTERACTIONS} (unreadable ones count as oldest).
 */
export function bindNewInteraction(
  request: Request,
  ctx: ServerContext,
  id: string,
  now: number,
): { binding: string; cookies: string[] } {
  const binding = randomToken(32);
  const cookies: string[] = [];
  const present = interactionCookies(request, ctx).filter((c) => isInteractionId(c.id));
  const excess = present.length - (MAX_BROWSER_INTERACTIONS - 1);
  if (excess > 0) {
    const created = (value: string) => {
      const match = INTERACTION_COOKIE_VALUE.exec(value);
      return match ? Number.parseInt(match[2]!, 36) : -1;
    };
    const oldest = present.map((c) => ({ id: c.id, at: created(c.value) })).sort((a, b) => a.at - b.at);
    for (const { id: dropped } of oldest.slice(0, excess)) {
      cookies.push(serializeNamedCookie(interactionCookieName(dropped, ctx), "", ctx, 0));
    }
  }
  cookies.push(
    serializeNamedCookie(
      interactionCookieName(id, ctx),
      `${binding}.${now.toString(36)}`,
      ctx,
      INTERACTION_TTL_MS / 1000,
    ),
  );
  return { binding, cookies };
}

/**
 * The browser secret the request carries for interaction `id`: its own cookie's, present exactly
 * once and well formed. Without one, the browser-wide `binding` cookie's, which is what an
 * interaction parked by an earlier version (before one cookie per interaction, within its
 * ten-minute life, e.g. during a rolling upgrade of instances sharing a database) was bound to;
 * the interaction's stored hash decides either way, so the fallback accepts no other browser.
 */
export function readInteractionBinding(request: Request, ctx: ServerContext, id: string): string | undefined {
  const own = readNamedCookie(request, interactionCookieName(id, ctx), INTERACTION_COOKIE_VALUE);
  return own !== undefined ? INTERACTION_COOKIE_VALUE.exec(own)![1]! : readCookie(request, "binding", ctx);
}

/** The `Set-Cookie` value that deletes interaction `id`'s binding cookie, sent with its answer. */
export function releaseInteractionBinding(id: string, ctx: ServerContext): string {
  return serializeNamedCookie(interactionCookieName(id, ctx), "", ctx, 0);
}

/** An interaction together with the binding secret of the browser it belongs to. */
export interface BoundInteraction {
  interaction: InteractionRecord;
  /**
   * The browser's secret for this interaction (raw, from its cookie); it derives the CSRF token of
   * the interaction's forms and an upstream sign-in's PKCE verifier and nonce.
   */
  binding: string;
}

/**
 * Loads the interaction `id` for this browser. The hash of the browser's secret for it
 * ({@link readInteractionBinding}) must equal the one stored at `/authorize` (constant time), so a
 * continuation URL sent to someone else, or opened in another browser, gets an error page
 * (SECURITY.md "Consent and login pages": bound to the browser).
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
  const binding = readInteractionBinding(request, ctx, id);
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
