/**
 * Hono adapter: the resource server's judgement (`ResourceServer.judge`) on Hono's web `Request`,
 * `c.get("auth")` set on success. Translation only.
 */
import type { MiddlewareHandler } from "hono";
import { headOfRequest } from "../resource-server/bearer-token.js";
import { challengePartsResponse } from "../resource-server/challenge.js";
import type { AuthInfo, RequiredScopes, ResourceServer } from "../resource-server/index.js";

/** Context variables the middleware sets. */
export type BearerAuthVariables = { auth: AuthInfo };

/** Hono middleware: answers the RFC 6750 challenge itself, or sets `auth` and continues. */
export function bearerAuth(
  gate: Pick<ResourceServer, "judge">,
  options: { scopes?: RequiredScopes } = {},
): MiddlewareHandler<{ Variables: BearerAuthVariables }> {
  const judge = gate.judge(options);
  return async (c, next) => {
    const request = c.req.raw;
    const verdict = await judge(headOfRequest(request), () => request);
    if (!verdict.ok) return challengePartsResponse(verdict.challenge);
    c.set("auth", verdict.auth);
    await next();
  };
}
