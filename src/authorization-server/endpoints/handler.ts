/**
 * The router: one web-standard handler for every endpoint, relative to the issuer's path, with the
 * error-to-response mapping every endpoint shares.
 */
import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE, oauthErrorResponse } from "../../shared/http.js";
import { traceRequest } from "../../shared/telemetry.js";
import { authorizationServerMetadataUrls } from "../../shared/well-known.js";
import { StorageUnavailableError } from "../../storage/contract.js";
import type { Endpoint, FetchInfo, ServerContext } from "../core/context.js";
import { ENDPOINT_PATHS, UPSTREAM_TOKEN_PATH, upstreamCallbackPath } from "../core/paths.js";
import { requestPathname } from "../core/request-url.js";
import { handleAdmin } from "../pages/admin.js";
import { handleConsent } from "../pages/consent.js";
import { handleDevice } from "../pages/device.js";
import { handleLogin } from "../pages/login.js";
import { handleAccount, handleLogout } from "../pages/logout.js";
import { upstreamCallbackEndpoint, upstreamRedirectUri } from "../pages/upstream-sign-in.js";
import { handleAuthorize } from "./authorize.js";
import { preflightResponse, withCors } from "./cors.js";
import { deviceAuthorizationSettings, handleDeviceAuthorization } from "./device-authorization.js";
import { handleHealth } from "./health.js";
import { handleIntrospect } from "./introspect.js";
import { handleRegister } from "./register.js";
import { handleRevoke } from "./revoke.js";
import { handleToken } from "./token.js";
import { handleUpstreamToken } from "./upstream-token.js";

/** Seconds a client is asked to wait after a storage outage (RFC 9110 §10.2.3 `Retry-After`). */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

interface Route {
  /** The span and metric name of the route: its path relative to the issuer, never the request's. */
  name: string;
  methods: readonly string[];
  endpoint: Endpoint;
  /** Reachable from any web origin (no credentials). */
  cors: boolean;
}

/** The issuer's path without a trailing slash ("" for an issuer at the root). */
export function issuerPathPrefix(issuer: string): string {
  return new URL(issuer).pathname.replace(/\/$/, "");
}

/**
 * The three places one metadata document is served (spec "Authorization server metadata
 * discovery"): RFC 8414 §3.1 inserts the well-known segment before the issuer path, OpenID Connect
 * Discovery §4 appends it (and the 2025 MCP revision also inserts it).
 */
export function metadataPaths(issuer: string): string[] {
  return authorizationServerMetadataUrls(issuer).map(({ url }) => new URL(url).pathname);
}

function errorWithStatus(code: "invalid_request", status: number, description: string): OAuthError {
  return new OAuthError(code, { status, description });
}

/**
 * Turns whatever an endpoint throws into a response: `OAuthError` → its RFC 6749 §5.2 body,
 * `StorageUnavailableError` → 503 `temporarily_unavailable` with `Retry-After`, anything else → a
 * generic 500 `server_error` (the detail reaches the log, never the wire).
 */
export function errorToResponse(error: unknown, ctx: ServerContext, route: string): Response {
  if (error instanceof OAuthError) {
    if (error.status >= 500 || error.detail) {
      ctx.log.warn("oauth_error", { route, error: error.code, detail: error.detail });
    }
    // With the error's own headers: a matching challenge for a failed Basic authentication (RFC
    // 6749 §5.2), `Retry-After` for a rate limit (RFC 6585 §4).
    return oauthErrorResponse(error);
  }
  if (error instanceof StorageUnavailableError) {
    ctx.log.error("storage_unavailable", { route, reason: error.message });
    return oauthErrorResponse(
      new OAuthError("temporarily_unavailable", {
        description: "the authorization server cannot reach its storage; retry shortly",
      }),
      { "retry-after": String(STORAGE_RETRY_AFTER_SECONDS) },
    );
  }
  ctx.log.error("internal_error", {
    route,
    reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
  });
  return oauthErrorResponse(
    new OAuthError("server_error", { description: "the authorization server met an unexpected error" }),
  );
}

/**
 * The authorization server as one web-standard handler: routes by path relative to the issuer,
 * answers 404 for unknown paths, 405 (with `Allow`) for unsupported methods and CORS preflights for
 * the browser-callable endpoints.
 */
export function createHandler(
  ctx: ServerContext,
  metadata: Record<string, unknown>,
): (request: Request, info?: FetchInfo) => Promise<Response> {
  const metadataBody = JSON.stringify(metadata);
  const serveMetadata: Endpoint = async () =>
    new Response(metadataBody, {
      headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
    });
  const serveJwks: Endpoint = async (_request, c) =>
    jsonResponse(await c.keys.publicJwks(), { headers: { "cache-control": "public, max-age=60" } });

  const routes = new Map<string, Route>();
  for (const path of metadataPaths(ctx.options.issuer)) {
    routes.set(path, { name: path, methods: ["GET", "HEAD"], endpoint: serveMetadata, cors: true });
  }
  const base = issuerPathPrefix(ctx.options.issuer);
  const add = (name: keyof typeof ENDPOINT_PATHS, methods: string[], endpoint: Endpoint, cors: boolean) =>
    routes.set(`${base}${ENDPOINT_PATHS[name]}`, { name: ENDPOINT_PATHS[name], methods, endpoint, cors });
  add("jwks", ["GET", "HEAD"], serveJwks, true);
  add("token", ["POST"], handleToken, true);
  if (ctx.options.dynamicRegistration.enabled) add("register", ["POST"], handleRegister, true);
  add("revoke", ["POST"], handleRevoke, true);
  add("introspect", ["POST"], handleIntrospect, false);
  add("health", ["GET", "HEAD"], handleHealth, false);
  // The browser side (OAuth 2.1 §4.1.1 allows GET and POST at the authorization endpoint).
  add("authorize", ["GET", "POST"], handleAuthorize, false);
  add("login", ["GET", "POST"], handleLogin, false);
  add("consent", ["GET", "POST"], handleConsent, false);
  add("account", ["GET", "POST"], handleAccount, false);
  add("logout", ["GET", "POST"], handleLogout, false);
  add("admin", ["GET", "POST"], handleAdmin, false);
  if (deviceAuthorizationSettings(ctx.options)) {
    // RFC 8628: the device's request (no browser, so no CORS) and the user's verification page.
    add("deviceAuthorization", ["POST"], handleDeviceAuthorization, false);
    add("device", ["GET", "POST"], handleDevice, false);
  }
  // Sign-in through upstream identity providers: one callback (redirect URI) per provider.
  const upstream = ctx.options.upstreamSignIn;
  for (const provider of upstream?.providers ?? []) {
    const path = upstreamCallbackPath(provider.id);
    const endpoint = upstreamCallbackEndpoint(provider, upstream!);
    routes.set(`${base}${path}`, { name: path, methods: ["GET"], endpoint, cors: false });
    // The exact redirect URI to register at the provider, once at start-up.
    ctx.log.info("upstream_provider", {
      upstream_provider: provider.id,
      redirect_uri: upstreamRedirectUri(ctx, provider.id),
    });
  }
  if (upstream?.providers.some((p) => p.keepTokens !== undefined)) {
    const name = UPSTREAM_TOKEN_PATH;
    routes.set(`${base}${name}`, { name, methods: ["POST"], endpoint: handleUpstreamToken, cors: false });
  }

  return async function handle(request: Request, info: FetchInfo = {}): Promise<Response> {
    let pathname: string;
    try {
      pathname = requestPathname(request);
    } catch {
      return oauthErrorResponse(errorWithStatus("invalid_request", 400, "request URL is invalid"));
    }
    const route = routes.get(pathname);
    if (!route) {
      return jsonResponse(
        { error: "not_found", error_description: "no such endpoint" },
        { status: 404, headers: { ...NO_STORE, "x-content-type-options": "nosniff" } },
      );
    }
    const method = request.method.toUpperCase();
    if (method === "OPTIONS" && route.cors) return preflightResponse(route.methods);
    if (!route.methods.includes(method)) {
      const response = oauthErrorResponse(errorWithStatus("invalid_request", 405, "method not allowed"), {
        allow: [...route.methods, ...(route.cors ? ["OPTIONS"] : [])].join(", "),
      });
      return route.cors ? withCors(response) : response;
    }
    return traceRequest(route.name, method, async (finish) => {
      let response: Response;
      let oauthError: string | undefined;
      try {
        response = await route.endpoint(request, ctx, info);
      } catch (error) {
        response = errorToResponse(error, ctx, pathname);
        oauthError = oauthErrorCode(error);
      }
      finish(response.status, oauthError);
      return finishResponse(response, method, route.cors);
    });
  };
}

/** The OAuth error code a thrown error is answered with (errorToResponse), for telemetry. */
function oauthErrorCode(error: unknown): string {
  if (error instanceof OAuthError) return error.code;
  return error instanceof StorageUnavailableError ? "temporarily_unavailable" : "server_error";
}

/** The headers every response gets, the body dropped for HEAD, and CORS where the route allows it. */
function finishResponse(response: Response, method: string, cors: boolean): Response {
  if (!response.headers.has("x-content-type-options")) {
    try {
      response.headers.set("x-content-type-options", "nosniff");
    } catch {
      // Immutable headers (a Response from fetch): leave as is.
    }
  }
  if (method === "HEAD") {
    response = new Response(null, { status: response.status, headers: response.headers });
  }
  return cors ? withCors(response) : response;
}
