/**
 * Defence in depth for the pages' form POSTs (login, consent, account, admin), in front of the
 * CSRF token (SECURITY.md "Consent and login pages"; RFC 9700 §4.4.1.8 / OAuth 2.1 §7.6 on CSRF;
 * W3C Fetch Metadata Request Headers §2.1 `Sec-Fetch-Site`; RFC 6454 §7 `Origin`).
 *
 * Every one of these forms is served by this server and posts back to it (CSP `form-action
 * 'self'`), so a POST that a browser says came from another origin is never one of ours: it is
 * refused before the form is read, whatever token it carries. A POST with neither header (older
 * browsers, curl, scripts) is left to the CSRF token, as before.
 */

/** Why a POST was refused: which header, and what it said (an origin in serialised form only). */
export interface CrossSitePost {
  header: "origin" | "sec-fetch-site";
  value: string;
}

/**
 * `Sec-Fetch-Site` values a form POST of ours may carry.
 * - `same-origin`: our own page.
 * - `none`: a request the user made directly (address bar, bookmark); no page, so no other site,
 *   started it — a form on another site always yields `same-site` or `cross-site`.
 * Refused: `cross-site`; `same-site` too, because same-site is still another origin (another port
 * of this host, a sibling subdomain) that never serves our forms, and it is exactly the sender
 * SameSite=Lax cookies do not keep out; and any value the Fetch Metadata spec does not define.
 */
const ACCEPTED_FETCH_SITES = new Set(["same-origin", "none"]);

/** An `Origin` value as an origin (never a path or query), or a marker for anything else. */
function loggableOrigin(value: string): string {
  try {
    const origin = new URL(value).origin;
    return origin === "null" ? "(opaque)" : origin;
  } catch {
    return "(malformed)";
  }
}

/**
 * The reason to refuse `request` as a cross-site form POST to a server whose issuer is `issuer`,
 * or undefined when it may go on to the CSRF check.
 *
 * `Origin: null` is not refused on its own: browsers send it for our own forms, because the pages
 * set `Referrer-Policy: no-referrer` (Fetch §3.1.8 "append a request `Origin` header"); an opaque
 * origin says nothing, so `Sec-Fetch-Site` (sent alongside by current browsers) decides, and
 * without it the CSRF token does.
 */
export function crossSitePost(request: Request, issuer: string): CrossSitePost | undefined {
  const fetchSite = request.headers.get("sec-fetch-site");
  if (fetchSite !== null && !ACCEPTED_FETCH_SITES.has(fetchSite)) {
    return { header: "sec-fetch-site", value: fetchSite.slice(0, 40) };
  }
  const origin = request.headers.get("origin");
  // Exact string: browsers serialise an origin one way (lowercase scheme and host, default port
  // left out), and `URL.origin` of the normalised issuer is that same form.
  if (origin !== null && origin !== "null" && origin !== new URL(issuer).origin) {
    return { header: "origin", value: loggableOrigin(origin) };
  }
  return undefined;
}
