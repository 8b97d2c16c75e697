/**
 * Endpoint paths, relative to the issuer's path. The well-known metadata paths are placed by
 * RFC 8414 §3.1 (inserted before the issuer path) and OpenID Connect Discovery §4 (appended).
 */
export const ENDPOINT_PATHS = {
  authorize: "/authorize",
  token: "/token",
  register: "/register",
  revoke: "/revoke",
  introspect: "/introspect",
  jwks: "/jwks.json",
  login: "/login",
  consent: "/consent",
  account: "/account",
  /** The account page's first address: GET redirects to `account`, the sign-out POST still works. */
  logout: "/logout",
  admin: "/admin",
  health: "/health",
  /** RFC 8628 §3.1: where a device asks for its codes. */
  deviceAuthorization: "/device_authorization",
  /** RFC 8628 §3.3: the verification page, short enough to type (`verification_uri`). */
  device: "/device",
} as const;

export type EndpointName = keyof typeof ENDPOINT_PATHS;

/**
 * Where an upstream identity provider sends the browser back (relative to the issuer's path): one
 * path per configured provider, the redirect URI to register at that provider.
 */
export function upstreamCallbackPath(providerId: string): string {
  return `/upstream/${providerId}/callback`;
}

/**
 * Where a resource server fetches the upstream access token of the user behind a request
 * (./upstream-token.ts); routed only when a provider keeps tokens. Provider ids cannot be `token`
 * followed by more path, so it never meets a callback path.
 */
export const UPSTREAM_TOKEN_PATH = "/upstream/token";

export function endpointUrl(issuer: string, name: EndpointName): string {
  return `${issuer.replace(/\/$/, "")}${ENDPOINT_PATHS[name]}`;
}
