/**
 * The settings of the upstream identity providers Gatehouse knows, as data only: issuer or
 * endpoints, scopes and dialect flags. Nothing here runs; ./resolve.ts merges a preset under what
 * the operator wrote, and the clients (./oidc-client.ts, ./oauth2-client.ts) read the flags.
 */
import type { UpstreamPresetName } from "../core/upstream-options.js";

/** What a preset contributes to a provider's configuration. */
export interface UpstreamPreset {
  kind: "oidc" | "oauth2";
  displayName: string;
  /** A fixed issuer (Google, GitLab.com); `{tenant}` is replaced by the provider's `tenant` option. */
  issuer?: string;
  /** Whether the operator must name the issuer (a tenant's own domain: Okta, Auth0, Keycloak). */
  issuerRequired?: boolean;
  /** Whether the operator must name the `tenant` (Microsoft Entra). */
  tenantRequired?: boolean;
  authorizationEndpoint?: string;
  tokenEndpoint?: string;
  userInfoEndpoint?: string;
  emailsEndpoint?: string;
  organizationsEndpoint?: string;
  scopes: string[];
  /** The scope that lists private organisation memberships, added when organisations are a rule. */
  organizationsScope?: string;
  tokenEndpointAuthMethod?: "client_secret_basic" | "client_secret_post";
}

const STANDARD_OIDC_SCOPES = ["openid", "email", "profile"];

/**
 * The presets. Sources: each provider's public documentation of its OpenID Connect discovery
 * document or OAuth endpoints (docs/authorization-server.md "Sign-in through an upstream provider"
 * gives the settings to make at each provider).
 */
export const UPSTREAM_PRESETS: Readonly<Record<UpstreamPresetName, UpstreamPreset>> = {
  // GitHub OAuth apps and GitHub Apps: no OpenID Connect for users, no ID token; the access token
  // comes back form-encoded unless `Accept: application/json` is sent; the user is `/user`'s `id`.
  github: {
    kind: "oauth2",
    displayName: "GitHub",
    authorizationEndpoint: "https://github.com/login/oauth/authorize",
    tokenEndpoint: "https://github.com/login/oauth/access_token",
    userInfoEndpoint: "https://api.github.com/user",
    emailsEndpoint: "https://api.github.com/user/emails",
    // GitHub pages its lists (30 entries unless asked): one page of the most it gives.
    organizationsEndpoint: "https://api.github.com/user/orgs?per_page=100",
    scopes: ["read:user", "user:email"],
    organizationsScope: "read:org",
    tokenEndpointAuthMethod: "client_secret_post",
  },
  google: {
    kind: "oidc",
    displayName: "Google",
    issuer: "https://accounts.google.com",
    scopes: STANDARD_OIDC_SCOPES,
  },
  // Microsoft Entra ID, v2.0 endpoints. A tenant-specific issuer is exact; the multi-tenant
  // `common` and `organizations` metadata names `{tenantid}` in its issuer, checked against `tid`
  // (./oidc-client.ts). The v2.0 endpoints refuse the `resource` parameter: it is never sent.
  microsoft: {
    kind: "oidc",
    displayName: "Microsoft",
    issuer: "https://login.microsoftonline.com/{tenant}/v2.0",
    tenantRequired: true,
    scopes: STANDARD_OIDC_SCOPES,
  },
  okta: { kind: "oidc", displayName: "Okta", issuerRequired: true, scopes: STANDARD_OIDC_SCOPES },
  // Auth0's issuer ends with a slash (`https://<tenant>.auth0.com/`); it is compared exactly.
  auth0: { kind: "oidc", displayName: "Auth0", issuerRequired: true, scopes: STANDARD_OIDC_SCOPES },
  keycloak: { kind: "oidc", displayName: "Keycloak", issuerRequired: true, scopes: STANDARD_OIDC_SCOPES },
  // GitLab.com by default; a self-managed GitLab names its own issuer.
  gitlab: {
    kind: "oidc",
    displayName: "GitLab",
    issuer: "https://gitlab.com",
    scopes: STANDARD_OIDC_SCOPES,
  },
};

/** Scopes of a generic OpenID Connect provider unless configured. */
export const DEFAULT_OIDC_SCOPES = STANDARD_OIDC_SCOPES;

/**
 * Entra's multi-tenant authorities: their metadata's issuer carries the `{tenantid}` placeholder,
 * so `iss` is checked against the token's own `tid` instead of one fixed string.
 */
export const ENTRA_MULTI_TENANT = new Set(["common", "organizations"]);
