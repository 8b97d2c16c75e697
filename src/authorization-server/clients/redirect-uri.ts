/**
 * Redirect URI rules shared by registration, Client ID Metadata Documents and `/authorize`: what may be
 * registered, exact matching (loopback port may vary), localhost-only detection.
 */
import { isLoopbackHost } from "../../shared/resource-uri.js";

/**
 * Redirect URI rules shared by registration, Client ID Metadata Documents and `/authorize`.
 *
 * Spec "Redirect URIs and state": every redirect URI MUST be localhost or HTTPS, and the server MUST
 * compare by exact string against the registered values. OAuth 2.1 §8.4.2 / RFC 8252 §7.3: for a
 * loopback IP literal the port may vary at request time.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters make a redirect URI invalid
const CONTROL_OR_SPACE = /[\u0000-\u0020\u007f-\u009f]/;

/** Why `uri` cannot be registered as a redirect URI, or undefined when it can. */
export function redirectUriProblem(uri: string): string | undefined {
  if (typeof uri !== "string" || uri.length === 0) return "redirect URI must be a non-empty string";
  if (uri.length > 2000) return "redirect URI is too long";
  if (CONTROL_OR_SPACE.test(uri)) return "redirect URI must not contain whitespace or control characters";
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return "redirect URI is not an absolute URL";
  }
  // Dangerous schemes (javascript:, data:, vbscript:, file:, custom ones) are refused by the
  // allow-list below; the URL parser has already lowercased the scheme, so case tricks do not pass.
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return "redirect URI must use https (or http on loopback)";
  if (!/^https?:\/\//i.test(uri)) return "redirect URI must be an absolute https URL";
  if (url.hash !== "" || uri.includes("#")) return "redirect URI must not contain a fragment";
  if (url.username !== "" || url.password !== "") return "redirect URI must not contain userinfo";
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    return "redirect URI must use https unless it points at localhost or a loopback address";
  }
  return undefined;
}

function isLoopbackIpLiteral(hostname: string): boolean {
  return hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/**
 * The registered value that `requested` matches, or undefined. Exact string comparison, except that
 * for `http` on a loopback IP literal (127.x.x.x, [::1]) the port is ignored (RFC 8252 §7.3).
 */
export function matchRedirectUri(registered: readonly string[], requested: string): string | undefined {
  if (registered.includes(requested)) return requested;
  if (redirectUriProblem(requested) !== undefined) return undefined;
  const req = new URL(requested);
  if (req.protocol !== "http:" || !isLoopbackIpLiteral(req.hostname)) return undefined;
  const withoutPort = (u: URL) => `${u.protocol}//${u.hostname}${u.pathname}${u.search}`;
  // Compare the raw strings with the port removed, so nothing else is normalised.
  const stripPort = (s: string) =>
    s.replace(/^(http:\/\/(?:\[::1\]|127\.\d{1,3}\.\d{1,3}\.\d{1,3}))(?::\d{1,5})?(?=[/?]|$)/, "$1");
  for (const candidate of registered) {
    let reg: URL;
    try {
      reg = new URL(candidate);
    } catch {
      continue;
    }
    if (reg.protocol !== "http:" || !isLoopbackIpLiteral(reg.hostname)) continue;
    if (stripPort(candidate) === stripPort(requested) && withoutPort(reg) === withoutPort(req))
      return candidate;
  }
  return undefined;
}

/** True when every redirect URI is on localhost (the consent page then warns; spec CIMD rules). */
export function isLocalhostOnly(redirectUris: readonly string[]): boolean {
  return (
    redirectUris.length > 0 &&
    redirectUris.every((u) => {
      try {
        return isLoopbackHost(new URL(u).hostname);
      } catch {
        return false;
      }
    })
  );
}
