/**
 * Express adapter (4 and 5): `req.auth` set from the resource-server gate. Translation only.
 */
import type {
  Request as ExpressRequest,
  Response as ExpressResponse,
  NextFunction,
  RequestHandler,
} from "express";
import type { AuthInfo, RequiredScopes, ResourceServer } from "../resource-server/index.js";
import { sendWebResponse, webRequestHead } from "./node.js";

declare module "express-serve-static-core" {
  interface Request {
    /** Set by {@link requireBearerAuth}: the verified token's facts (never the raw token). */
    auth?: AuthInfo;
  }
}

const PASSED = new Response(null, { status: 299 });

/** A form body already parsed by `express.urlencoded()`, re-encoded so the gate can refuse a token in it. */
function parsedForm(req: ExpressRequest): string | undefined {
  const body: unknown = req.body;
  if (!req.is("application/x-www-form-urlencoded") || typeof body !== "object" || body === null)
    return undefined;
  return new URLSearchParams(Object.entries(body).map(([k, v]) => [k, String(v)])).toString();
}

/** Express middleware: answers the RFC 6750 challenge itself, or sets `req.auth` and calls `next()`. */
export function requireBearerAuth(
  gate: ResourceServer,
  options: { scopes?: RequiredScopes } = {},
): RequestHandler {
  const middleware = gate.requireBearer(options);
  return (req: ExpressRequest, res: ExpressResponse, next: NextFunction) => {
    const trustProxy = Boolean(req.app.get("trust proxy"));
    const request = webRequestHead(req, { trustProxy, url: req.originalUrl, body: parsedForm(req) });
    if (!request) return void res.status(400).end();
    middleware(request, async (_request, auth) => {
      req.auth = auth;
      return PASSED;
    }).then(
      (response) => (response === PASSED ? next() : sendWebResponse(res, response, req.method === "HEAD")),
      next,
    );
  };
}
