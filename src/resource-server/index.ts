/**
 * The resource-server role: protected resource metadata (RFC 9728), bearer token gate
 * (RFC 6750 §2-3) with DPoP (RFC 9449 §7), token verifiers (RFC 9068 JWT, RFC 7662
 * introspection) and a verification cache.
 */
export type { BearerRequestHead } from "./bearer-token.js";
export { type CachedVerifier, type CachedVerifierOptions, cachedVerifier } from "./cache.js";
export {
  type ChallengeContext,
  type ChallengeParts,
  challengeParts,
  challengePartsResponse,
  challengeResponse,
  insufficientScopeChallengeScopes,
} from "./challenge.js";
export type { DPoPPolicy, ResourceDPoPOptions } from "./dpop.js";
export { HostNotAllowedError, InsufficientScopeError, MissingTokenError } from "./errors.js";
export type { HostGuardOptions } from "./host-guard.js";
export { type IntrospectionVerifierOptions, introspectionVerifier } from "./introspection-verifier.js";
export { DEFAULT_JWT_ALGORITHMS, type JwtVerifierOptions, jwtVerifier } from "./jwt-verifier.js";
export {
  buildProtectedResourceMetadata,
  PRM_WELL_KNOWN,
  type ProtectedResourceMetadata,
  type ProtectedResourceMetadataOptions,
  protectedResourceMetadataPaths,
  protectedResourceMetadataUrl,
} from "./metadata.js";
export type {
  OperationAuditEvent,
  OperationAuditSinks,
  OperationDecisionName,
} from "./operations/audit.js";
export {
  BODY_TOO_LARGE,
  createOperationGate,
  DEFAULT_MAX_MCP_BODY,
  type OperationContext,
  type OperationGate,
  type OperationGateOptions,
  type OperationVerdict,
  type ReadBody,
  readBoundedText,
} from "./operations/gate.js";
export type { ListingKind } from "./operations/listing-filter.js";
export type { JsonRpcId, McpMessage, OperationTarget } from "./operations/messages.js";
export {
  type ClaimConditions,
  type CompiledPolicy,
  compileOperationPolicy,
  type OperationPolicy,
  type OperationRule,
  parseOperationPolicy,
} from "./operations/policy.js";
export {
  type BearerJudge,
  type BearerMiddleware,
  type BearerVerdict,
  createResourceServer,
  type RequiredScopes,
  type ResourceServer,
  type ResourceServerOptions,
} from "./resource-server.js";
export { type ExchangedToken, type ExchangeTokenOptions, exchangeToken } from "./token-exchange.js";
export type { AccessTokenVerifier, AuthInfo, Revision } from "./types.js";
export {
  type SubjectTokenSource,
  type UpstreamAccessToken,
  type UpstreamTokenClient,
  type UpstreamTokenClientOptions,
  UpstreamTokenError,
  upstreamTokenClient,
} from "./upstream-token.js";
