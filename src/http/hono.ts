/**
 * Hono adapter: the resource server's judgement (`ResourceServer.judge`) on Hono's web `Request`,
 * `c.get("auth")` set on success. Translation only, in two forms: {@link bearerAuth}, a middleware,
 * and {@link withBearerAuth}, which wraps one route handler (a route with a single handler skips
 * Hono's middleware chain, so the protected route costs what the unprotected one does plus the
 * judgement).
 *
 * On @hono/node-server, whose `Request` is lazy (its header list is built on first use), the
 * header fields of a request whose header list nothing has built yet are read from the node
 * request it holds ({@link headOf}); everything else (the URL, the method, a form body) still
 * comes from the web `Request`, so the judgement is the same.
 */
import { IncomingMessage } from "node:http";
import { types } from "node:util";
import type { Context, Env, Handler, Input, MiddlewareHandler, Next } from "hono";
import type { BlankInput } from "hono/types";
import { authorityOf, type BearerRequestHead, headOfRequest } from "../resource-server/bearer-token.js";
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
import { NodeRequestHead } from "./node-require-bearer.js";

/**
 * A request of @hono/node-server judged from its node request's header fields. The URL (so the
 * authority the host allow-list checks and DPoP's `htu`, RFC 9449 §4.3) and the method are the web
 * `Request`'s, as node-server built them (from an absolute-form target, Host, or its default
 * hostname; https on a TLS socket; no X-Forwarded-*). A form body is read through the web
 * `Request` (node-server owns the stream), so the handler still reads it in full.
 */
class NodeServerRequestHead extends NodeRequestHead {
  constructor(
    incoming: IncomingMessage,
    private readonly request: Request,
  ) {
    const url = request.url;
    // The node head's own body reading is never used: the form is read below.
    super(incoming, url, 0);
    this.host = authorityOf(url);
  }
  override get method(): string {
    return this.request.method;
  }
  override get hasBody(): boolean {
    return this.request.body !== null;
  }
  override bodyText(): Promise<string> {
    return this.request.clone().text();
  }
}

/** Where @hono/node-server's lazy `Request` keeps its node request and its built header list. */
interface LazyRequestSlots {
  incoming: symbol;
  headers: symbol;
}

/** The lazy requests' prototype found last and its slots (one per loaded @hono/node-server). */
let lazyPrototype: object | undefined;
let lazySlots: LazyRequestSlots | undefined;
/** Prototypes of requests found not to be lazy node-server requests. */
const otherPrototypes = new WeakSet<object>();

/**
 * The slots of a lazy request, found on the first request of its prototype by what they hold:
 * exactly one own symbol slot holding a node request (its `rawHeaders`), and exactly one that holds
 * the header list the `headers` getter returns (reading it builds it, as the web head would). Any
 * other shape (another host, another node-server version) finds none: the web head then.
 */
function findSlots(request: Request): LazyRequestSlots | undefined {
  const slots = request as unknown as Record<symbol, unknown>;
  const holding = (matches: (value: unknown) => boolean) =>
    Object.getOwnPropertySymbols(request).filter((key) => matches(slots[key]));
  const incoming = holding(
    (value) =>
      typeof value === "object" && value !== null && Array.isArray((value as IncomingMessage).rawHeaders),
  );
  const headers = request.headers;
  const headerList = holding((value) => value === headers);
  if (incoming.length !== 1 || headerList.length !== 1) return undefined;
  return { incoming: incoming[0]!, headers: headerList[0]! };
}

function slotsOf(request: Request): LazyRequestSlots | undefined {
  const prototype: object | null = Object.getPrototypeOf(request);
  if (prototype === lazyPrototype) return lazySlots;
  if (prototype === null || otherPrototypes.has(prototype)) return undefined;
  const slots = findSlots(request);
  if (slots === undefined) otherPrototypes.add(prototype);
  else {
    lazyPrototype = prototype;
    lazySlots = slots;
  }
  return slots;
}

/**
 * The head the gate judges. A lazy @hono/node-server request over HTTP/1 whose header list nothing
 * has built yet has the header fields its node request was parsed with, so they are read from there
 * (node joins nothing in `rawHeaders`: two `Authorization` fields stay malformed, and its parser
 * trims values as `Headers` does). Once anything read `c.req.raw.headers` (a middleware may have
 * edited them) or put other headers in front of the getter, for a request Hono was handed in its
 * place, over HTTP/2 (not node's HTTP/1 parser, so not pinned here) and on any other host, the web
 * `Request` is judged.
 */
function headOf(request: Request): BearerRequestHead {
  // `headers` must be the prototype's getter: not an own property a middleware defined on this
  // request, nor a proxy's (Hono lets a middleware replace `c.req.raw` with one).
  if (Object.hasOwn(request, "headers") || types.isProxy(request)) return headOfRequest(request);
  const slots = slotsOf(request);
  if (slots !== undefined) {
    const held = request as unknown as Record<symbol, unknown>;
    const incoming = held[slots.incoming];
    if (held[slots.headers] === undefined && incoming instanceof IncomingMessage) {
      return new NodeServerRequestHead(incoming, request);
    }
  }
  return headOfRequest(request);
}

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
  if (typeof scopes !== "function") return (request) => judge(headOf(request));
  return (request) => judge(headOf(request), () => request);
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
