/**
 * The shared vocabulary every role speaks, published as the package root `gatehouse-auth`
 * (src/index.ts re-exports this module; there is no `gatehouse-auth/shared` subpath: one public
 * entry per concept, issue 23 item 9). Named one by one so that a helper added to a shared file
 * does not become public by accident; what stays inside (response building, random tokens,
 * hashing, set helpers, log redaction, DPoP `htu` normalisation) is imported by path in `src/`.
 *
 * - errors: the two families and the closed set of codes (DESIGN.md principle 3);
 * - the spec revisions; scopes and `ScopeHierarchy`; the canonical resource URI (RFC 8707 §2);
 * - `WWW-Authenticate` parsing and building (RFC 9110 §11.6.1, RFC 6750 §3) and the OAuth error
 *   response (RFC 6749 §5.2);
 * - constant-time comparison; the loggers;
 * - the DPoP proof verifier and its replay guards (RFC 9449 §4.3, §11.1).
 */

export { timingSafeEqualString } from "./crypto.js";
export {
  DEFAULT_DPOP_ALGORITHMS,
  DPoPKeyMismatchError,
  type DPoPNonceOptions,
  type DPoPProofRequest,
  type DPoPProofVerifier,
  type DPoPProofVerifierOptions,
  type DPoPReplayGuard,
  dpopProofVerifier,
  type MemoryReplayGuardOptions,
  memoryReplayGuard,
  storeReplayGuard,
  type VerifiedDPoPProof,
} from "./dpop-proof.js";
export {
  type AdapterErrorCode,
  type AuthorizationFlowErrorCode,
  type GateErrorCode,
  GatehouseError,
  type GatehouseErrorCode,
  GatehouseTypeError,
  type GatehouseTypeErrorCode,
  type GuardedFetchErrorCode,
  isGatehouseError,
  OAuthError,
  type OAuthErrorCode,
  type OAuthErrorOptions,
  type SecretEnvelopeErrorCode,
  type SigningKeyDecryptionErrorCode,
  type StorageErrorCode,
  type TokenStoreErrorCode,
  type UpstreamTokenErrorCode,
} from "./errors.js";
export { oauthErrorResponse } from "./http.js";
export { jsonLogger, type Logger, silentLogger } from "./log.js";
export { canonicalResourceUri, isValidResourceUri } from "./resource-uri.js";
export { DEFAULT_REVISION, isRevision, REVISIONS, type Revision } from "./revision.js";
export { formatScope, isScopeToken, parseScope, ScopeHierarchy } from "./scopes.js";
export { buildChallenge, type Challenge, findChallenge, parseWWWAuthenticate } from "./www-authenticate.js";
