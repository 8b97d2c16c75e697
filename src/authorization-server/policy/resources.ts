/**
 * Which served resource a `resource` value names (RFC 8707 §2), decided here only, for the
 * authorization and device endpoints and every grant at the token endpoint alike
 * ({@link servedResource}).
 */

import { OAuthError } from "../../shared/errors.js";
import { canonicalResourceUri } from "../../shared/resource-uri.js";
import type { ServerContext } from "../core/context.js";

/**
 * The served resource `value` names, as its configured URI, or `invalid_target` (RFC 8707 §2).
 *
 * The rule: the value as configured, or the value with its scheme and host in another case. The
 * spec's "Canonical server URI" makes the lowercase form canonical and says implementations SHOULD
 * accept uppercase scheme and host (both are case-insensitive, RFC 3986 §6.2.2.1), so a client that
 * writes `HTTPS://NOTES.EXAMPLE/mcp` names the same resource. Nothing else is normalised: the
 * path, a trailing slash on it and the query are compared byte for byte, because RFC 8707 §2 has the
 * value identify the resource and another path (even one slash longer) may be another resource on
 * the same host; the token's audience is the configured URI in every case. A fragment, a relative or
 * malformed value, or one this server does not serve is `invalid_target`.
 */
export function servedResource(ctx: ServerContext, value: string): string {
  if (ctx.resources.has(value)) return value;
  let canonical: string;
  try {
    canonical = canonicalResourceUri(value, { keepTrailingSlash: true });
  } catch {
    throw new OAuthError("invalid_target", { description: "resource is not a valid absolute URI" });
  }
  if (ctx.resources.has(canonical)) return canonical;
  throw new OAuthError("invalid_target", {
    description: "resource is not served by this authorization server",
  });
}
