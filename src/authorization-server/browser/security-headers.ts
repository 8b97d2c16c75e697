/**
 * Headers every browser-facing response carries (SECURITY.md "Consent and login pages"):
 * no framing (CSP `frame-ancestors 'none'` plus `X-Frame-Options: DENY` for older browsers), no
 * referrer (the URLs carry interaction ids and, on the way back to the client, codes), no caching,
 * no sniffing, no script and no third-party content.
 */

import { completeResponse } from "../../shared/http.js";
import { STYLE_HASH_SOURCE } from "./html.js";

/** CSP source expression for an origin, or undefined when CSP cannot express it. */
function originSource(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
  // CSP host-source has no syntax for IPv6 literals: fall back to the scheme alone for those.
  if (url.hostname.startsWith("[")) return url.protocol;
  return url.origin;
}

/**
 * The Content-Security-Policy of a page. `formTargets` are URIs a form on the page may end up at:
 * Chromium applies `form-action` to every redirect that follows a form submission (CSP3 §6.3.2.2),
 * so the consent form, whose 303 goes to the client's redirect URI, must name that origin.
 */
export function contentSecurityPolicy(formTargets: readonly string[] = []): string {
  const formSources = new Set(["'self'"]);
  for (const target of formTargets) {
    const source = originSource(target);
    if (source) formSources.add(source);
  }
  return [
    "default-src 'none'",
    `style-src ${STYLE_HASH_SOURCE}`,
    "img-src 'self' data:",
    `form-action ${[...formSources].join(" ")}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join("; ");
}

/** Applies the security headers to `headers` (in place) and returns it. */
export function applySecurityHeaders(headers: Headers, formTargets: readonly string[] = []): Headers {
  headers.set("content-security-policy", contentSecurityPolicy(formTargets));
  headers.set("x-frame-options", "DENY");
  headers.set("referrer-policy", "no-referrer");
  headers.set("x-content-type-options", "nosniff");
  headers.set("cache-control", "no-store");
  headers.set("pragma", "no-cache");
  headers.set("cross-origin-opener-policy", "same-origin");
  headers.set("cross-origin-resource-policy", "same-origin");
  return headers;
}

export interface HtmlResponseInit {
  status?: number;
  /** `Set-Cookie` values. */
  cookies?: readonly string[];
  /** Origins forms on this page may be redirected to (see {@link contentSecurityPolicy}). */
  formTargets?: readonly string[];
}

/**
 * A page with every security header. Built whole (`completeResponse`): the node listener writes
 * the text in one write without a body stream (issue 11).
 */
export function htmlResponse(body: string, init: HtmlResponseInit = {}): Response {
  const headers = applySecurityHeaders(new Headers(), init.formTargets);
  headers.set("content-type", "text/html; charset=utf-8");
  for (const cookie of init.cookies ?? []) headers.append("set-cookie", cookie);
  return completeResponse(body, { status: init.status ?? 200, headers });
}

/**
 * A 303 See Other (after a POST the browser must follow with GET, OAuth 2.1 §7.5.2 / RFC 9700
 * §4.12), with the same security headers.
 */
export function seeOther(location: string, cookies: readonly string[] = []): Response {
  const headers = applySecurityHeaders(new Headers());
  headers.set("location", location);
  for (const cookie of cookies) headers.append("set-cookie", cookie);
  return new Response(null, { status: 303, headers });
}
