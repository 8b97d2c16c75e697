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
import type { AuthInfo, BearerVerdict, RequiredScopes, ResourceServer } from "../resource-server/index.js";
import { webRequestHead } from "./node-listener.js";
import { NodeRequestHead, originResolver, writeChallenge } from "./node-require-bearer.js";

declare module "express-serve-static-core" {
  interface Request {
    /** Set by {@link requireBearerAuth}: the verified token's facts (never the raw token). */
    auth?: AuthInfo;
  }
}

/** A form body already parsed by `express.urlencoded()`, re-encoded so the gate can refuse a token in it. */
function parsedForm(req: ExpressRequest): string | undefined {
  const body: unknown = req.body;
  if (!req.is("application/x-www-form-urlencoded") || typeof body !== "object" || body === null)
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
