/**
 * The options of sign-in through upstream identity providers, as the caller writes them
 * (`AuthorizationServerOptions.upstreamSignIn`); ./resolve.ts checks them and applies the presets.
 */

/** The providers Gatehouse knows the settings of (./presets.ts); `oidc` and `oauth2` are generic. */
export type UpstreamPresetName = "github" | "google" | "microsoft" | "okta" | "auth0" | "keycloak" | "gitlab";

/**
 * Who signed in upstream, as the admission rules and the `admit` callback see it. `subject` is the
 * provider's stable user id (`sub` of the ID token, GitHub's numeric `id`): the account is found by
 * (provider, subject), never by e-mail.
 */
export interface UpstreamProfile {
  /** The provider's `id` in the configuration. */
  provider: string;
  subject: string;
  email?: string;
  /** True only when the provider said so (`email_verified: true`, or GitHub's `verified`). */
  emailVerified: boolean;
  /** A human name or login, for display only. */
  name?: string;
  /** GitHub's login, OpenID Connect's `preferred_username`. */
  username?: string;
  /** Google Workspace `hd`. */
  hostedDomain?: string;
  /** Microsoft Entra `tid`. */
  tenantId?: string;
  /** GitHub organisation logins (only when the organisations endpoint is configured). */
  organizations?: string[];
  /** Every claim of the ID token, or the user-info document of a plain OAuth 2 provider. */
  claims: Readonly<Record<string, unknown>>;
}

/**
 * Who may sign in through a provider. Every rule given must pass (they combine with AND); with no
 * rule, everyone the provider signs in is admitted (then turn `createAccounts` on only for a
 * provider whose users are all yours, such as a single-tenant Entra or a Workspace).
 */
export interface UpstreamAdmissionOptions {
  /** E-mail domains admitted (exact, case-insensitive); the e-mail must be verified by the provider. */
  emailDomains?: string[];
  /** GitHub organisations (logins); needs the `read:org` scope for private memberships. */
  githubOrganizations?: string[];
  /** Google Workspace domains, matched against the ID token's `hd` claim. */
  googleHostedDomains?: string[];
  /** Microsoft Entra tenant ids (GUIDs), matched against the ID token's `tid` claim. */
  entraTenants?: string[];
  /** Library only: the last word, after the rules above; false (or a throw) refuses the sign-in. */
  admit?: (profile: UpstreamProfile) => boolean | Promise<boolean>;
}

/** One upstream identity provider. */
export interface UpstreamProviderOptions {
  /** Lowercase letters, digits and `-` (at most 32): names the provider in its callback path. */
  id: string;
  /** Settings of a known provider; `kind` and the endpoints below then need not be given. */
  preset?: UpstreamPresetName;
  /** `oidc` (OpenID Connect: discovery, ID token) or `oauth2` (a user-info endpoint, GitHub style). */
  kind?: "oidc" | "oauth2";
  /** The button's words ("Continue with <displayName>"); default the preset's name or the id. */
  displayName?: string;
  clientId: string;
  /** The secret the provider issued to Gatehouse; absent for a public client (PKCE only). */
  clientSecret?: string;
  /**
   * How Gatehouse authenticates at the provider's token endpoint: default `client_secret_basic`
   * (GitHub's preset: `client_secret_post`), or `none` when there is no `clientSecret`.
   */
  tokenEndpointAuthMethod?: "client_secret_basic" | "client_secret_post" | "none";
  /** OpenID Connect: the issuer, exactly as the provider writes it (discovery is fetched from it). */
  issuer?: string;
  /**
   * Microsoft Entra: the tenant (a GUID, a domain, or `organizations`/`common`/`consumers`); a
   * national cloud gives `issuer` (`https://<authority>/<tenant>/v2.0`) instead.
   */
  tenant?: string;
  /** Plain OAuth 2 endpoints (GitHub's are the preset's; a GitHub Enterprise Server names its own). */
  authorizationEndpoint?: string;
  tokenEndpoint?: string;
  userInfoEndpoint?: string;
  /** GitHub style: where verified e-mail addresses are listed (`/user/emails`). */
  emailsEndpoint?: string;
  /** GitHub style: where the user's organisations are listed (`/user/orgs`). */
  organizationsEndpoint?: string;
  /** Scopes asked of the provider (default: the preset's, `openid email profile` for OpenID Connect). */
  scopes?: string[];
  /** ID token signature algorithms accepted (default RS256, ES256, PS256; never HS* or none). */
  algorithms?: string[];
  /** Create a local account on a first sign-in (default false: only linked accounts may sign in). */
  createAccounts?: boolean;
  admission?: UpstreamAdmissionOptions;
  /**
   * Keep the provider's access and refresh tokens for resource servers that call the provider's
   * API as the user (docs/authorization-server.md "Upstream tokens for resource servers"). Needs
   * `keyEncryptionKeys`: the tokens are stored sealed under them, bound to the grant, revoked with it.
   */
  keepTokens?: UpstreamKeepTokensOptions;
  /**
   * Let the requests to THIS provider (discovery, keys, token, user-info, and the endpoints its
   * discovery document names) reach private addresses: RFC 1918 and fc00::/7, for a provider on
   * the operator's own network (an internal Keycloak, a self-managed GitLab). Default false.
   * Link-local (the cloud metadata address 169.254.169.254), unspecified, multicast and loopback
   * stay refused, and every other guard (https, no redirects, byte caps, deadlines) still holds.
   */
  allowPrivateNetwork?: boolean;
  /**
   * PEM of the CA certificate(s) this provider's TLS certificate chains to, trusted for requests to
   * this provider only, besides the system roots (a private CA). Checked at start-up.
   */
  ca?: string;
}

/** Which resource servers may fetch a provider's kept tokens. */
export interface UpstreamKeepTokensOptions {
  /**
   * Each a pre-registered confidential client (the resource server's credentials) and the resource
   * it serves: it gets upstream tokens only for access tokens issued for that resource.
   */
  resourceServers: { clientId: string; resource: string }[];
}

/** Sign-in through upstream identity providers (docs/authorization-server.md "Sign-in through an upstream provider"). */
export interface UpstreamSignInOptions {
  providers: UpstreamProviderOptions[];
  /** Offer the username and password form too (default true). */
  localPasswords?: boolean;
  /** Deadline of each request to a provider (default 10000 ms). */
  timeoutMs?: number;
  /**
   * DANGEROUS, tests only: reach providers on loopback and trust these CA certificates (PEM). Never
   * set in production: it re-opens server-side request forgery to this machine.
   */
  dangerouslyAllowLoopbackForTesting?: { ca?: string[] };
}

/**
 * Where the requests to one provider may connect and which CAs they trust: given as is to the
 * guarded fetch and to `upstreamRequest` for every request to it (discovery, keys, token,
 * user-info, and the endpoints its discovery document names), and to no other provider's.
 */
export interface UpstreamNetwork {
  /** The operator's `allowPrivateNetwork`: RFC 1918 and fc00::/7 destinations are reachable. */
  allowPrivateNetwork: boolean;
  /** Tests only (`dangerouslyAllowLoopbackForTesting`): loopback destinations are reachable. */
  allowLoopback: false | { ca?: string[] };
  /** The provider's `ca` and the tests-only option's CAs, trusted besides the system roots. */
  ca: string[];
}

/** What every provider kind has, resolved. */
interface ResolvedProviderBase {
  id: string;
  displayName: string;
  clientId: string;
  clientSecret?: string;
  tokenEndpointAuthMethod: "client_secret_basic" | "client_secret_post" | "none";
  scopes: string[];
  createAccounts: boolean;
  admission: UpstreamAdmissionOptions;
  preset?: UpstreamPresetName;
  /** Present when the provider's tokens are kept for resource servers (./tokens.ts). */
  keepTokens?: UpstreamKeepTokensOptions;
  network: UpstreamNetwork;
}

export interface ResolvedOidcProvider extends ResolvedProviderBase {
  kind: "oidc";
  /** The configured issuer; for Entra multi-tenant the metadata's `{tenantid}` issuer is accepted. */
  issuer: string;
  /** Entra `common`/`organizations`: `iss` is the metadata issuer with the token's `tid` in it. */
  multiTenantIssuer: boolean;
  algorithms: string[];
}

export interface ResolvedOAuth2Provider extends ResolvedProviderBase {
  kind: "oauth2";
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userInfoEndpoint: string;
  emailsEndpoint?: string;
  organizationsEndpoint?: string;
}

export type ResolvedUpstreamProvider = ResolvedOidcProvider | ResolvedOAuth2Provider;

export interface ResolvedUpstreamSignIn {
  providers: ResolvedUpstreamProvider[];
  localPasswords: boolean;
  timeoutMs: number;
}
