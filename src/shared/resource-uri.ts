/**
 * The canonical resource URI (RFC 8707 §2, the spec's "Canonical server URI").
 */
import { GatehouseTypeError } from "./errors.js";

/**
 * The canonical server URI (spec "Canonical server URI"; RFC 8707 §2, RFC 9728 §3).
 *
 * - a scheme is required and a fragment is refused (MUST);
 * - scheme and host are lowercased; uppercase input is accepted (SHOULD);
 * - a trailing slash is dropped unless the path is only "/" with a query, or `keepTrailingSlash`
 *   says the slash is meaningful for this resource (SHOULD);
 * - the query and the path are kept byte for byte: only the scheme and the host are normalised.
 *
 * Throws a {@link GatehouseTypeError} with code `ERR_INVALID_RESOURCE_URI`.
 */
export function canonicalResourceUri(
  input: string | URL,
  options: { keepTrailingSlash?: boolean } = {},
): string {
  const text = typeof input === "string" ? input : input.href;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters make a URI invalid
  if (/[\u0000-\u0020\u007f]/.test(text)) {
    throw new GatehouseTypeError(
      "ERR_INVALID_RESOURCE_URI",
      "resource URI must not contain whitespace or control characters",
    );
  }
  const match = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/.exec(text);
  if (!match) {
    throw new GatehouseTypeError(
      "ERR_INVALID_RESOURCE_URI",
      "resource URI must be absolute, with a scheme and an authority",
    );
  }
  const [, scheme = "", authority = "", rawPath = "", query = "", fragment] = match;
  if (fragment !== undefined) {
    throw new GatehouseTypeError(
      "ERR_INVALID_RESOURCE_URI",
      "resource URI must not contain a fragment (RFC 8707 §2)",
    );
  }
  if (authority.includes("@")) {
    throw new GatehouseTypeError("ERR_INVALID_RESOURCE_URI", "resource URI must not contain userinfo");
  }
  if (authority === "") {
    throw new GatehouseTypeError("ERR_INVALID_RESOURCE_URI", "resource URI must have a host");
  }
  // Validate the whole thing with the WHATWG parser, but do not take its serialisation.
  try {
    new URL(text);
  } catch (cause) {
    throw new GatehouseTypeError("ERR_INVALID_RESOURCE_URI", "resource URI is not a valid URL", { cause });
  }
  let path = rawPath;
  if (!options.keepTrailingSlash && path.endsWith("/")) {
    path = path.replace(/\/+$/, "");
    // `https://h/?q` keeps its slash: `https://h?q` reads as a different, odd-looking URI.
    if (path === "" && query !== "") path = "/";
  }
  return `${scheme.toLowerCase()}://${authority.toLowerCase()}${path}${query}`;
}

/** True when `value` is a syntactically valid resource URI (see {@link canonicalResourceUri}). */
export function isValidResourceUri(value: string): boolean {
  try {
    canonicalResourceUri(value);
    return true;
  } catch {
    return false;
  }
}

/** True for `localhost`, `127.0.0.0/8` and `[::1]` hosts (spec: redirect URIs "localhost or HTTPS"). */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  if (host === "[::1]" || host === "::1") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
