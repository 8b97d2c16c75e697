/**
 * The composition root of a running authorization server, kept off its public face (issue 23
 * item 9): `createAuthorizationServer` files each server's ServerContext here, and code inside
 * the package (and the tests, by path) reach it through `contextOf`. No entry exports this
 * module, so a user of `gatehouse-auth/authorization-server` cannot reach the store, the signing
 * keys or the resolved options past the endpoints.
 */
import type { ServerContext } from "./core/context.js";

const contexts = new WeakMap<object, ServerContext>();

/** Files `context` as the context of `server` (once, at creation). */
export function attachContext(server: object, context: ServerContext): void {
  contexts.set(server, context);
}

/** The context of a server `createAuthorizationServer` made; throws for any other object. */
export function contextOf(server: object): ServerContext {
  const context = contexts.get(server);
  if (!context) throw new TypeError("not an authorization server made by createAuthorizationServer");
  return context;
}
