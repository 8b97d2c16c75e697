/**
 * `gatehouse/client`. Exported: `createAuthFetch` / `AuthClient` and every type their options,
 * events and results name; the non-interactive grants (and `DPoPSigner`, the type a grant receives
 * as `dpop`); the token stores and their errors (`TokenStoreError`, with `KeychainUnavailableError`,
 * `LockTimeoutError` and `StorePathSymlinkError`); the user agents; `AuthorizationFlowError` and
 * `explainNetworkError`; the stdio credential helpers (spec "Applicability" 3); and the protocol
 * steps for a flow run by hand (discovery, registration, scope selection, the authorization
 * request and response, the token requests, revocation). Not exported: how those steps check
 * and sign (DPoP keys and proofs, PKCE support, well-known URL lists, client authentication, the
 * generic grant request), which `flow/` and `protocol/` apply and tests import by path.
 */

export {
  AuthorizationFlowError,
  type AuthorizationFlowErrorCode,
  type AuthorizationFlowErrorKind,
  isAuthorizationFlowError,
} from "./errors.js";
export {
  AuthClient,
  type AuthEvent,
  type CreateAuthFetchOptions,
  createAuthFetch,
  type DeviceAuthorizationOptions,
  type DeviceAuthorizationPrompt,
  type LogoutOutcome,
  type LogoutResult,
} from "./flow/auth-client.js";
export { type ClientCredentialsOptions, clientCredentialsGrant } from "./grants/client-credentials.js";
export {
  type EnterpriseManagedOptions,
  enterpriseManagedGrant,
  jwtBearerGrant,
} from "./grants/jwt-bearer.js";
export type { GrantProvider } from "./grants/types.js";
export {
  type AuthorizationRequest,
  assertOpenableAuthorizationUrl,
  createAuthorizationRequest,
  type PendingAuthorization,
  validateAuthorizationResponse,
} from "./protocol/authorization.js";
export {
  DEVICE_CODE_GRANT_TYPE,
  type DeviceAuthorization,
  type PollOptions as DeviceAuthorizationPollOptions,
  pollDeviceAuthorization,
  requestDeviceAuthorization,
} from "./protocol/device-authorization.js";
export {
  type DiscoveredAuthorizationServer,
  type DiscoveredResource,
  discoverAuthorizationServer,
  discoverAuthorizationServerVia,
  discoverProtectedResource,
  legacyAuthorizationServer,
  legacyAuthorizationServerVia,
  type MetadataDiscovery,
} from "./protocol/discovery.js";
export type { DPoPSigner } from "./protocol/dpop.js";
export type { FetchLike } from "./protocol/http.js";
export {
  type CompatibilitySettingName,
  type CompatibilityUse,
  type IssuerCompatibility,
  type IssuerCompatibilitySettings,
  validateIssuerCompatibility,
} from "./protocol/issuer-compat.js";
export {
  explainNetworkError,
  type NetworkFailure,
  type NetworkFailureKind,
} from "./protocol/network-errors.js";
export type { PreregisteredClient } from "./protocol/registration.js";
export { registerDynamically, resolveClient } from "./protocol/registration.js";
export { type RevocationContext, type RevocationResult, revokeToken } from "./protocol/revocation.js";
export type { Revision, ScopeStrategy } from "./protocol/step-up.js";
export {
  type BearerChallenge,
  readChallenge,
  selectInitialScope,
  selectStepUpScope,
} from "./protocol/step-up.js";
export type { ClientKeyMaterial } from "./protocol/tokens.js";
export { exchangeAuthorizationCode, refreshAccessToken } from "./protocol/tokens.js";

export { credentialsFromEnvironment, type StdioCredentials, stdioServerEnvironment } from "./stdio-env.js";
export {
  defaultTokenStore,
  type EncryptedFileStoreOptions,
  EncryptedFileTokenStore,
  KeychainTokenStore,
} from "./stores/encrypted-file.js";
export { TokenStoreError, type TokenStoreErrorCode } from "./stores/errors.js";
export { type FileLockOptions, LockTimeoutError } from "./stores/file-lock.js";
export { KeychainUnavailableError } from "./stores/keychain.js";
export { MemoryTokenStore } from "./stores/memory.js";
export { StorePathSymlinkError } from "./stores/no-follow.js";
export type {
  StoredClient,
  StoredDPoPKey,
  StoredResource,
  StoredServer,
  StoredTokens,
  StoreKind,
  StoreRecords,
  TokenStore,
} from "./stores/types.js";
export { browserSession, openBrowser } from "./user-agent/browser.js";
export { type LoopbackListener, startLoopbackListener } from "./user-agent/loopback-listener.js";
export {
  type AuthorizationSession,
  type AuthorizationSessionFactory,
  fixedSession,
} from "./user-agent/session.js";
