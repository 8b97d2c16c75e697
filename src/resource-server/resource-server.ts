/**
 * The gate: verify + challenge, combined once (DESIGN.md principle 2).
 */
import { GatehouseTypeError } from "../shared/errors.js";
import type { Logger } from "../shared/log.js";
import { isScopeToken, ScopeHierarchy } from "../shared/scopes.js";
import {
  type BearerRequestHead,
  bearerTokenFromHead,
  extractBearerTokenFromHead,
  headOfRequest,
  mayCarryFormTokenHead,
} from "./bearer-token.js";
import {
  type ChallengeContext,
  type ChallengeParts,
  challengeParts,
  challengePartsResponse,
  challengeResponse,
} from "./challenge.js";
import { InsufficientScopeError, invalidToken, MissingTokenError } from "./errors.js";
import {
  buildProtectedResourceMetadata,
  metadataDocumentResponse,
  type ProtectedResourceMetadata,
  type ProtectedResourceMetadataOptions,
  protectedResourceMetadataPaths,
  protectedResourceMetadataUrl,
} from "./metadata.js";
import { type AccessTokenVerifier, type AuthInfo, REVISIONS, type Revision } from "./types.js";

/** Scopes an operation needs: a fixed list, or computed from the request (2026-07-28 allows both). */
export type RequiredScopes =
  | readonly string[]
  | ((request: Request) => readonly string[] | Promise<readonly string[]>);

/** A web-standard middleware: answers the challenge itself, or calls `next` with the verified token. */
export type BearerMiddleware = (
  request: Request,
  next: (request: Request, auth: AuthInfo) => Promise<Response>,
) => Promise<Response>;

/** The gate's verdict as data: the verified token, or the challenge to send instead. */
export type BearerVerdict = { ok: true; auth: AuthInfo } | { ok: false; challenge: ChallengeParts };

/**
 * The gate on a {@link BearerRequestHead}, for adapters that write responses themselves. `request`
 * builds a web `Request`; it is called only when the required scopes are a function of the request.
 * The verdict is synchronous when nothing had to be awaited (fixed scopes and a verification the
 * verifier already holds, see `AccessTokenVerifier.peek`), a promise otherwise.
 */
export type BearerHeadCheck = (
  head: BearerRequestHead,
  request?: () => Request,
) => BearerVerdict | Promise<BearerVerdict>;

export interface ResourceServerOptions extends ProtectedResourceMetadataOptions {
  /** How access tokens are checked: {@link jwtVerifier}, {@link introspectionVerifier}, wrapped in {@link cachedVerifier}. */
  verifier: AccessTokenVerifier;
  /** Broader scopes imply narrower ones (2026-07-28: MUST be honoured when judging sufficiency). */
  scopeHierarchy?: ScopeHierarchy | Readonly<Record<string, readonly string[]>>;
  /** Spec revision whose rules apply where they differ (default `2026-07-28`). */
  revision?: Revision;
  /** `Access-Control-Allow-Origin: *` on challenges (default true). */
  cors?: boolean;
  /** Leeway when re-checking `expiresAt` from any verifier, in seconds (default 30). */
  clockToleranceSeconds?: number;
  /** Receives private failure details (never tokens). */
  logger?: Logger;
}

export interface ResourceServer {
  /** The canonical resource URI (RFC 8707 §2), as published in the metadata. */
  readonly resource: string;
  /** The RFC 9728 document. */
  readonly metadata: Readonly<ProtectedResourceMetadata>;
  /** The URL sent as `resource_metadata` in challenges (RFC 9728 §5.1). */
  readonly resourceMetadataUrl: string;
  readonly revision: Revision;
  /** True when `request` targets a metadata path (path-specific or root form, RFC 9728 §3.1). */
  handles(request: Request): boolean;
  /** The metadata answer (GET/HEAD/OPTIONS with CORS; 405 otherwise; 404 for another path). */
  metadataResponse(request: Request): Response;
  /** Extracts and verifies the token, without any scope check. Throws the typed errors. */
  verifyAccessToken(request: Request): Promise<AuthInfo>;
  /** {@link verifyAccessToken} plus the scope check through the hierarchy. */
  authenticate(request: Request, requiredScopes?: RequiredScopes): Promise<AuthInfo>;
  /** The RFC 6750 §3.1 answer to an error from {@link authenticate}. */
  challengeResponse(error: unknown, requiredScopes?: readonly string[]): Response;
  /** A middleware requiring a bearer token with `scopes`. */
  requireBearer(options?: { scopes?: RequiredScopes }): BearerMiddleware;
  /**
   * The same gate as {@link requireBearer} (same rules, same challenges) on a request head, with
   * the challenge as {@link ChallengeParts} instead of a `Response`: the node:http adapter uses it
   * so a protected route never builds web `Request`/`Response` objects.
   */
  requireBearerHead(options?: { scopes?: RequiredScopes }): BearerHeadCheck;
}

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

function checkScopeList(scopes: unknown, where: string): readonly string[] {
  if (!Array.isArray(scopes)) throw invalidOption(`${where} must be an array of scope strings`);
  for (const s of scopes) {
    if (typeof s !== "string" || !isScopeToken(s)) {
      throw new GatehouseTypeError("ERR_INVALID_SCOPE", `${where} contains an invalid scope token`);
    }
  }
  return scopes as string[];
}

/**
 * Creates a protected resource: its metadata (RFC 9728), its challenges (RFC 6750 §3) and its
 * token gate (spec "Token validation by the resource server"). Options are validated now; a
 * misconfiguration throws {@link GatehouseTypeError} at start-up.
 */
export function createResourceServer(options: ResourceServerOptions): ResourceServer {
  if (typeof options !== "object" || options === null) throw invalidOption("options are required");
  const metadata = buildProtectedResourceMetadata(options);
  const verifier = options.verifier;
  if (!verifier || typeof verifier.verify !== "function") {
    throw invalidOption("verifier with a verify(token) method is required");
  }
  const revision = options.revision ?? "2026-07-28";
  if (!REVISIONS.includes(revision)) throw invalidOption(`revision must be one of ${REVISIONS.join(", ")}`);
  const hierarchy =
    options.scopeHierarchy instanceof ScopeHierarchy
      ? options.scopeHierarchy
      : new ScopeHierarchy(options.scopeHierarchy ?? {});
  const toleranceMs = (options.clockToleranceSeconds ?? 30) * 1000;
  const resource = metadata.resource;
  const resourceMetadataUrl = protectedResourceMetadataUrl(resource);
  const metadataPaths = protectedResourceMetadataPaths(resource);
  const metadataBody = JSON.stringify(metadata);
  const context: ChallengeContext = {
    resourceMetadataUrl,
    revision,
    scopesSupported: metadata.scopes_supported,
    scopeHierarchy: hierarchy,
    cors: options.cors ?? true,
    logger: options.logger,
  };

  const handles = (request: Request): boolean => {
    const url = request.url;
    if (!url.includes("/.well-known/")) return false;
    return metadataPaths.includes(new URL(url).pathname);
  };

  // Spec, Token validation rules 2-3: whatever the verifier, the token MUST name this resource
  // (exact string) and must not be expired; checked again here so a custom verifier cannot skip it.
  const accept = (auth: AuthInfo): AuthInfo => {
    if (!Array.isArray(auth.audience) || !auth.audience.includes(resource)) {
      throw invalidToken("verifier accepted a token whose audience is not this resource");
    }
    if (!(auth.expiresAt * 1000 + toleranceMs > Date.now())) throw invalidToken("token expired");
    return auth;
  };

  const verifyHead = async (head: BearerRequestHead, required: readonly string[] = []): Promise<AuthInfo> => {
    // The body is only looked at when it is a form (RFC 6750 §2.2 method, refused here).
    const token = mayCarryFormTokenHead(head)
      ? await extractBearerTokenFromHead(head)
      : bearerTokenFromHead(head);
    if (token === undefined) throw new MissingTokenError(required);
    return accept(await verifier.verify(token));
  };

  const verifyAccessToken = (request: Request, required: readonly string[] = []): Promise<AuthInfo> =>
    verifyHead(headOfRequest(request), required);

  const resolveScopes = async (
    request: Request,
    scopes: RequiredScopes | undefined,
  ): Promise<readonly string[]> => {
    if (scopes === undefined) return [];
    if (typeof scopes !== "function") return scopes;
    return checkScopeList(await scopes(request), "requiredScopes(request) result");
  };

  const checkScopes = (auth: AuthInfo, required: readonly string[]): void => {
    if (required.length === 0) return;
    // Fast path: every required scope granted directly (no hierarchy walk needed).
    if (required.every((s) => auth.scopes.includes(s))) return;
    // 2026-07-28 (Insufficient scope, rule 5): sufficiency MUST honour the scope hierarchy.
    const missing = hierarchy.missing(auth.scopes, required);
    if (missing.size > 0) throw new InsufficientScopeError(required, auth.scopes, [...missing]);
  };

  const authenticate = async (request: Request, scopes?: RequiredScopes): Promise<AuthInfo> => {
    const required = await resolveScopes(request, scopes);
    const auth = await verifyAccessToken(request, required);
    checkScopes(auth, required);
    return auth;
  };

  const peek = verifier.peek?.bind(verifier);

  /** The gate itself; `requireBearer` and `requireBearerHead` are this with two kinds of request. */
  const bearerHeadCheck = (scopes: RequiredScopes | undefined, where: string): BearerHeadCheck => {
    if (scopes !== undefined && typeof scopes !== "function") checkScopeList(scopes, where);
    const fixed = typeof scopes === "function" ? undefined : (scopes ?? []);
    const slow = async (head: BearerRequestHead, request?: () => Request): Promise<BearerVerdict> => {
      let required: readonly string[] = fixed ?? [];
      try {
        if (fixed === undefined) required = await resolveScopes(request!(), scopes);
        const auth = await verifyHead(head, required);
        checkScopes(auth, required);
        return { ok: true, auth };
      } catch (error) {
        return { ok: false, challenge: challengeParts(error, context, required) };
      }
    };
    return (head, request) => {
      if (fixed === undefined) {
        if (request === undefined) {
          throw new GatehouseTypeError(
            "ERR_INVALID_OPTION",
            `${where}: scopes computed from the request need the request argument`,
          );
        }
        return slow(head, request);
      }
      // Warm path, answered synchronously: fixed scopes, no form body to read, and a verification
      // the verifier already holds. The same rules in the same order as `slow`.
      if (peek === undefined || mayCarryFormTokenHead(head)) return slow(head, request);
      try {
        const token = bearerTokenFromHead(head);
        if (token === undefined) throw new MissingTokenError(fixed);
        const known = peek(token);
        if (known === undefined) return slow(head, request);
        const auth = accept(known);
        checkScopes(auth, fixed);
        return { ok: true, auth };
      } catch (error) {
        return { ok: false, challenge: challengeParts(error, context, fixed) };
      }
    };
  };

  return {
    resource,
    metadata,
    resourceMetadataUrl,
    revision,
    handles,
    metadataResponse(request) {
      if (!handles(request)) return new Response(null, { status: 404 });
      return metadataDocumentResponse(request, metadataBody);
    },
    verifyAccessToken: (request) => verifyAccessToken(request),
    authenticate,
    challengeResponse: (error, requiredScopes) => challengeResponse(error, context, requiredScopes),
    requireBearer(middlewareOptions = {}) {
      const check = bearerHeadCheck(middlewareOptions.scopes, "requireBearer scopes");
      return async (request, next) => {
        const verdict = await check(headOfRequest(request), () => request);
        if (!verdict.ok) return challengePartsResponse(verdict.challenge);
        return next(request, verdict.auth);
      };
    },
    requireBearerHead: (checkOptions = {}) =>
      bearerHeadCheck(checkOptions.scopes, "requireBearerHead scopes"),
  };
}
