/**
 * The browser's two cookies (session and binding): names, attributes, reading.
 */
import type { ServerContext } from "../config/context.js";

/**
 * The two cookies of the browser side (RFC 6265bis):
 *
 * - `session`: a signed-in user; random value, only its SHA-256 is stored.
 * - `binding`: identifies the browser that started an authorization request, so a continuation URL
 *   opened elsewhere does not work (SECURITY.md "Consent and login pages"); only its hash is stored
 *   in the interaction.
 *
 * Both are `__Host-` (RFC 6265bis §4.1.3.2: Secure, Path=/, no Domain), HttpOnly, SameSite=Lax
 * (Lax, not Strict: the browser arrives at `/authorize` by a top-level navigation from the client's
 * site and must bring the session along). On plain-http loopback development (`secureCookies`
 * false) the prefix and `Secure` are dropped, since browsers refuse both without HTTPS.
 */
export type CookieKind = "session" | "binding";

const BASE_NAMES: Record<CookieKind, string> = { session: "gatehouse_session", binding: "gatehouse_binding" };

/** A random cookie value from {@link randomToken}: base64url, 32 bytes. */
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;

export function cookieName(kind: CookieKind, ctx: Pick<ServerContext, "secureCookies">): string {
  return ctx.secureCookies ? `__Host-${BASE_NAMES[kind]}` : BASE_NAMES[kind];
}

/** `Set-Cookie` value; `maxAgeSeconds` undefined = until the browser closes, 0 = delete. */
export function serializeCookie(
  kind: CookieKind,
  value: string,
  ctx: Pick<ServerContext, "secureCookies">,
  maxAgeSeconds?: number,
): string {
  const parts = [`${cookieName(kind, ctx)}=${value}`, "Path=/", "HttpOnly", "SameSite=Lax"];
  if (ctx.secureCookies) parts.push("Secure");
  if (maxAgeSeconds !== undefined) parts.push(`Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`);
  return parts.join("; ");
}

export function clearCookie(kind: CookieKind, ctx: Pick<ServerContext, "secureCookies">): string {
  return serializeCookie(kind, "", ctx, 0);
}

/**
 * The value of cookie `kind` in the request, when present exactly once and well formed. Two cookies
 * of the same name (one planted by a sibling subdomain, say) make it absent rather than ambiguous.
 */
export function readCookie(
  request: Request,
  kind: CookieKind,
  ctx: Pick<ServerContext, "secureCookies">,
): string | undefined {
  const header = request.headers.get("cookie");
  if (!header) return undefined;
  const name = cookieName(kind, ctx);
  const found: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) found.push(part.slice(eq + 1).trim());
  }
  if (found.length !== 1) return undefined;
  const value = found[0]!;
  return COOKIE_VALUE.test(value) ? value : undefined;
}
