/**
 * For the upstream-token tests: oidc-provider on loopback HTTPS issuing refresh tokens (rotated at
 * every use, as a strict provider does), with a switch that makes its token endpoint refuse
 * refreshes with `invalid_grant`; and a cookie-keeping walk through its development login and
 * consent pages over HTTP, standing in for the user's browser at the provider.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";
import { startTestHttpsServer, testTls } from "../../support/tls.js";
import { UPSTREAM_CLIENT_ID, UPSTREAM_CLIENT_SECRET } from "../upstream/support.js";

export interface RefreshingOidcProvider {
  issuer: string;
  /** `grant_type` of every token request it answered, in order (`refused` while refusing). */
  tokenRequests: string[];
  /** While true, every refresh is answered `invalid_grant` (the user revoked Gatehouse there). */
  refuseRefresh: boolean;
  close(): Promise<void>;
}

export async function startRefreshingOidcProvider(redirectUris: string[]): Promise<RefreshingOidcProvider> {
  const key = await generateKeyPair("RS256", { extractable: true });
  let callback: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const fixture: RefreshingOidcProvider = {
    issuer: "",
    tokenRequests: [],
    refuseRefresh: false,
    close: async () => {},
  };
  const server = await startTestHttpsServer((req, res) => callback!(req, res));
  fixture.issuer = server.origin;
  fixture.close = () => server.close();
  const provider = new Provider(fixture.issuer, {
    jwks: { keys: [{ ...(await exportJWK(key.privateKey)), kid: "rsa-1", alg: "RS256", use: "sig" }] },
    cookies: { keys: ["gatehouse-upstream-token-test-cookie-key"] },
    clients: [
      {
        client_id: UPSTREAM_CLIENT_ID,
        client_secret: UPSTREAM_CLIENT_SECRET,
        redirect_uris: redirectUris,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    // A refresh token with every code, rotated at every use: a second use of an old one fails.
    issueRefreshToken: async () => true,
    rotateRefreshToken: () => true,
    ttl: { AccessToken: 3600 },
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id, email: `${id}@example.com`, email_verified: true, name: id }),
    }),
  });
  provider.on("server_error", () => {});
  // Every token request, by grant type, whether it succeeded or not.
  const seen = (...args: unknown[]) => {
    const ctx = args[0] as { oidc?: { params?: Record<string, unknown> } };
    fixture.tokenRequests.push(String(ctx.oidc?.params?.grant_type));
  };
  provider.on("grant.success", seen);
  provider.on("grant.error", seen);
  // oidc-provider is a Koa application; its middleware runs before its own routes.
  type KoaContext = { method: string; path: string; status: number; body: unknown };
  (
    provider as unknown as { use(fn: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void }
  ).use(async (ctx, next) => {
    if (fixture.refuseRefresh && ctx.method === "POST" && ctx.path === "/token") {
      fixture.tokenRequests.push("refused");
      ctx.status = 400;
      ctx.body = { error: "invalid_grant", error_description: "grant request is invalid" };
      return;
    }
    await next();
  });
  callback = provider.callback();
  return fixture;
}

function httpsCall(
  url: string,
  cookies: Map<string, string>,
  form?: Record<string, string>,
): Promise<{ status: number; location: string | undefined; body: string }> {
  const body = form === undefined ? undefined : new URLSearchParams(form).toString();
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
  if (cookies.size) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { method: body === undefined ? "GET" : "POST", ca: testTls().ca, headers },
      (res) => {
        for (const line of res.headers["set-cookie"] ?? []) {
          const pair = line.split(";")[0]!;
          const eq = pair.indexOf("=");
          const value = pair.slice(eq + 1);
          if (value === "" || /max-age=0|expires=Thu, 01 Jan 1970/i.test(line))
            cookies.delete(pair.slice(0, eq));
          else cookies.set(pair.slice(0, eq), value);
        }
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

/**
 * Walks oidc-provider's development pages from `start` (the authorization request Gatehouse sent
 * the browser to) as user `login`: its login form, then its consent form, following redirects at
 * the provider. Returns the redirect back to Gatehouse (the callback URL with the code).
 */
export async function walkProvider(start: string, login: string): Promise<string> {
  const cookies = new Map<string, string>();
  const origin = new URL(start).origin;
  let url = start;
  let form: Record<string, string> | undefined;
  for (let step = 0; step < 12; step++) {
    const answer = await httpsCall(url, cookies, form);
    form = undefined;
    if (answer.location !== undefined) {
      const next = new URL(answer.location, url);
      if (next.origin !== origin) return next.href;
      url = next.href;
      continue;
    }
    if (answer.status !== 200)
      throw new Error(`the provider answered ${answer.status} at ${new URL(url).pathname}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(answer.body)?.[1];
    if (!action) throw new Error("the provider's page has no form");
    url = new URL(action.replace(/&amp;/g, "&"), url).href;
    form = {};
    for (const m of answer.body.matchAll(
      /<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g,
    )) {
      form[m[1]!] = m[2]!;
    }
    if (/name="login"/.test(answer.body)) Object.assign(form, { login, password: "anything" });
  }
  throw new Error("the provider never sent the browser back");
}
