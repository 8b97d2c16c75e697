/**
 * Upstream identity providers for the upstream sign-in tests, each a real HTTPS server on loopback
 * (the throw-away CA of test/support/tls.ts, trusted only through `dangerouslyAllowLoopbackForTesting`):
 *
 * - {@link startScriptedOidc}: a small OpenID Connect provider whose ID token claims a test
 *   decides (another issuer, audience, nonce, algorithm, a Microsoft Entra `{tenantid}` issuer), and
 *   which approves every authorization request at once (no user interface);
 * - {@link startGithubLike}: a plain OAuth 2 provider in GitHub's dialect (form-encoded token
 *   responses unless `Accept: application/json`, errors as 200, `/user`, `/user/emails`,
 *   `/user/orgs`), with an authorization page whose buttons a user presses;
 * - {@link startGatehouse}: the authorization server in front of them, on plain-http loopback.
 *
 * Each provider records every request it received, so tests can check what Gatehouse sent.
 */
import { createHash, randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import Provider from "oidc-provider";
import type { UpstreamProviderOptions } from "../../../src/authorization-server/core/upstream-options.js";
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { silentLogger } from "../../../src/shared/log.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";
import { hiddenFields } from "../pages/harness.js";

export const RESOURCE = "https://notes.example/mcp";

/** One request a provider received: method, path, query or form parameters, and some headers. */
export interface RecordedRequest {
  method: string;
  path: string;
  params: URLSearchParams;
  accept: string | undefined;
  authorization: string | undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function record(req: IncomingMessage, base: string, into: RecordedRequest[]): Promise<RecordedRequest> {
  const url = new URL(req.url ?? "/", base);
  const params = req.method === "POST" ? new URLSearchParams(await readBody(req)) : url.searchParams;
  const entry = {
    method: req.method ?? "GET",
    path: url.pathname,
    params,
    accept: req.headers.accept,
    authorization: req.headers.authorization,
  };
  into.push(entry);
  return entry;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res
    .writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
    .end(JSON.stringify(body));
}

function s256(verifier: string): string {
  return createHash("sha256").update(verifier).digest("base64url");
}

export const UPSTREAM_CLIENT_ID = "gatehouse-at-upstream";
export const UPSTREAM_CLIENT_SECRET = "upstream-secret-0123456789";

// ---------------------------------------------------------------------------------------------
// A scripted OpenID Connect provider
// ---------------------------------------------------------------------------------------------

export interface ScriptedOidc {
  issuer: string;
  requests: RecordedRequest[];
  /** The claims of the next ID tokens: from the defaults (and the nonce the request carried). */
  claims: (defaults: JWTPayload) => JWTPayload;
  /** Instead of approving, answer the authorization request with these parameters (plus state). */
  authorizeAnswer: Record<string, string> | undefined;
  /** Parameters added to every authorization response (an RFC 9207 `iss`, say). */
  authorizeExtra: Record<string, string>;
  /** How ID tokens are signed: the provider's ES256 key, HS256 with the client secret, or none. */
  signing: "es256" | "hs256-client-secret" | "none";
  /** Every access token and ID token it issued, so tests can look for them where they must not be. */
  issued: string[];
  close(): Promise<void>;
}

export interface ScriptedOidcOptions {
  /** The issuer the metadata names: this server's URL (default), or a Microsoft Entra style template. */
  metadataIssuer?: (base: string) => string;
}

export async function startScriptedOidc(options: ScriptedOidcOptions = {}): Promise<ScriptedOidc> {
  const key = await generateKeyPair("ES256", { extractable: true });
  const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const pending = new Map<string, { nonce: string; challenge: string; redirectUri: string }>();
  let server: TestHttpsServer | undefined;
  const fixture: ScriptedOidc = {
    issuer: "",
    requests: [],
    claims: (c) => c,
    authorizeAnswer: undefined,
    authorizeExtra: {},
    signing: "es256",
    issued: [],
    close: async () => server?.close(),
  };
  server = await startTestHttpsServer(async (req, res) => {
    const base = fixture.issuer;
    const seen = await record(req, base, fixture.requests);
    if (seen.path.endsWith("/.well-known/openid-configuration")) {
      return json(res, 200, {
        issuer: options.metadataIssuer ? options.metadataIssuer(base) : base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        jwks_uri: `${base}/jwks`,
        response_types_supported: ["code"],
        id_token_signing_alg_values_supported: ["ES256"],
      });
    }
    if (seen.path === "/jwks") return json(res, 200, { keys: [jwk] });
    if (seen.path === "/authorize") {
      const p = seen.params;
      const target = new URL(p.get("redirect_uri") ?? "");
      if (fixture.authorizeAnswer) {
        for (const [k, v] of Object.entries(fixture.authorizeAnswer)) target.searchParams.set(k, v);
      } else {
        const code = randomBytes(16).toString("base64url");
        pending.set(code, {
          nonce: p.get("nonce") ?? "",
          challenge: p.get("code_challenge") ?? "",
          redirectUri: p.get("redirect_uri") ?? "",
        });
        target.searchParams.set("code", code);
      }
      if (!target.searchParams.has("state")) target.searchParams.set("state", p.get("state") ?? "");
      for (const [k, v] of Object.entries(fixture.authorizeExtra)) target.searchParams.set(k, v);
      res.writeHead(302, { location: target.href }).end();
      return;
    }
    if (seen.path === "/token") {
      const expected = `Basic ${Buffer.from(`${UPSTREAM_CLIENT_ID}:${UPSTREAM_CLIENT_SECRET}`).toString("base64")}`;
      if (seen.authorization !== expected) return json(res, 401, { error: "invalid_client" });
      const grant = pending.get(seen.params.get("code") ?? "");
      pending.delete(seen.params.get("code") ?? "");
      if (
        !grant ||
        s256(seen.params.get("code_verifier") ?? "") !== grant.challenge ||
        seen.params.get("redirect_uri") !== grant.redirectUri
      ) {
        return json(res, 400, { error: "invalid_grant" });
      }
      const now = Math.floor(Date.now() / 1000);
      const claims = fixture.claims({
        iss: base,
        aud: UPSTREAM_CLIENT_ID,
        sub: "upstream-user-1",
        iat: now,
        exp: now + 300,
        nonce: grant.nonce,
        email: "ada@example.com",
        email_verified: true,
        name: "Ada",
      });
      let idToken: string;
      if (fixture.signing === "none") {
        const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
        idToken = `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
      } else if (fixture.signing === "hs256-client-secret") {
        idToken = await new SignJWT(claims)
          .setProtectedHeader({ alg: "HS256" })
          .sign(new TextEncoder().encode(UPSTREAM_CLIENT_SECRET));
      } else {
        idToken = await new SignJWT(claims)
          .setProtectedHeader({ alg: "ES256", kid: "k1" })
          .sign(key.privateKey);
      }
      const accessToken = randomBytes(16).toString("hex");
      fixture.issued.push(accessToken, idToken);
      return json(res, 200, { access_token: accessToken, token_type: "Bearer", id_token: idToken });
    }
    res.writeHead(404).end();
  });
  fixture.issuer = server.origin;
  return fixture;
}

// ---------------------------------------------------------------------------------------------
// A GitHub-style OAuth 2 provider
// ---------------------------------------------------------------------------------------------

export interface GithubUser {
  id: number;
  login: string;
  name?: string;
  /** GitHub's public profile e-mail (never counted as verified). */
  email?: string;
  emails: { email: string; primary: boolean; verified: boolean }[];
  orgs: string[];
}

export interface GithubLike {
  url: string;
  requests: RecordedRequest[];
  users: Map<string, GithubUser>;
  /** GitHub sends tokens form-encoded unless asked for JSON; with this set it always does. */
  alwaysFormEncoded: boolean;
  /** Options for Gatehouse's `github` preset pointing at this server. */
  providerOptions(extra?: Partial<UpstreamProviderOptions>): UpstreamProviderOptions;
  close(): Promise<void>;
}

function escapeText(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export async function startGithubLike(): Promise<GithubLike> {
  const codes = new Map<string, { login: string; challenge: string; redirectUri: string }>();
  const tokens = new Map<string, string>();
  let server: TestHttpsServer | undefined;
  const fixture: GithubLike = {
    url: "",
    requests: [],
    users: new Map(),
    alwaysFormEncoded: false,
    providerOptions: (extra = {}) => ({
      id: "github",
      preset: "github",
      clientId: UPSTREAM_CLIENT_ID,
      clientSecret: UPSTREAM_CLIENT_SECRET,
      authorizationEndpoint: `${fixture.url}/login/oauth/authorize`,
      tokenEndpoint: `${fixture.url}/login/oauth/access_token`,
      userInfoEndpoint: `${fixture.url}/user`,
      emailsEndpoint: `${fixture.url}/user/emails`,
      organizationsEndpoint: `${fixture.url}/user/orgs`,
      ...extra,
    }),
    close: async () => server?.close(),
  };
  server = await startTestHttpsServer(async (req, res) => {
    const seen = await record(req, fixture.url, fixture.requests);
    const p = seen.params;
    if (seen.path === "/login/oauth/authorize" && seen.method === "GET") {
      // The user's page at the provider: who to sign in as, then Authorize or Cancel.
      const hidden = ["redirect_uri", "state", "code_challenge"]
        .map((n) => `<input type="hidden" name="${n}" value="${escapeText(p.get(n) ?? "")}">`)
        .join("");
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(
        `<!doctype html><title>Authorize</title><h1>Authorize Gatehouse</h1><form method="post" action="/login/oauth/authorize">${hidden}
<label>Login <input name="login" value="octo"></label>
<button name="decision" value="authorize">Authorize</button> <button name="decision" value="cancel">Cancel</button></form>`,
      );
      return;
    }
    if (seen.path === "/login/oauth/authorize" && seen.method === "POST") {
      const target = new URL(p.get("redirect_uri") ?? "");
      if (p.get("decision") === "cancel") {
        target.searchParams.set("error", "access_denied");
        target.searchParams.set("error_description", "The user has denied your application access.");
      } else {
        const code = randomBytes(10).toString("hex");
        codes.set(code, {
          login: p.get("login") ?? "",
          challenge: p.get("code_challenge") ?? "",
          redirectUri: p.get("redirect_uri") ?? "",
        });
        target.searchParams.set("code", code);
      }
      target.searchParams.set("state", p.get("state") ?? "");
      res.writeHead(302, { location: target.href }).end();
      return;
    }
    if (seen.path === "/login/oauth/access_token") {
      const answer = (body: Record<string, string>) => {
        // GitHub: JSON only when asked for it; errors come with 200 too.
        if (!fixture.alwaysFormEncoded && (seen.accept ?? "").includes("application/json"))
          return json(res, 200, body);
        res
          .writeHead(200, { "content-type": "application/x-www-form-urlencoded; charset=utf-8" })
          .end(new URLSearchParams(body).toString());
      };
      const grant = codes.get(p.get("code") ?? "");
      codes.delete(p.get("code") ?? "");
      if (p.get("client_id") !== UPSTREAM_CLIENT_ID || p.get("client_secret") !== UPSTREAM_CLIENT_SECRET) {
        return answer({ error: "incorrect_client_credentials" });
      }
      if (
        !grant ||
        s256(p.get("code_verifier") ?? "") !== grant.challenge ||
        p.get("redirect_uri") !== grant.redirectUri
      ) {
        return answer({ error: "bad_verification_code" });
      }
      const token = `gho_${randomBytes(12).toString("hex")}`;
      tokens.set(token, grant.login);
      return answer({ access_token: token, token_type: "bearer", scope: "read:user,user:email" });
    }
    const login = tokens.get((seen.authorization ?? "").replace(/^Bearer /, ""));
    const user = login === undefined ? undefined : fixture.users.get(login);
    if (!user) return json(res, 401, { message: "Bad credentials" });
    if (seen.path === "/user") {
      return json(res, 200, {
        id: user.id,
        login: user.login,
        name: user.name ?? null,
        email: user.email ?? null,
      });
    }
    if (seen.path === "/user/emails") return json(res, 200, user.emails);
    if (seen.path === "/user/orgs")
      return json(
        res,
        200,
        user.orgs.map((o, i) => ({ login: o, id: i + 1 })),
      );
    res.writeHead(404).end();
  });
  fixture.url = server.origin;
  return fixture;
}

// ---------------------------------------------------------------------------------------------
// Gatehouse, and an MCP client in front of it
// ---------------------------------------------------------------------------------------------

/**
 * Authorization-server instances behind one address, as behind a load balancer: `target` picks
 * which instance the address sends the next request to; `add` starts one more on its own store
 * (the instances share what the stores share, e.g. one PostgreSQL schema). `close` closes the
 * instances, then their stores, then the address.
 */
export interface InstancesBehindOneAddress {
  front: ListeningServer;
  instances: AuthorizationServer[];
  target: number;
  add(store: AuthorizationStore, options: Omit<AuthorizationServerOptions, "store">): Promise<void>;
  close(): Promise<void>;
}

export async function instancesBehindOneAddress(): Promise<InstancesBehindOneAddress> {
  const stores: AuthorizationStore[] = [];
  const pool: InstancesBehindOneAddress = {
    front: await listen((request, info) => pool.instances[pool.target]!.fetch(request, info)),
    instances: [],
    target: 0,
    async add(store, options) {
      stores.push(store);
      pool.instances.push(await createAuthorizationServer({ ...options, store }));
    },
    async close() {
      for (const instance of pool.instances) await instance.close();
      for (const store of stores) await store.close();
      await pool.front.close();
      pool.instances = [];
      stores.length = 0;
    },
  };
  return pool;
}

export interface Gatehouse {
  url: string;
  server: AuthorizationServer;
  store: AuthorizationStore;
  /** The redirect URI to register at a provider. */
  callbackUrl(providerId: string): string;
  close(): Promise<void>;
}

/**
 * Listens first (so the issuer, and with it every callback URL, is known), then creates the
 * authorization server with `configure(issuer)`'s providers.
 */
export interface GatehouseConfig {
  providers: UpstreamProviderOptions[];
  localPasswords?: boolean;
  store?: AuthorizationStore;
  extra?: Partial<AuthorizationServerOptions>;
}

export async function startGatehouse(
  configure: (issuer: string) => GatehouseConfig | Promise<GatehouseConfig>,
): Promise<Gatehouse> {
  let server: AuthorizationServer | undefined;
  const http: ListeningServer = await listen((request, info) => server!.fetch(request, info));
  const config = await configure(http.url);
  const store = config.store ?? createMemoryStore();
  server = await createAuthorizationServer({
    issuer: http.url,
    store,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    upstreamSignIn: {
      providers: config.providers,
      ...(config.localPasswords === undefined ? {} : { localPasswords: config.localPasswords }),
      dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
    },
    ...config.extra,
  });
  return {
    url: http.url,
    server,
    store,
    callbackUrl: (id) => `${http.url}/upstream/${id}/callback`,
    close: async () => {
      await server?.close();
      await http.close();
    },
  };
}

/** An MCP client: dynamically registered, PKCE, its own loopback redirect URI. */
export interface McpClient {
  clientId: string;
  redirectUri: string;
  verifier: string;
  authorizeUrl(state?: string): string;
  /** Redeems a code at the token endpoint. */
  redeem(code: string): Promise<{ status: number; body: Record<string, unknown> }>;
  refresh(refreshToken: string): Promise<{ status: number; body: Record<string, unknown> }>;
}

export async function registerMcpClient(gatehouse: string): Promise<McpClient> {
  const redirectUri = "http://127.0.0.1:9/callback";
  const response = await fetch(`${gatehouse}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "Notes Agent",
      redirect_uris: [redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      token_endpoint_auth_method: "none",
    }),
  });
  if (response.status !== 201) throw new Error(`registration answered ${response.status}`);
  const clientId = ((await response.json()) as { client_id: string }).client_id;
  const verifier = randomBytes(32).toString("base64url");
  const token = async (params: Record<string, string>) => {
    const r = await fetch(`${gatehouse}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: clientId, ...params }),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  return {
    clientId,
    redirectUri,
    verifier,
    authorizeUrl: (state = "mcp-state") =>
      `${gatehouse}/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: clientId,
        redirect_uri: redirectUri,
        code_challenge: s256(verifier),
        code_challenge_method: "S256",
        scope: "notes:read",
        resource: RESOURCE,
        state,
      })}`,
    redeem: (code) =>
      token({
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        code_verifier: verifier,
        resource: RESOURCE,
      }),
    refresh: (refreshToken) => token({ grant_type: "refresh_token", refresh_token: refreshToken }),
  };
}

/** A hostile provider error text: markup and script that must never reach a page as markup. */
export const HOSTILE_TEXT = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">"'&`;

/**
 * A browser's request to a provider (which the test CA signs): status, `Location` and body. The
 * providers keep no cookies, so none are sent.
 */
export function visitProvider(
  url: string,
  form?: Record<string, string>,
): Promise<{ status: number; location: string | undefined; body: string }> {
  const body = form === undefined ? undefined : new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      {
        method: body === undefined ? "GET" : "POST",
        ca: testTls().ca,
        headers: body === undefined ? {} : { "content-type": "application/x-www-form-urlencoded" },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            location: res.headers.location,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// oidc-provider as a real upstream OpenID Connect provider
// ---------------------------------------------------------------------------------------------

export interface RealOidcProvider {
  issuer: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * oidc-provider 9 on loopback HTTPS, with Gatehouse registered as a confidential client
 * (`client_secret_basic`, PKCE required) whose redirect URI is `redirectUri`. Its development
 * login and consent pages stand in for the user; the account id typed at its login is the
 * subject, and `accounts` gives its e-mail claims (absent: `<id>@example.com`, verified).
 */
export async function startRealOidcProvider(
  redirectUris: string[],
  accounts: Record<string, { email: string; email_verified: boolean }> = {},
): Promise<RealOidcProvider> {
  const key = await generateKeyPair("RS256", { extractable: true });
  const requests: RecordedRequest[] = [];
  let issuer = "";
  let callback: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = await startTestHttpsServer((req, res) => {
    const url = new URL(req.url ?? "/", issuer);
    requests.push({
      method: req.method ?? "GET",
      path: url.pathname,
      params: url.searchParams,
      accept: req.headers.accept,
      authorization: req.headers.authorization,
    });
    callback!(req, res);
  });
  issuer = server.origin;
  const provider = new Provider(issuer, {
    jwks: { keys: [{ ...(await exportJWK(key.privateKey)), kid: "rsa-1", alg: "RS256", use: "sig" }] },
    cookies: { keys: ["gatehouse-upstream-test-cookie-key"] },
    clients: [
      {
        client_id: UPSTREAM_CLIENT_ID,
        client_secret: UPSTREAM_CLIENT_SECRET,
        redirect_uris: redirectUris,
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "preferred_username"] },
    // The e-mail in the ID token itself (the code flow otherwise leaves it to user-info).
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({
        sub: id,
        ...(accounts[id] ?? { email: `${id}@example.com`, email_verified: true }),
        name: id,
        preferred_username: id,
      }),
    }),
  });
  provider.on("server_error", () => {});
  callback = provider.callback();
  return { issuer, requests, close: () => server.close() };
}

/** A scripted provider as Gatehouse's OpenID Connect provider `id` (Gatehouse's client there). */
export function scriptedProviderOptions(
  provider: ScriptedOidc,
  extra: Partial<UpstreamProviderOptions> = {},
): UpstreamProviderOptions {
  return {
    id: "idp",
    kind: "oidc",
    issuer: provider.issuer,
    clientId: UPSTREAM_CLIENT_ID,
    clientSecret: UPSTREAM_CLIENT_SECRET,
    ...extra,
  };
}

/**
 * A browser (cookie-keeping `agent` with `get`/`post`) at Gatehouse's login page `loginPath`
 * pressing the button of `providerId`; returns where Gatehouse sent it (the provider's URL).
 */
export async function pressProviderButton(
  agent: {
    get(path: string): Promise<Response>;
    post(path: string, form: Record<string, string>): Promise<Response>;
  },
  providerId: string,
  loginPath = "/login",
): Promise<string> {
  const login = await agent.get(loginPath);
  if (login.status !== 200) throw new Error(`the login page answered ${login.status}`);
  const started = await agent.post("/login", { ...hiddenFields(await login.text()), upstream: providerId });
  if (started.status !== 303) throw new Error(`the button answered ${started.status}`);
  return started.headers.get("location")!;
}
