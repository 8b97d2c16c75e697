/**
 * Hono adapter: `c.get("auth")` set from the resource-server gate. Translation only.
 */
import type { MiddlewareHandler } from "hono";
import type { AuthInfo, RequiredScopes, ResourceServer } from "../resource-server/index.js";

/** Context variables the middleware sets. */
export type BearerAuthVariables = { auth: AuthInfo };

const PASSED = new Response(null, { status: 299 });

/** Hono middleware: answers the RFC 6750 challenge itself, or sets `auth` and continues. */
export function bearerAuth(
  gate: ResourceServer,
  options: { scopes?: RequiredScopes } = {},
): MiddlewareHandler<{ Variables: BearerAuthVariables }> {
  const middleware = gate.requireBearer(options);
  return async (c, next) => {
    const response = await middleware(c.req.raw, async (_request, auth) => {
      c.set("auth", auth);
      await next();
      return PASSED;
    });
    if (response !== PASSED) return response;
  };
}
