/**
 * Express adapter (4 and 5): the resource server's judgement (`ResourceServer.judge`) on the
 * request head, `req.auth` set on success. Translation only; no web `Request` is built (except
 * for a scopes function, which takes one).
 */
import type {
  Request as ExpressRequest,
  Response as ExpressResponse,
  NextFunction,
  RequestHandler,
} from "express";
import {
  type AuthInfo,
  type BearerVerdict,
  BODY_TOO_LARGE,
  type OperationContext,
  type OperationGate,
  type ReadBody,
  type RequiredScopes,
  type ResourceServer,
} from "../resource-server/index.js";
import { webRequestHead } from "./node-listener.js";
import { NodeRequestHead, originResolver, writeChallenge } from "./node-require-bearer.js";
import { filterNodeResponse, readNodeBody } from "./node-require-operation.js";

declare module "express-serve-static-core" {
  interface Request {
    /** Set by {@link requireBearerAuth}: the verified token's facts (never the raw token). */
    auth?: AuthInfo;
    /** Set by {@link requireOperationAuth}: the gate's context (token facts, parsed body, messages). */
    mcp?: OperationContext;
  }
}

/** A form body already parsed by `express.urlencoded()`, re-encoded so the gate can refuse a token in it. */
function parsedForm(req: ExpressRequest): string | undefined {
  const body: unknown = req.body;
  // The parsed object first: a request no body parser filled (a GET, most often) is settled
  // without `req.is` (type-is): Express gives each request object a shape of its own, so every
  // property read on it is a slow lookup (about 8k instructions a request saved, callgrind).
  if (typeof body !== "object" || body === null || !req.is("application/x-www-form-urlencoded"))
    return undefined;
  return new URLSearchParams(Object.entries(body).map(([k, v]) => [k, String(v)])).toString();
}

/**
 * The head the gate judges: the node head (the request target, the raw header fields, the
 * authority resolved by the node path's rules, node-require-bearer.ts), with only a form Express
 * has parsed as the body (the stream belongs to Express).
 */
class ExpressRequestHead extends NodeRequestHead {
  constructor(
    req: ExpressRequest,
    private readonly form: string | undefined,
  ) {
    // The body limit is the parser's (express.urlencoded); this head never reads the stream.
    super(req, req.originalUrl, 0);
  }
  override get hasBody(): boolean {
    // RFC 6750 §2.2: the form method never applies to GET (nor to HEAD, which has no content).
    return this.form !== undefined && this.method !== "GET" && this.method !== "HEAD";
  }
  override async bodyText(): Promise<string> {
    return this.form ?? "";
  }
}

/** Express middleware: answers the RFC 6750 challenge itself, or sets `req.auth` and calls `next()`. */
export function requireBearerAuth(
  gate: Pick<ResourceServer, "judge">,
  options: { scopes?: RequiredScopes } = {},
): RequestHandler {
  const judge = gate.judge(options);
  const resolveOrigin = originResolver();
  const byRequest = typeof options.scopes === "function";
  return (req: ExpressRequest, res: ExpressResponse, next: NextFunction) => {
    // Express's own setting: a hop count as such, anything else truthy as one trusted proxy.
    const setting: unknown = req.app.get("trust proxy");
    const trustProxy =
      Number.isInteger(setting) && (setting as number) >= 0 ? (setting as number) : Boolean(setting);
    const form = parsedForm(req);
    const head = new ExpressRequestHead(req, form);
    if (!resolveOrigin(req, head, trustProxy !== false && trustProxy !== 0)) {
      return void res.status(400).end();
    }
    const decide = (verdict: BearerVerdict) => {
      if (!verdict.ok) return writeChallenge(res, verdict.challenge, req.method === "HEAD");
      req.auth = verdict.auth;
      next();
    };
    const toRequest = byRequest
      ? () => webRequestHead(req, { trustProxy, url: req.originalUrl, body: form })
      : undefined;
    const verdict = judge(head, toRequest);
    if (verdict instanceof Promise) verdict.then(decide).catch(next);
    else decide(verdict);
  };
}

/** Express's own `trust proxy` setting: a hop count as such, anything else truthy as one proxy. */
function trustsProxy(req: ExpressRequest): boolean {
  const setting: unknown = req.app.get("trust proxy");
  const hops = Number.isInteger(setting) && (setting as number) >= 0 ? (setting as number) : Boolean(setting);
  return hops !== false && hops !== 0;
}

/**
 * Express middleware for an MCP endpoint: the operation gate (resource-server/operations/gate.ts)
 * judges the token and every JSON-RPC message of the body against the policy. The body is the one
 * a body parser already read (`express.json()`: its value is judged as parsed), or else read here
 * once, bounded by the gate's cap, its bytes put back. On success `req.auth` is the token's facts,
 * `req.body` the parsed JSON-RPC body (hand it to the SDK's `handleRequest(req, res, req.body)`)
 * and `req.mcp` the gate's context; with the listing filter on, the answer to a listing request is
 * filtered on its way out.
 */
export function requireOperationAuth(gate: OperationGate): RequestHandler {
  const resolveOrigin = originResolver();
  const judge = async (req: ExpressRequest, res: ExpressResponse, next: NextFunction) => {
    const started = performance.now();
    const form = parsedForm(req);
    const head = new ExpressRequestHead(req, form);
    if (!resolveOrigin(req, head, trustsProxy(req))) return void res.status(400).end();
    const parsed: unknown = req.body;
    let body: ReadBody;
    if (req.method !== "POST") body = undefined;
    // A parser ran first: its limit bounded the read; a declared length over the gate's cap is
    // still refused, as the gate would have refused reading it.
    else if (parsed !== undefined && Number(req.get("content-length")) > gate.maxBodyBytes)
      body = BODY_TOO_LARGE;
    else if (parsed === undefined) body = await readNodeBody(req, gate.readLimit(head));
    else if (typeof parsed === "string") body = parsed;
    else if (Buffer.isBuffer(parsed)) body = parsed.toString("utf8");
    // A form is not JSON-RPC: judged as a value, it is an invalid request (after the token check,
    // which refuses a form carrying an access_token, RFC 6750 §2.2).
    else body = { parsed };
    const verdict = await gate.judge(head, body, started);
    if (!verdict.ok) return writeChallenge(res, verdict.answer, req.method === "HEAD");
    req.auth = verdict.auth;
    req.mcp = verdict;
    if (verdict.body !== undefined) req.body = verdict.body;
    if (verdict.listings !== undefined) filterNodeResponse(res, gate, verdict);
    next();
  };
  return (req, res, next) => {
    judge(req, res, next).catch(next);
  };
}
