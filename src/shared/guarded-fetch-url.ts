/**
 * URL checks for the guarded fetch (`guarded-fetch.ts`): pure string checks made before any
 * address is looked at or any connection is made.
 */

import { isIP } from "node:net";

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters make a URL unusable here
const CONTROL_OR_SPACE = /[\u0000-\u0020\u007f-\u009f]/;

/**
 * Why `raw` may not be fetched, or undefined. Pure string checks; the address checks come later.
 * The raw text is inspected as well as the parsed URL, because the WHATWG parser silently repairs
 * (and thereby hides) dot segments, numeric hosts and backslashes.
 */
export function fetchUrlProblem(raw: string): string | undefined {
  if (typeof raw !== "string" || raw.length === 0) return "URL must be a non-empty string";
  if (raw.length > 2048) return "URL is too long";
  if (CONTROL_OR_SPACE.test(raw)) return "URL must not contain whitespace or control characters";
  if (raw.includes("\\")) return "URL must not contain backslashes";
  const m = /^https:\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(raw);
  if (!m) return "URL must be an absolute https URL";
  const [, authority = "", path = "", , fragment] = m;
  if (fragment !== undefined) return "URL must not contain a fragment";
  if (authority.includes("@")) return "URL must not contain userinfo";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "URL is not valid";
  }
  if (url.protocol !== "https:") return "URL must use https";
  for (const segment of path.split("/")) {
    const decoded = segment.replace(/%2e/gi, ".");
    if (decoded === "." || decoded === "..") return "URL must not contain dot segments";
  }
  // The host must be written exactly as the parser serialises it (case aside): this refuses
  // numeric IPv4 spellings (2130706433, 0x7f.1, 0177.1, 127.1), percent-encoded and
  // non-canonical IPv6 hosts, and non-ASCII names (use the punycode form).
  const rawHost = authority.replace(/:\d*$/, "").toLowerCase();
  if (rawHost === "") return "URL must have a host";
  if (rawHost !== url.hostname) return "URL host must be written in canonical form";
  return undefined;
}

/** The IP literal a URL's raw authority names, when the URL itself is refused for other reasons. */
export function literalHostOf(raw: string): string | undefined {
  const m = /^https:\/\/(?:[^/?#@]*@)?([^/?#]*)/i.exec(raw);
  if (!m) return undefined;
  try {
    const host = new URL(`https://${m[1] ?? ""}/`).hostname;
    return isIP(host.replace(/^\[|\]$/g, "")) !== 0 ? host : undefined;
  } catch {
    return undefined;
  }
}
