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
import type { BearerRequestHead } from "../resource-server/bearer-token.js";
import type { AuthInfo, BearerVerdict, RequiredScopes, ResourceServer } from "../resource-server/index.js";
import { requestOrigin, webRequestHead } from "./node-listener.js";
import { rawHeader, writeChallenge } from "./node-require-bearer.js";

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
 * The head the gate judges: the URL as a web `Request` would have it (so the Host checked is the
 * WHATWG-serialised authority), the raw header fields, and only a parsed form as the body (the
 * stream belongs to Express). `undefined` when `Host` is missing or the URL does not parse.
 */
function expressRequestHead(req: ExpressRequest, trustProxy: boolean, form: string | undefined) {
  const origin = requestOrigin(req, trustProxy);
  if (origin === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(origin + req.originalUrl);
  } catch {
    return undefined;
  }
  const head: BearerRequestHead = {
    url: url.href,
    host: url.host,
    method: req.method,
    header: (name) => rawHeader(req, name),
    hasBody: form !== undefined && req.method !== "GET" && req.method !== "HEAD",
    bodyText: async () => form ?? "",
  };
  return head;
}

/** Express middleware: answers the RFC 6750 challenge itself, or sets `req.auth` and calls `next()`. */
export function requireBearerAuth(
  gate: Pick<ResourceServer, "judge">,
  options: { scopes?: RequiredScopes } = {},
): RequestHandler {
  const judge = gate.judge(options);
  return (req: ExpressRequest, res: ExpressResponse, next: NextFunction) => {
    // Express's own setting: a hop count as such, anything else truthy as one trusted proxy.
    const setting: unknown = req.app.get("trust proxy");
    const trustProxy =
      Number.isInteger(setting) && (setting as number) >= 0 ? (setting as number) : Boolean(setting);
    const form = parsedForm(req);
    const head = expressRequestHead(req, trustProxy !== false && trustProxy !== 0, form);
    if (!head) return void res.status(400).end();
    const decide = (verdict: BearerVerdict) => {
      if (!verdict.ok) return writeChallenge(res, verdict.challenge, req.method === "HEAD");
      req.auth = verdict.auth;
      next();
    };
    const verdict = judge(head, () => webRequestHead(req, { trustProxy, url: req.originalUrl, body: form }));
    if (verdict instanceof Promise) verdict.then(decide).catch(next);
    else decide(verdict);
  };
}
