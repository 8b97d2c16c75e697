/**
 * The well-known URLs of the spec's metadata documents, built in one place for the server that
 * serves them and the client that looks for them.
 */

/** RFC 9728 §3: the protected resource metadata suffix. */
export const PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource";

/**
 * Which well-known form an authorization server's metadata is read from: RFC 8414
 * (`oauth-authorization-server`) or OpenID Connect Discovery 1.0 (`openid-configuration`).
 */
export type MetadataWellKnown = "oauth-authorization-server" | "openid-configuration";

/**
 * The authorization server metadata URLs for an issuer, in the order the spec makes clients try
 * them ("Authorization server metadata discovery"): RFC 8414 §3.1 inserts the well-known segment
 * before the issuer's path, OpenID Connect Discovery §4 appends it (and the 2025 revisions also
 * insert it). An issuer without a path has the two root forms only. A trailing slash of the
 * issuer's path is not part of it.
 */
export function authorizationServerMetadataUrls(
  issuer: string | URL,
): Array<{ url: string; via: MetadataWellKnown }> {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/+$/, "");
  if (!path) {
    return [
      { url: `${url.origin}/.well-known/oauth-authorization-server`, via: "oauth-authorization-server" },
      { url: `${url.origin}/.well-known/openid-configuration`, via: "openid-configuration" },
    ];
  }
  return [
    { url: `${url.origin}/.well-known/oauth-authorization-server${path}`, via: "oauth-authorization-server" },
    { url: `${url.origin}/.well-known/openid-configuration${path}`, via: "openid-configuration" },
    { url: `${url.origin}${path}/.well-known/openid-configuration`, via: "openid-configuration" },
  ];
}
