/**
 * Hono adapter: the resource server's judgement (`ResourceServer.judge`) on Hono's web `Request`,
 * `c.get("auth")` set on success. Translation only, in two forms: {@link bearerAuth}, a middleware,
 * and {@link withBearerAuth}, which wraps one route handler (a route with a single handler skips
 * Hono's middleware chain, so the protected route costs what the unprotected one does plus the
 * judgement).
 */
import type { Context, Env, Handler, Input, MiddlewareHandler, Next } from "hono";
import type { BlankInput } from "hono/types";
import { headOfRequest } from "../resource-server/bearer-token.js";
import { challengePartsResponse } from "../resource-server/challenge.js";
import type {
  AuthInfo,
  BearerJudge,
  BearerVerdict,
  OperationContext,
  OperationGate,
  RequiredScopes,
  ResourceServer,
} from "../resource-server/index.js";
import { readBoundedText } from "../resource-server/operations/gate.js";

/** Context variables the middleware sets. */
export type BearerAuthVariables = { auth: AuthInfo };

/**
 * The gate's judgement of Hono's request: synchronous when nothing had to wait. The request itself
 * is handed on only for a scopes function (no closure per request otherwise).
 */
function requestJudge(
  gate: Pick<ResourceServer, "judge">,
  scopes: RequiredScopes | undefined,
): (request: Request) => BearerVerdict | Promise<BearerVerdict> {
  const judge: BearerJudge = gate.judge({ scopes });
  if (typeof scopes !== "function") return (request) => judge(headOfRequest(request));
  return (request) => judge(headOfRequest(request), () => request);
}

/**
 * Hono middleware: answers the RFC 6750 challenge itself, or sets `auth` and continues. A warm
 * request (the verification already held, fixed scopes) is judged without waiting for a promise.
 */
export function bearerAuth(
  gate: Pick<ResourceServer, "judge">,
  options: { scopes?: RequiredScopes } = {},
): MiddlewareHandler<{ Variables: BearerAuthVariables }> {
  const judge = requestJudge(gate, options.scopes);
  return async (c, next) => {
    let verdict = judge(c.req.raw);
    if (verdict instanceof Promise) verdict = await verdict;
    if (!verdict.ok) return challengePartsResponse(verdict.challenge);
    c.set("auth", verdict.auth);
    await next();
  };
}

/**
 * One route handler behind the gate: answers the RFC 6750 challenge itself, or sets `auth` and
 * returns what `handler` returns. The same judgement as {@link bearerAuth}, for a route written
 * `app.get(path, withBearerAuth(gate, { scopes }, handler))`: Hono calls a route whose only handler
 * matches directly, without composing a middleware chain, and a warm request (the verification
 * already held, fixed scopes) reaches `handler` in the same call, without a promise. (Middleware
 * registered with `app.use` for the same path still makes Hono compose the chain.)
 */
export function withBearerAuth<
  E extends Env = { Variables: BearerAuthVariables },
  P extends string = string,
  I extends Input = BlankInput,
>(
  gate: Pick<ResourceServer, "judge">,
  options: { scopes?: RequiredScopes },
  handler: Handler<E & { Variables: BearerAuthVariables }, P, I>,
): Handler<E, P, I> {
  const judge = requestJudge(gate, options.scopes);
  const decided = (
    c: Context<E & { Variables: BearerAuthVariables }, P, I>,
    next: Next,
    verdict: BearerVerdict,
  ) => {
    if (!verdict.ok) return challengePartsResponse(verdict.challenge);
    c.set("auth", verdict.auth);
    return handler(c, next);
  };
  return (c, next) => {
    // The context is the route's own; its `auth` variable is the one declared for `handler`.
    const context = c as unknown as Context<E & { Variables: BearerAuthVariables }, P, I>;
    const verdict = judge(c.req.raw);
    if (verdict instanceof Promise) return verdict.then((v) => decided(context, next, v));
    return decided(context, next, verdict);
  };
}

/** Context variables {@link operationAuth} sets: the token's facts and the gate's context. */
export type OperationAuthVariables = { auth: AuthInfo; mcp: OperationContext };

/**
 * Hono middleware for an MCP endpoint: the operation gate (resource-server/operations/gate.ts)
 * reads the JSON-RPC body once (bounded), judges the token and every message against the policy,
 * and answers the challenge or JSON-RPC error itself. On success `auth` and `mcp` (with the parsed
 * body: hand it on as the SDK's `parsedBody`) are set, and `c.req.raw` is a request carrying the
 * same bytes, so handlers that read the body still can; with the listing filter on, the answer to
 * a listing request is filtered on its way out.
 */
export function operationAuth(gate: OperationGate): MiddlewareHandler<{ Variables: OperationAuthVariables }> {
  return async (c, next) => {
    const started = performance.now();
    const raw = c.req.raw;
    const head = headOfRequest(raw);
    const body = raw.method === "POST" ? await readBoundedText(raw, gate.readLimit(head)) : undefined;
    const verdict = await gate.judge(head, body, started);
    if (!verdict.ok) return challengePartsResponse(verdict.answer);
    if (typeof body === "string") {
      c.req.raw = new Request(raw, { body, duplex: "half" } as RequestInit & { duplex: "half" });
    }
    c.set("auth", verdict.auth);
    c.set("mcp", verdict);
    await next();
    if (verdict.listings !== undefined) c.res = await gate.filterResponse(c.res, verdict);
  };
}
