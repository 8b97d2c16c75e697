/**
 * Redirect URI rules shared by registration, Client ID Metadata Documents and `/authorize`: what may be
 * registered, exact matching (the port of a loopback redirect may vary), localhost-only detection.
 *
 * Spec "Redirect URIs and state": every redirect URI MUST be localhost or HTTPS, and the server MUST
 * compare by exact string against the registered values.
 *
 * The one exception is the port of an `http` loopback redirect (RFC 8252 §7.3, OAuth 2.1 §8.4.2): a
 * native client listens on whatever port the operating system gives it, so it cannot know the port
 * when it registers or publishes its document. Claude Code, for one, publishes
 * `http://localhost/callback` and `http://127.0.0.1/callback` and sends `http://localhost:<ephemeral
 * port>/callback`. RFC 8252 §8.3 recommends the IP literals over `localhost` (a name could resolve
 * elsewhere), but the spec allows `localhost` redirect URIs and every major MCP client uses them, and
 * the risk §8.3 names is the client's own listener, not a wider match here: the host stays exactly
 * `localhost` (which RFC 6761 §6.3 and browsers resolve to loopback only), so a port change reaches
 * the same machine the registered URI reaches. So the port may vary for exactly three host
 * spellings, `localhost`, a `127.x.x.x` literal and `[::1]`, and nothing else may:
 *
 * - the scheme must be `http` on both sides: an `https` loopback URI names a server holding a
 *   certificate for that host, which is arranged in advance, port included; it is matched exactly;
 * - the host is compared as the raw string, lowercase as the URL parser writes it, so
 *   `LOCALHOST`, `localhost.`, `localhost.evil.com`, `localhostx`, `127.000.0.1` or
 *   `sub.localhost` get no variance;
 * - what follows the port (path and query) is compared as a raw string, byte for byte;
 * - the request must itself be an acceptable redirect URI (no userinfo: `localhost:1@evil.com`
 *   names the host `evil.com`; no fragment, no whitespace).
 */
import { isLoopbackHost } from "../../shared/resource-uri.js";

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

/**
 * The raw prefix of an `http` loopback URI whose port may vary: scheme, one of the three host
 * spellings, and an optional port, followed by the end, a `/` or a `?`. Case-sensitive on purpose.
 */
const PORT_MAY_VARY = /^http:\/\/(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])(?::\d{1,5})?(?=[/?]|$)/;

/** The host and the rest after the port of a URI whose port may vary, or undefined. */
function portVariant(uri: string): { host: string; rest: string } | undefined {
  const match = PORT_MAY_VARY.exec(uri);
  if (!match) return undefined;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  // Defence in depth: the parser must agree on the host the raw prefix names.
  if (url.protocol !== "http:" || url.hostname !== match[1]) return undefined;
  return { host: match[1]!, rest: uri.slice(match[0].length) };
}

/**
 * The registered value that `requested` matches, or undefined. Exact string comparison, except that
 * for `http` on `localhost`, a 127.x.x.x literal or `[::1]` the port may differ (RFC 8252 §7.3,
 * OAuth 2.1 §8.4.2); host, path and query still compare as raw strings (see the module comment).
 */
export function matchRedirectUri(registered: readonly string[], requested: string): string | undefined {
  if (registered.includes(requested)) return requested;
  if (redirectUriProblem(requested) !== undefined) return undefined;
  const req = portVariant(requested);
  if (!req) return undefined;
  for (const candidate of registered) {
    const reg = portVariant(candidate);
    if (reg && reg.host === req.host && reg.rest === req.rest) return candidate;
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
