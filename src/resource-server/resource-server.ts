/**
 * The gate: verify + challenge, combined once (DESIGN.md principle 2).
 */
import { DPoPKeyMismatchError } from "../shared/dpop-proof.js";
import { GatehouseTypeError } from "../shared/errors.js";
import type { Logger } from "../shared/log.js";
import { DEFAULT_REVISION } from "../shared/revision.js";
import { isScopeToken, ScopeHierarchy } from "../shared/scopes.js";
import {
  type BearerRequestHead,
  type DPoPCredentials,
  extractBearerToken,
  headOfRequest,
} from "./bearer-token.js";
import {
  type ChallengeContext,
  type ChallengeParts,
  challengeParts,
  challengePartsResponse,
  challengeResponse,
} from "./challenge.js";
import { dpopMetadataFields, type ResourceDPoPOptions, resourceDPoP } from "./dpop.js";
import {
  type HostNotAllowedError,
  InsufficientScopeError,
  invalidToken,
  MissingTokenError,
} from "./errors.js";
import { type HostGuardOptions, hostGuard } from "./host-guard.js";
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
 * The gate's judgement of one request head ({@link ResourceServer.judge}). `request` builds a web
 * `Request`; it is called only when the required scopes are a function of the request. The verdict
 * is synchronous when nothing had to be awaited (fixed scopes, no form body, and a verification the
 * verifier already holds, see `AccessTokenVerifier.peek`), a promise otherwise.
 */
export type BearerJudge = (
  head: BearerRequestHead,
  request?: () => Request,
) => BearerVerdict | Promise<BearerVerdict>;

export interface ResourceServerOptions extends ProtectedResourceMetadataOptions, HostGuardOptions {
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
  /**
   * Called whenever a verified token is refused for too few scopes (the gate's 403
   * `insufficient_scope`; `authenticate` throwing {@link InsufficientScopeError}), with the token's
   * facts (`tokenId` = its `jti`) and the scopes the operation needs. A co-hosted authorization
   * server uses it to mark the grant (e.g. so its next refresh answers `invalid_grant`). Called
   * synchronously before the answer is returned but never awaited: a returned promise runs on its
   * own. A throw or rejection is caught and logged by error name only.
   */
  onInsufficientScope?: (auth: AuthInfo, requiredScopes: readonly string[]) => unknown;
  /**
   * DPoP (RFC 9449 §7): whether DPoP-bound tokens are accepted, with the `DPoP` scheme and a
   * proof per request (policy `"bearer"`, the default: no; `"allowed"`; `"required"`), and how
   * proofs are checked (algorithms, `iat` window, replay guard shared across instances, nonces).
   */
  dpop?: ResourceDPoPOptions;
}

export interface ResourceServer {
  /** The canonical resource URI (RFC 8707 §2), as published in the metadata. */
  readonly resource: string;
  /** The RFC 9728 document. */
  readonly metadata: Readonly<ProtectedResourceMetadata>;
  /** The URL sent as `resource_metadata` in challenges (RFC 9728 §5.1). */
  readonly resourceMetadataUrl: string;
  readonly revision: Revision;
  /** The scope hierarchy every sufficiency judgement goes through (the operation gate's too). */
  readonly scopeHierarchy: ScopeHierarchy;
  /** True when `request` targets a metadata path (path-specific or root form, RFC 9728 §3.1). */
  handles(request: Request): boolean;
  /** The metadata answer (GET/HEAD/OPTIONS with CORS; 405 otherwise; 404 for another path). */
  metadataResponse(request: Request): Response;
  /**
   * Extracts and verifies the token, without any scope check. Throws the typed errors, first
   * {@link HostNotAllowedError} when the Host/Origin check refuses the request (no token work then).
   */
  verifyAccessToken(request: Request): Promise<AuthInfo>;
  /** {@link verifyAccessToken} plus the scope check through the hierarchy. */
  authenticate(request: Request, requiredScopes?: RequiredScopes): Promise<AuthInfo>;
  /**
   * The RFC 6750 §3.1 answer to an error from {@link authenticate}. With `request`, an error for a
   * request that used the `DPoP` scheme goes in the `DPoP` challenge (RFC 9449 §7.1).
   */
  challengeResponse(error: unknown, requiredScopes?: readonly string[], request?: Request): Response;
  /**
   * The gate: judges a request head (Host/Origin, token, verification, `scopes`) and answers with
   * the verified token or the challenge as {@link ChallengeParts}. Every adapter is this judgement
   * plus translation; `scopes` is checked now, so a bad list throws at start-up.
   */
  judge(options?: { scopes?: RequiredScopes }): BearerJudge;
  /** {@link judge} as a web-standard middleware: answers the challenge itself, or calls `next`. */
  requireBearer(options?: { scopes?: RequiredScopes }): BearerMiddleware;
}

/** No scopes required (a shared empty list, so the warm path allocates none). */
const NO_SCOPES: readonly string[] = [];

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
  const built = buildProtectedResourceMetadata(options);
  const verifier = options.verifier;
  if (!verifier || typeof verifier.verify !== "function") {
    throw invalidOption("verifier with a verify(token) method is required");
  }
  const revision = options.revision ?? DEFAULT_REVISION;
  if (!REVISIONS.includes(revision)) throw invalidOption(`revision must be one of ${REVISIONS.join(", ")}`);
  const hierarchy =
    options.scopeHierarchy instanceof ScopeHierarchy
      ? options.scopeHierarchy
      : new ScopeHierarchy(options.scopeHierarchy ?? {});
  const toleranceMs = (options.clockToleranceSeconds ?? 30) * 1000;
  const onInsufficientScope = options.onInsufficientScope;
  if (onInsufficientScope !== undefined && typeof onInsufficientScope !== "function") {
    throw invalidOption("onInsufficientScope must be a function");
  }
  const resource = built.resource;
  // DPoP (RFC 9449 §7): `undefined` for a bearer-only resource, whose gate then pays nothing for it.
  const dpop = resourceDPoP(options.dpop, resource);
  const metadata: ProtectedResourceMetadata = { ...built, ...dpopMetadataFields(dpop) };
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
    dpop:
      dpop === undefined ? undefined : { required: dpop.required, algs: dpop.verifier.algorithms.join(" ") },
  };

  // DNS-rebinding defence (MCP transport spec, local servers): Host and Origin checked before any
  // token work. `undefined` when nothing is checked, so the gate then pays nothing for it.
  const guard = hostGuard(resource, options);

  const handles = (request: Request): boolean => {
    const url = request.url;
    if (!url.includes("/.well-known/")) return false;
    return metadataPaths.includes(new URL(url).pathname);
  };

  const resolveScopes = async (
    request: Request,
    scopes: (request: Request) => readonly string[] | Promise<readonly string[]>,
  ): Promise<readonly string[]> => checkScopeList(await scopes(request), "requiredScopes(request) result");

  /** Runs the hook without letting it delay or change the answer; its errors are logged by name. */
  const notifyInsufficientScope = (auth: AuthInfo, required: readonly string[]): void => {
    // The message may carry anything the hook put in it (claims, even a token): log the name only.
    const logFailure = (error: unknown) =>
      options.logger?.warn("resource.on_insufficient_scope_failed", {
        error: error instanceof Error ? error.name : typeof error,
      });
    try {
      const pending = onInsufficientScope?.(auth, required);
      if (pending != null) Promise.resolve(pending).then(undefined, logFailure);
    } catch (error) {
      logFailure(error);
    }
  };

  const peek = verifier.peek?.bind(verifier);
  /**
   * The token `verifiedBefore` was asked about during the extraction under way, and what the
   * verifier held for it: read at once after the synchronous extraction (nothing runs in between),
   * so a request looks its token up once, warm (a hit) or cold (a miss: straight to `verify`).
   */
  let peekedToken: string | undefined;
  let peeked: AuthInfo | undefined;
  const verifiedBefore =
    peek === undefined
      ? undefined
      : (token: string) => {
          peekedToken = token;
          peeked = peek(token);
          return peeked !== undefined;
        };

  // The judgement, as named steps in the order the rules apply. Each step is synchronous and hands
  // on to the next at once, or through a promise when it had to wait: a warm request (fixed scopes,
  // no form body, a verification the verifier holds) is decided without a promise round-trip.

  /**
   * Step 1-2: the Host/Origin guard (before any token work), then the required scopes (a scopes
   * function runs only for a request the guard let through). `judged.required` receives them for
   * the challenge. Returns the verified token's facts or throws the typed error.
   */
  const judgeHead = (
    head: BearerRequestHead,
    scopes: RequiredScopes | undefined,
    request: (() => Request) | undefined,
    judged: Judged,
  ): AuthInfo | Promise<AuthInfo> => {
    // `request` is there whenever `scopes` is a function (`judge` and `authenticate` see to it).
    guard?.(head);
    if (typeof scopes !== "function") return judgeToken(head, scopes ?? NO_SCOPES, judged);
    return resolveScopes(request!(), scopes).then((required) => {
      judged.required = required;
      return judgeToken(head, required, judged);
    });
  };

  /** Step 3: the token, from the `Authorization` header only (bearer-token.ts). */
  const judgeToken = (
    head: BearerRequestHead,
    required: readonly string[],
    judged: Judged,
  ): AuthInfo | Promise<AuthInfo> => {
    peekedToken = undefined;
    peeked = undefined;
    const token = extractBearerToken(head, dpop !== undefined, verifiedBefore);
    // The lookup counts only for the token extracted (a header that fails the fast path may yield
    // another string); the same string object, so the comparison is by reference.
    const lookedUp = peekedToken !== undefined && peekedToken === token;
    const known = peeked;
    peekedToken = undefined;
    peeked = undefined;
    if (token instanceof Promise) return token.then((read) => verifyToken(read, required, head, judged));
    return verifyToken(token, required, head, judged, lookedUp, known);
  };

  /** Step 4: verification, answered at once when the verifier already holds it (`peek`). */
  const verifyToken = (
    token: string | DPoPCredentials | undefined,
    required: readonly string[],
    head: BearerRequestHead,
    judged: Judged,
    /** Extraction already asked the verifier (`peek`) about `token`; `known` is what it held. */
    lookedUp = false,
    known?: AuthInfo,
  ): AuthInfo | Promise<AuthInfo> => {
    if (token === undefined) throw new MissingTokenError(required);
    if (typeof token !== "string") {
      judged.dpop = true;
      return verifyDPoP(token.token, required, head);
    }
    // RFC 9449 §7.1 with RFC 9728 `dpop_bound_access_tokens_required`: no bearer tokens at all
    // (not even verified: its answer is the same whatever the token).
    if (dpop?.required) throw invalidToken("bearer token where DPoP is required");
    // A miss during extraction is not asked again: nothing ran since, so it would miss again.
    const held = lookedUp ? known : peek?.(token);
    if (held !== undefined) return admitBearer(held, required);
    return verifier.verify(token).then((auth) => admitBearer(auth, required));
  };

  /** RFC 9449 §7.2: a DPoP-bound token sent as a bearer token is refused, whatever the policy. */
  const admitBearer = (auth: AuthInfo, required: readonly string[]): AuthInfo => {
    if (auth.dpopJkt !== undefined) throw invalidToken("DPoP-bound token presented with the Bearer scheme");
    return admit(auth, required);
  };

  /**
   * Step 4 for the `DPoP` scheme (RFC 9449 §7.1): the token must be DPoP-bound, and the request's
   * proof valid (method, URL, `ath` of this token, fresh, not replayed) and signed by the key the
   * token is bound to (checked before the proof is recorded as used).
   */
  const verifyDPoP = async (
    token: string,
    required: readonly string[],
    head: BearerRequestHead,
  ): Promise<AuthInfo> => {
    const auth = peek?.(token) ?? (await verifier.verify(token));
    if (auth.dpopJkt === undefined) throw invalidToken("DPoP scheme with a token that is not DPoP-bound");
    try {
      await dpop!.verifier.verify({
        proof: head.header("dpop"),
        method: head.method ?? "",
        url: head.requestUrl?.() ?? head.url,
        accessToken: token,
        jkt: auth.dpopJkt,
      });
    } catch (error) {
      // RFC 9449 §7.1: a proof by another key than the token's is a token problem at a resource.
      if (error instanceof DPoPKeyMismatchError) throw invalidToken("DPoP key binding mismatch", error);
      throw error;
    }
    return admit(auth, required);
  };

  /**
   * Step 5: whatever the verifier, the token MUST name this resource (exact string) and must not be
   * expired (spec, Token validation rules 2-3; checked again so a custom verifier cannot skip it);
   * then its scopes must cover `required`.
   */
  const admit = (auth: AuthInfo, required: readonly string[]): AuthInfo => {
    if (!Array.isArray(auth.audience) || !auth.audience.includes(resource)) {
      throw invalidToken("verifier accepted a token whose audience is not this resource");
    }
    if (!(auth.expiresAt * 1000 + toleranceMs > Date.now())) throw invalidToken("token expired");
    // Fast path: every required scope granted directly (no hierarchy walk needed).
    if (grantsAll(auth.scopes, required)) return auth;
    // 2026-07-28 (Insufficient scope, rule 5): sufficiency MUST honour the scope hierarchy.
    const missing = hierarchy.missing(auth.scopes, required);
    if (missing.size === 0) return auth;
    if (onInsufficientScope !== undefined) notifyInsufficientScope(auth, required);
    throw new InsufficientScopeError(required, auth.scopes, [...missing]);
  };

  /** The verdict of {@link judgeHead}: the token's facts, or the challenge (challenge.ts) instead. */
  const verdict = (
    head: BearerRequestHead,
    scopes: RequiredScopes | undefined,
    request: (() => Request) | undefined,
  ): BearerVerdict | Promise<BearerVerdict> => {
    const judged: Judged = {
      required: typeof scopes === "function" ? NO_SCOPES : (scopes ?? NO_SCOPES),
      dpop: false,
    };
    try {
      const auth = judgeHead(head, scopes, request, judged);
      // The refusal closure only for a judgement that waits: a warm request allocates none.
      if (auth instanceof Promise) return auth.then(passed, (error) => refused(error, judged));
      return { ok: true, auth };
    } catch (error) {
      return refused(error, judged);
    }
  };

  const refused = (error: unknown, judged: Judged): BearerVerdict => ({
    ok: false,
    challenge: challengeParts(error, context, judged.required, judged.dpop),
  });

  const judge = (judgeOptions: { scopes?: RequiredScopes } = {}, where = "judge scopes"): BearerJudge => {
    const scopes = judgeOptions.scopes;
    if (scopes !== undefined && typeof scopes !== "function") checkScopeList(scopes, where);
    if (typeof scopes !== "function") return (head) => verdict(head, scopes, undefined);
    return (head, request) => {
      // Misuse, not a request to answer: thrown to the caller, as at set-up.
      if (request === undefined)
        throw invalidOption(`${where}: scopes computed from the request need the request argument`);
      return verdict(head, scopes, request);
    };
  };

  /** The typed-error form of the judgement, for `authenticate` and `verifyAccessToken`. */
  const authenticate = async (request: Request, scopes?: RequiredScopes): Promise<AuthInfo> =>
    judgeHead(headOfRequest(request), scopes, () => request, { required: NO_SCOPES, dpop: false });

  return {
    resource,
    metadata,
    resourceMetadataUrl,
    revision,
    scopeHierarchy: hierarchy,
    handles,
    metadataResponse(request) {
      if (!handles(request)) return new Response(null, { status: 404 });
      return metadataDocumentResponse(request, metadataBody);
    },
    verifyAccessToken: (request) => authenticate(request),
    authenticate,
    challengeResponse: (error, requiredScopes, request) =>
      challengeResponse(
        error,
        context,
        requiredScopes,
        // RFC 9110 §11.1: the scheme name is case-insensitive.
        dpop !== undefined && /^dpop /i.test(request?.headers.get("authorization") ?? ""),
      ),
    judge,
    requireBearer(middlewareOptions = {}) {
      const judgeRequest = judge(middlewareOptions, "requireBearer scopes");
      // The request is handed to the judgement only when the scopes are computed from it.
      const dynamic = typeof middlewareOptions.scopes === "function";
      const decide = (answer: BearerVerdict, request: Request, next: Parameters<BearerMiddleware>[1]) =>
        answer.ok ? next(request, answer.auth) : Promise.resolve(challengePartsResponse(answer.challenge));
      // A warm token's verdict is synchronous: it is acted on without awaiting it (no promise tick
      // on the hot path); a synchronous throw still reaches the caller as a rejection.
      return (request, next) => {
        try {
          const head = headOfRequest(request);
          const answer = dynamic ? judgeRequest(head, () => request) : judgeRequest(head);
          if (answer instanceof Promise) return answer.then((settled) => decide(settled, request, next));
          return decide(answer, request, next);
        } catch (error) {
          return Promise.reject(error);
        }
      };
    },
  };
}

/** What the judgement learnt on the way, for the challenge: the scopes needed, the scheme used. */
interface Judged {
  required: readonly string[];
  /** The request used the `DPoP` scheme (its challenge then carries the error, RFC 9449 §7.1). */
  dpop: boolean;
}

function passed(auth: AuthInfo): BearerVerdict {
  return { ok: true, auth };
}

/** Every scope of `required` is in `granted` as such (a loop: no callback allocated per request). */
function grantsAll(granted: readonly string[], required: readonly string[]): boolean {
  for (let i = 0; i < required.length; i++) if (!granted.includes(required[i]!)) return false;
  return true;
}
