/**
 * The browser's cookies (session, browser binding, one binding per interaction): names,
 * attributes, reading.
 */
import type { ServerContext } from "../core/context.js";

/**
 * The cookies of the browser side (RFC 6265bis):
 *
 * - `session`: a signed-in user; random value, only its SHA-256 is stored.
 * - `binding`: a secret of this browser for the sign-ins that are no authorization request (the
 *   account and admin pages' login form, and an upstream sign-in started there); only its hash is
 *   stored.
 * - `interaction` (one per authorization request, named by the interaction's id): identifies the
 *   browser that started that request, so a continuation URL opened elsewhere does not work
 *   (SECURITY.md "Consent and login pages"); only its hash is stored in the interaction. One per
 *   interaction, not one per browser, because two requests started together both arrive without a
 *   cookie and a shared name would keep only the last answer's (bound-interaction.ts).
 *
 * All are `__Host-` (RFC 6265bis §4.1.3.2: Secure, Path=/, no Domain, so no sibling subdomain can
 * set, replace or shadow them), HttpOnly, SameSite=Lax (Lax, not Strict: the browser arrives at
 * `/authorize` by a top-level navigation from the client's site and must bring the session along).
 * On plain-http loopback development (`secureCookies` false) the prefix and `Secure` are dropped,
 * since browsers refuse both without HTTPS.
 */
export type CookieKind = "session" | "binding";

const BASE_NAMES: Record<CookieKind, string> = { session: "gatehouse_session", binding: "gatehouse_binding" };
/** The interaction binding cookies' names: this, then the interaction id (22 base64url characters). */
const INTERACTION_BASE = "gatehouse_interaction_";

/** A random cookie value from {@link randomToken}: base64url, 32 bytes. */
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;

type CookieContext = Pick<ServerContext, "secureCookies">;

function prefixed(base: string, ctx: CookieContext): string {
  return ctx.secureCookies ? `__Host-${base}` : base;
}

export function cookieName(kind: CookieKind, ctx: CookieContext): string {
  return prefixed(BASE_NAMES[kind], ctx);
}

/** The name of interaction `id`'s binding cookie (the id is base64url: a valid cookie-name token). */
export function interactionCookieName(id: string, ctx: CookieContext): string {
  return prefixed(`${INTERACTION_BASE}${id}`, ctx);
}

/** `Set-Cookie` value for a cookie `name`; `maxAgeSeconds` undefined = until the browser closes, 0 = delete. */
export function serializeNamedCookie(
  name: string,
  value: string,
  ctx: CookieContext,
  maxAgeSeconds?: number,
): string {
  const parts = [`${name}=${value}`, "Path=/", "HttpOnly", "SameSite=Lax"];
  if (ctx.secureCookies) parts.push("Secure");
  if (maxAgeSeconds !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`);
  return parts.join("; ");
}

/** `Set-Cookie` value for cookie `kind`; `maxAgeSeconds` as {@link serializeNamedCookie}. */
export function serializeCookie(
  kind: CookieKind,
  value: string,
  ctx: CookieContext,
  maxAgeSeconds?: number,
): string {
  return serializeNamedCookie(cookieName(kind, ctx), value, ctx, maxAgeSeconds);
}

export function clearCookie(kind: CookieKind, ctx: CookieContext): string {
  return serializeCookie(kind, "", ctx, 0);
}

/** Each `name=value` pair of the request's Cookie header, trimmed (RFC 6265bis §5.7.2 order). */
function* cookiePairs(request: Request): Generator<[string, string]> {
  const header = request.headers.get("cookie");
  if (!header) return;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq >= 0) yield [part.slice(0, eq).trim(), part.slice(eq + 1).trim()];
  }
}

/**
 * The value of cookie `name` in the request, when present exactly once and matching `pattern`. Two
 * cookies of the same name (one planted by a sibling subdomain, say) make it absent rather than
 * ambiguous.
 */
export function readNamedCookie(request: Request, name: string, pattern: RegExp): string | undefined {
  let found: string | undefined;
  let count = 0;
  for (const [key, value] of cookiePairs(request)) {
    if (key === name && ++count === 1) found = value;
  }
  return count === 1 && found !== undefined && pattern.test(found) ? found : undefined;
}

/** The value of cookie `kind` in the request (a random token), as {@link readNamedCookie}. */
export function readCookie(request: Request, kind: CookieKind, ctx: CookieContext): string | undefined {
  return readNamedCookie(request, cookieName(kind, ctx), COOKIE_VALUE);
}

/** Every interaction binding cookie the request carries: the interaction id and the raw value. */
export function interactionCookies(
  request: Request,
  ctx: CookieContext,
): Array<{ id: string; value: string }> {
  const start = prefixed(INTERACTION_BASE, ctx);
  const out: Array<{ id: string; value: string }> = [];
  for (const [key, value] of cookiePairs(request)) {
    if (key.startsWith(start)) out.push({ id: key.slice(start.length), value });
  }
  return out;
}
