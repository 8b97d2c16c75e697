/**
 * A configurable protected resource and authorization server on loopback, correct by default, that
 * each test breaks in exactly one way. Both servers log every request they receive (with whether it
 * carried a credential), so tests can assert where the auditor sent what.
 */
import { type ListeningServer, listen } from "../../src/http/node.js";
import { buildChallenge } from "../../src/shared/www-authenticate.js";

export interface ReceivedRequest {
  server: "resource" | "as";
  method: string;
  url: string;
  authorization: string | null;
  queryToken: boolean;
}

export interface FixtureOptions {
  /** Path of the protected endpoint (default `/mcp`; `""` puts the resource at the origin). */
  resourcePath?: string;
  /** Where the PRM is served (default: all three). */
  prmAt?: Array<"challenge" | "path" | "root">;
  /** Content type of the PRM responses (default application/json). */
  prmContentType?: string;
  /** Edits the PRM document before it is served. */
  prm?: (doc: Record<string, unknown>, ctx: { resource: string; issuer: string }) => Record<string, unknown>;
  /** Replaces the WWW-Authenticate value of the anonymous 401 (`null`: no header). */
  challenge?: (ctx: { prmUrl: string }) => string | null;
  /** Status for a request without a token (default 401). */
  anonymousStatus?: number;
  /** Status for a request with any bearer token (default 401 invalid_token). */
  bearerStatus?: number;
  /** Answer GET on the protected path with 405 (a Streamable HTTP MCP server serving POST only). */
  postOnly?: boolean;
  /** Serve 200 when `access_token` is in the query string. */
  acceptQueryToken?: boolean;
  /** Path component of the issuer (default none). */
  issuerPath?: string;
  /** Which AS discovery forms are served (default: every form that applies). */
  asForms?: Array<"rfc8414" | "oidc-inserted" | "oidc-appended">;
  /** Edits the AS metadata before it is served. */
  asMetadata?: (
    doc: Record<string, unknown>,
    ctx: { issuer: string; form: "rfc8414" | "oidc-inserted" | "oidc-appended" },
  ) => Record<string, unknown>;
  /**
   * Answers GET on the authorization endpoint (default: a 400 page for the unknown client, as OAuth
   * 2.1 §4.1.2.1 wants, whatever the other parameters).
   */
  authorize?: (params: URLSearchParams) => Response;
  /** Answers POST on the registration endpoint and other methods on `/register/…` (default 404). */
  register?: (request: Request) => Response | Promise<Response>;
}

export interface Fixture {
  /** The URL to audit. */
  resourceUrl: string;
  issuer: string;
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export function page(body: string, status: number): Response {
  return new Response(`<!doctype html><title>Sign in</title>${body}`, {
    status,
    headers: { "content-type": "text/html; charset=utf-8" },
  });
}

export async function startFixture(options: FixtureOptions = {}): Promise<Fixture> {
  const requests: ReceivedRequest[] = [];
  const log = (server: ReceivedRequest["server"], request: Request) => {
    const url = new URL(request.url);
    requests.push({
      server,
      method: request.method,
      url: request.url,
      authorization: request.headers.get("authorization"),
      queryToken: url.searchParams.has("access_token"),
    });
  };

  let asHandler: (r: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  let rsHandler: (r: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const asServer: ListeningServer = await listen((r) => asHandler(r));
  const rsServer: ListeningServer = await listen((r) => rsHandler(r));

  const issuerPath = options.issuerPath ?? "";
  const issuer = `${asServer.url}${issuerPath}`;
  const resourcePath = options.resourcePath ?? "/mcp";
  const resource = `${rsServer.url}${resourcePath}`;
  const prmAt = options.prmAt ?? ["challenge", "path", "root"];

  // AS metadata at the forms the spec lists.
  const metadata: Record<string, unknown> = {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    registration_endpoint: `${issuer}/register`,
    jwks_uri: `${issuer}/jwks.json`,
    response_types_supported: ["code"],
    grant_types_supported: ["authorization_code", "refresh_token"],
    code_challenge_methods_supported: ["S256"],
    authorization_response_iss_parameter_supported: true,
    client_id_metadata_document_supported: true,
    scopes_supported: ["mcp:read", "offline_access"],
  };
  type Form = "rfc8414" | "oidc-inserted" | "oidc-appended";
  const formPaths: Partial<Record<Form, string>> = issuerPath
    ? {
        rfc8414: `/.well-known/oauth-authorization-server${issuerPath}`,
        "oidc-inserted": `/.well-known/openid-configuration${issuerPath}`,
        "oidc-appended": `${issuerPath}/.well-known/openid-configuration`,
      }
    : {
        rfc8414: "/.well-known/oauth-authorization-server",
        "oidc-inserted": "/.well-known/openid-configuration",
      };
  const asForms = options.asForms ?? (Object.keys(formPaths) as Form[]);
  const asPaths = new Map(
    asForms.filter((f) => formPaths[f] !== undefined).map((f) => [formPaths[f]!, f] as const),
  );
  asHandler = async (request) => {
    log("as", request);
    const { pathname } = new URL(request.url);
    const form = asPaths.get(pathname);
    if (request.method === "GET" && form) {
      return json(options.asMetadata ? options.asMetadata({ ...metadata }, { issuer, form }) : metadata);
    }
    if (request.method === "GET" && pathname === `${issuerPath}/authorize`) {
      const params = new URL(request.url).searchParams;
      return options.authorize ? options.authorize(params) : page("<h1>Unknown application</h1>", 400);
    }
    if (options.register && pathname.startsWith(`${issuerPath}/register`)) return options.register(request);
    return json({ error: "not found" }, 404);
  };

  // The resource.
  const prmDoc = {
    resource,
    authorization_servers: [issuer],
    scopes_supported: ["mcp:read"],
    bearer_methods_supported: ["header"],
  };
  const prm = options.prm ? options.prm({ ...prmDoc }, { resource, issuer }) : prmDoc;
  const challengePrmUrl = `${rsServer.url}/meta/prm.json`;
  const pathPrmUrl = `/.well-known/oauth-protected-resource${resourcePath}`;
  const rootPrmUrl = "/.well-known/oauth-protected-resource";
  const prmPaths = new Set<string>();
  if (prmAt.includes("challenge")) prmPaths.add("/meta/prm.json");
  if (prmAt.includes("path") && resourcePath) prmPaths.add(pathPrmUrl);
  if (prmAt.includes("root")) prmPaths.add(rootPrmUrl);
  const challenge =
    options.challenge?.({ prmUrl: challengePrmUrl }) ??
    (options.challenge
      ? null
      : buildChallenge("Bearer", {
          resource_metadata: prmAt.includes("challenge") ? challengePrmUrl : undefined,
          scope: "mcp:read",
        }));

  rsHandler = async (request) => {
    log("resource", request);
    const url = new URL(request.url);
    if (prmPaths.has(url.pathname)) {
      return new Response(JSON.stringify(prm), {
        headers: { "content-type": options.prmContentType ?? "application/json; charset=utf-8" },
      });
    }
    if (url.pathname !== (resourcePath || "/")) return json({ error: "not found" }, 404);
    if (options.postOnly && request.method !== "POST") {
      return new Response(null, { status: 405, headers: { allow: "POST" } });
    }
    if (url.searchParams.has("access_token") && options.acceptQueryToken) return json({ data: "secret" });
    const authorization = request.headers.get("authorization");
    if (authorization) {
      const status = options.bearerStatus ?? 401;
      if (status !== 401) return json({ data: "secret" }, status);
      return new Response(null, {
        status: 401,
        headers: {
          "www-authenticate": buildChallenge("Bearer", {
            error: "invalid_token",
            resource_metadata: prmAt.includes("challenge") ? challengePrmUrl : undefined,
          }),
        },
      });
    }
    const status = options.anonymousStatus ?? 401;
    if (status !== 401) return json({ data: "secret" }, status);
    const headers = new Headers();
    if (challenge !== null) headers.set("www-authenticate", challenge);
    return new Response(null, { status: 401, headers });
  };

  return {
    resourceUrl: resource,
    issuer,
    requests,
    async close() {
      await rsServer.close();
      await asServer.close();
    },
  };
}
