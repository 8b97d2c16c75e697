/**
 * The options, events and results of `createAuthFetch` / `AuthClient` (see auth-client.ts).
 */
import type { GrantProvider } from "../grants/types.js";
import type { FetchLike } from "../protocol/http.js";
import type { CompatibilitySettingName, IssuerCompatibilitySettings } from "../protocol/issuer-compat.js";
import type { PreregisteredClient } from "../protocol/registration.js";
import type { Revision, ScopeStrategy } from "../protocol/step-up.js";
import type { ClientKeyMaterial } from "../protocol/tokens.js";
import type { StoredClient, TokenStore } from "../stores/types.js";
import type { AuthorizationSessionFactory } from "../user-agent/session.js";

export type AuthEvent =
  | {
      type: "authorization_started";
      resource: string;
      issuer: string;
      scope: string | undefined;
      stepUp: boolean;
    }
  | { type: "authorized"; resource: string; issuer: string; scope: string | undefined }
  | { type: "refreshed"; resource: string; issuer: string }
  /** Protected resource metadata was read and an authorization server chosen (RFC 9728 §3, §7.6). */
  | { type: "discovered"; resource: string; issuer: string }
  /** A superseded refresh token could not be revoked (RFC 7009); the new tokens are unaffected. */
  | { type: "revocation_failed"; resource: string; issuer: string; reason: string }
  | { type: "registered"; issuer: string; source: StoredClient["source"] }
  /**
   * An issuer compatibility setting the operator configured was used (see `issuerCompatibility`):
   * which issuer, which setting, what it let through. Emitted at every use.
   */
  | { type: "compatibility"; issuer: string; setting: CompatibilitySettingName; detail: string };

/** What the user needs to approve a device authorization (RFC 8628 §3.3), handed to `onPrompt`. */
export interface DeviceAuthorizationPrompt {
  issuer: string;
  resource: string;
  /** The code to enter on the verification page. */
  userCode: string;
  /** The page to open, on any device (https, or http on loopback). */
  verificationUri: string;
  /** The page with the code filled in, when the server offers one: for a link or a QR code. */
  verificationUriComplete?: string;
  /** When the code stops working (ms since the epoch). */
  expiresAt: number;
}

/**
 * The device authorization grant (RFC 8628) as the interactive authorization: the user approves
 * on another device (a phone, a laptop with a browser) while this client polls.
 */
export interface DeviceAuthorizationOptions {
  /** Shows the user where to go and the code to enter; polling starts once it has returned. */
  onPrompt: (prompt: DeviceAuthorizationPrompt) => void | Promise<void>;
  /** Stops waiting for the approval; the request then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface CreateAuthFetchOptions {
  /** The fetch used for every request, ours and the caller's. Default: global fetch. */
  fetch?: FetchLike;
  /** Where tokens, metadata and registrations live. Default: in memory. */
  store?: TokenStore;
  /** Spec revision whose client rules apply. Default `2026-07-28`. */
  revision?: Revision;
  /** Scope choice on re-authorization; default from the revision. */
  scopeStrategy?: ScopeStrategy;
  /** Scope upgrades per request before a permanent error (spec "Limits" 1). Default 2. */
  maxStepUps?: number;
  /** Redirect URI used with `userAgent`. */
  redirectUri?: string;
  /** Receives the validated authorization URL and resolves with the callback URL. */
  userAgent?: (authorizationUrl: URL) => Promise<string | URL>;
  /** Alternative to `redirectUri` + `userAgent`: a fresh session per authorization (loopback). */
  authorizationSession?: AuthorizationSessionFactory;
  /**
   * Authorize with the device authorization grant (RFC 8628) instead of the browser code flow: for
   * machines without a browser. Not together with `userAgent`, `redirectUri` or
   * `authorizationSession`. The tokens are stored and refreshed like the code flow's.
   */
  deviceAuthorization?: DeviceAuthorizationOptions;
  /** HTTPS URL of this client's Client ID Metadata Document. */
  clientMetadataUrl?: string;
  /** Pre-registered clients, by exact issuer. */
  preregisteredClients?: Readonly<Record<string, PreregisteredClient>>;
  /** `client_name` for dynamic registration. */
  clientName?: string;
  /** Extra dynamic registration metadata. */
  registrationMetadata?: Record<string, unknown>;
  /**
   * RFC 9728 §7.6: which of several `authorization_servers` to use. Default: the first one, or
   * the first for which pre-registered credentials exist.
   */
  chooseAuthorizationServer?: (servers: readonly string[]) => string | Promise<string>;
  /** Ask for `offline_access` when the authorization server lists it. Default true. */
  offlineAccess?: boolean;
  /** Allow the 2025-03-26 fallbacks when a server has no protected resource metadata. */
  legacyFallback?: boolean;
  /**
   * Refresh this many seconds before expiry. Default: 30 s, capped at a third of each token's
   * lifetime, so a short-lived token is not refreshed before every call. A value given here is used
   * as given.
   */
  refreshSkewSeconds?: number;
  /** A non-interactive grant replacing the authorization code flow (see grants/). */
  grant?: GrantProvider;
  /** Key material for `private_key_jwt` registrations. */
  clientKeys?: ClientKeyMaterial;
  /**
   * DPoP (RFC 9449), see `wantsDPoP`: `"auto"` (default) binds tokens when the resource offers
   * DPoP and the authorization server can bind with ES256; `"always"` whenever the authorization
   * server lists ES256; `"never"` keeps to bearer tokens.
   */
  dpop?: "auto" | "always" | "never";
  /**
   * After a step-up whose tokens came with a new refresh token for the same issuer, client and
   * resource, revoke the superseded refresh token (RFC 7009), in the background. Default false:
   * an authorization server that keeps one grant per user and client across authorizations and
   * ends that whole grant when any of its tokens is revoked (oidc-provider's default
   * `loadExistingGrant` with its revocation endpoint behaves so) would end the new tokens too.
   * Turn it on for servers that issue a grant per authorization (Gatehouse's own server does).
   */
  revokeSupersededRefreshTokens?: boolean;
  /**
   * Per-issuer compatibility with authorization servers that break a rule the spec gives the
   * client (Microsoft Entra ID, Amazon Cognito, Google): by exact issuer, `assumeS256`, `resource`
   * (`"omit"` or `{ rewrite }`), `issuerAlias`, `tenantIssuer` (see protocol/issuer-compat.ts).
   * Off unless an issuer is named here; each setting applies to its issuer alone, and every use
   * is reported as a `compatibility` event. Checked when the client is constructed.
   */
  issuerCompatibility?: IssuerCompatibilitySettings;
  /** Progress notifications (never carry a token). */
  onEvent?: (event: AuthEvent) => void;
}

/** What `logout` told the authorization server about one stored token set (RFC 7009). */
export interface LogoutOutcome {
  resource: string;
  issuer: string;
  client_id: string;
  /**
   * `revoked`: the server accepted the revocation of the refresh token and the live access token;
   * `nothing_to_revoke`: no refresh token and the access token had expired; `no_endpoint`: the
   * server publishes no `revocation_endpoint`, so its tokens stay valid until they expire;
   * `unsupported`: the server answered `unsupported_token_type`; `skipped`: `revoke: false`;
   * `failed`: see `error` (the tokens are forgotten locally all the same).
   */
  revocation: "revoked" | "nothing_to_revoke" | "no_endpoint" | "unsupported" | "skipped" | "failed";
  error?: unknown;
}

export interface LogoutResult {
  /** Token sets forgotten locally. */
  removed: number;
  outcomes: LogoutOutcome[];
}
