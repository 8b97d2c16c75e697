/**
 * The client role: `createAuthFetch` and the pieces it is made of.
 */
export {
  AuthClient,
  type AuthEvent,
  type CreateAuthFetchOptions,
  createAuthFetch,
  type GrantProvider,
  type LogoutOutcome,
  type LogoutResult,
} from "./auth-fetch.js";
export {
  type AuthorizationRequest,
  assertOpenableAuthorizationUrl,
  createAuthorizationRequest,
  type PendingAuthorization,
  validateAuthorizationResponse,
} from "./authorization.js";
export { type ClientCredentialsOptions, clientCredentialsGrant } from "./client-credentials.js";
export {
  assertPkceSupported,
  authorizationServerMetadataUrls,
  type DiscoveredResource,
  discoverAuthorizationServer,
  discoverProtectedResource,
  legacyAuthorizationServer,
  protectedResourceMetadataUrls,
  resourceMatchesServer,
} from "./discovery.js";
export { createDPoPKey, DPOP_ALGORITHM, DPoPSigner, htuOf, wantsDPoP } from "./dpop.js";
export {
  AuthorizationFlowError,
  type AuthorizationFlowErrorCode,
  type AuthorizationFlowErrorKind,
  isAuthorizationFlowError,
} from "./errors.js";
export type { FetchLike } from "./http.js";
export { type EnterpriseManagedOptions, enterpriseManagedGrant, jwtBearerGrant } from "./jwt-bearer.js";
export { explainNetworkError, type NetworkFailure, type NetworkFailureKind } from "./network-errors.js";
export { type PreregisteredClient, registerDynamically, resolveClient } from "./registration.js";
export { type RevocationContext, type RevocationResult, revokeToken } from "./revocation.js";
export { credentialsFromEnvironment, type StdioCredentials, stdioServerEnvironment } from "./stdio-env.js";
export {
  type BearerChallenge,
  type Revision,
  readChallenge,
  type ScopeStrategy,
  selectInitialScope,
  selectStepUpScope,
  withOfflineAccess,
} from "./step-up.js";
export { EncryptedFileTokenStore } from "./stores/encrypted-file.js";
export { MemoryTokenStore } from "./stores/memory.js";
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
export {
  type ClientKeyMaterial,
  clientAuthentication,
  exchangeAuthorizationCode,
  grantRequest,
  refreshAccessToken,
  SingleFlight,
} from "./tokens.js";
export { browserSession, openBrowser } from "./user-agent/browser.js";
export { type LoopbackListener, startLoopbackListener } from "./user-agent/loopback-listener.js";
export {
  type AuthorizationSession,
  type AuthorizationSessionFactory,
  fixedSession,
} from "./user-agent/session.js";
