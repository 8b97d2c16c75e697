/**
 * A small OpenID Connect provider for `gatehouse demo --upstream-demo`, so the demo can show sign-in
 * through an upstream provider without internet and without a development dependency (the published
 * package cannot load oidc-provider, which is a devDependency). It speaks what Gatehouse's upstream
 * client needs and nothing more: discovery, JWKS, the authorization code flow with PKCE S256 (its
 * page asks only for a name: there are no passwords, it is a demo), client_secret_basic at the
 * token endpoint, ES256 ID tokens with the nonce, refresh tokens rotated at each use, user-info.
 *
 * Gatehouse reaches providers only over https, so this one listens with a throw-away self-signed
 * certificate made by the `openssl` command (which must be installed), valid for 127.0.0.1 and
 * localhost for one day; the demo trusts it through the loopback opt-in, and the browser shows a
 * certificate warning once. Development only: never run it as a real identity provider.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import type { UpstreamSignInOptions } from "../authorization-server/core/upstream-options.js";
import { timingSafeEqualString } from "../shared/crypto.js";

export interface DemoIdentityProvider {
  /** `https://127.0.0.1:<port>` */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** PEM of its self-signed certificate, for the loopback opt-in's `ca`. */
  certificate: string;
  close(): Promise<void>;
}

const CLIENT_ID = "gatehouse-demo";
const CODE_TTL_MS = 60_000;
const ACCESS_TOKEN_TTL_SECONDS = 3600;
const MAX_BODY_BYTES = 16 * 1024;
/** Who may sign in: a short lowercase name, which becomes the subject and the e-mail's local part. */
const USER_NAME = /^[a-z][a-z0-9._-]{0,31}$/;

/** A self-signed P-256 certificate for 127.0.0.1 and localhost, made in a temporary directory. */
function selfSignedCertificate(): { cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-demo-idp-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=Gatehouse demo identity provider",
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout",
        "key.pem",
        "-out",
        "cert.pem",
      ],
      { cwd: dir, stdio: ["ignore", "ignore", "pipe"] },
    );
    return {
      cert: readFileSync(join(dir, "cert.pem"), "utf8"),
      key: readFileSync(join(dir, "key.pem"), "utf8"),
    };
  } catch (cause) {
    throw new Error(
      "--upstream-demo needs the openssl command to make the demo provider's certificate (install OpenSSL)",
      { cause },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).byteLength;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(body));
}

/**
 * Starts the provider on 127.0.0.1 (`port`, default any free one) for one client, Gatehouse, whose
 * only redirect URI is `redirectUri`.
 */
export async function startDemoIdentityProvider(options: {
  redirectUri: string;
  port?: number;
}): Promise<DemoIdentityProvider> {
  const tls = selfSignedCertificate();
  const signingKey = await generateKeyPair("ES256");
  const publicJwk = { ...(await exportJWK(signingKey.publicKey)), kid: "demo-1", alg: "ES256", use: "sig" };
  const clientSecret = randomBytes(24).toString("base64url");
  const codes = new Map<
    string,
    { sub: string; nonce?: string; challenge: string; redirectUri: string; scope: string; expiresAt: number }
  >();
  const accessTokens = new Map<string, { sub: string; expiresAt: number }>();
  const refreshTokens = new Map<string, { sub: string; scope: string }>();
  let issuer = "";

  const claimsOf = (sub: string) => ({ sub, email: `${sub}@demo.example`, email_verified: true, name: sub });

  /** The authorization request's parameters, or why they are refused (shown as text, never redirected). */
  function authorizationRequest(p: URLSearchParams): Record<string, string> | string {
    if (p.get("client_id") !== CLIENT_ID) return "unknown client_id";
    if (p.get("redirect_uri") !== options.redirectUri) return "redirect_uri is not registered";
    if (p.get("response_type") !== "code") return "response_type must be code";
    const challenge = p.get("code_challenge") ?? "";
    if (p.get("code_challenge_method") !== "S256" || !/^[A-Za-z0-9_-]{43}$/.test(challenge))
      return "PKCE S256 is required";
    const request: Record<string, string> = {
      client_id: CLIENT_ID,
      redirect_uri: options.redirectUri,
      response_type: "code",
      code_challenge: challenge,
      code_challenge_method: "S256",
      scope: p.get("scope") ?? "openid",
      state: p.get("state") ?? "",
    };
    const nonce = p.get("nonce");
    if (nonce !== null) request.nonce = nonce;
    return request;
  }

  function signInPage(res: ServerResponse, request: Record<string, string>, problem?: string): void {
    const hidden = Object.entries(request)
      .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`)
      .join("");
    res.writeHead(problem ? 400 : 200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy":
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http: https:",
      "cache-control": "no-store",
    });
    res.end(`<!doctype html><html lang="en"><meta charset="utf-8"><title>Demo identity provider</title>
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}input[type=text]{font:inherit;padding:.3rem;width:100%}button{font:inherit;padding:.4rem 1rem;margin:.8rem .4rem 0 0}.note{color:#555;font-size:.9rem}</style>
<h1>Demo identity provider</h1>
<p class="note">A stand-in for your organisation's sign-in (Google, Entra, Okta, GitHub, ...), running on this machine for <code>gatehouse demo</code>. No password: type a name.</p>
${problem ? `<p role="alert">${escapeHtml(problem)}</p>` : ""}
<form method="post" action="/authorize">${hidden}
<label>Sign in as <input type="text" name="username" value="alice" autocomplete="off"></label>
<button name="decision" value="approve">Sign in</button><button name="decision" value="cancel">Cancel</button>
</form>`);
  }

  async function idToken(sub: string, nonce: string | undefined): Promise<string> {
    return new SignJWT({ ...claimsOf(sub), ...(nonce === undefined ? {} : { nonce }) })
      .setProtectedHeader({ alg: "ES256", kid: "demo-1" })
      .setIssuer(issuer)
      .setAudience(CLIENT_ID)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(signingKey.privateKey);
  }

  function issueTokens(sub: string, scope: string) {
    const accessToken = randomBytes(24).toString("base64url");
    const refreshToken = randomBytes(24).toString("base64url");
    accessTokens.set(accessToken, { sub, expiresAt: Date.now() + ACCESS_TOKEN_TTL_SECONDS * 1000 });
    refreshTokens.set(refreshToken, { sub, scope });
    return {
      access_token: accessToken,
      token_type: "Bearer",
      expires_in: ACCESS_TOKEN_TTL_SECONDS,
      refresh_token: refreshToken,
      scope,
    };
  }

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const expected = `Basic ${Buffer.from(`${CLIENT_ID}:${clientSecret}`).toString("base64")}`;
    if (!timingSafeEqualString(req.headers.authorization ?? "", expected)) {
      return json(res, 401, { error: "invalid_client" });
    }
    const form = await readForm(req);
    if (!form) return json(res, 400, { error: "invalid_request" });
    if (form.get("grant_type") === "authorization_code") {
      const code = form.get("code") ?? "";
      const grant = codes.get(code);
      codes.delete(code);
      const verifier = form.get("code_verifier") ?? "";
      if (
        !grant ||
        grant.expiresAt <= Date.now() ||
        grant.redirectUri !== form.get("redirect_uri") ||
        createHash("sha256").update(verifier).digest("base64url") !== grant.challenge
      ) {
        return json(res, 400, { error: "invalid_grant" });
      }
      return json(res, 200, {
        ...issueTokens(grant.sub, grant.scope),
        id_token: await idToken(grant.sub, grant.nonce),
      });
    }
    if (form.get("grant_type") === "refresh_token") {
      const presented = form.get("refresh_token") ?? "";
      const grant = refreshTokens.get(presented);
      // Rotated at each use: the old refresh token is spent.
      refreshTokens.delete(presented);
      if (!grant) return json(res, 400, { error: "invalid_grant" });
      return json(res, 200, issueTokens(grant.sub, grant.scope));
    }
    return json(res, 400, { error: "unsupported_grant_type" });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", issuer);
    if (req.method === "GET" && url.pathname === "/.well-known/openid-configuration") {
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        userinfo_endpoint: `${issuer}/userinfo`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        id_token_signing_alg_values_supported: ["ES256"],
        token_endpoint_auth_methods_supported: ["client_secret_basic"],
        subject_types_supported: ["public"],
        scopes_supported: ["openid", "email", "profile"],
      });
    }
    if (req.method === "GET" && url.pathname === "/jwks") return json(res, 200, { keys: [publicJwk] });
    if (url.pathname === "/authorize") {
      const params = req.method === "POST" ? await readForm(req) : url.searchParams;
      const request = params ? authorizationRequest(params) : "request too large";
      if (typeof request === "string") {
        res
          .writeHead(400, { "content-type": "text/plain; charset=utf-8" })
          .end(`Demo identity provider: ${request}`);
        return;
      }
      if (req.method !== "POST") return signInPage(res, request);
      const back = new URL(options.redirectUri);
      if (params!.get("decision") === "cancel") {
        back.searchParams.set("error", "access_denied");
      } else {
        const username = (params!.get("username") ?? "").trim().toLowerCase();
        if (!USER_NAME.test(username)) {
          return signInPage(
            res,
            request,
            "A name is 1-32 lowercase letters, digits, '.', '_' or '-', starting with a letter.",
          );
        }
        const code = randomBytes(24).toString("base64url");
        codes.set(code, {
          sub: username,
          ...(request.nonce === undefined ? {} : { nonce: request.nonce }),
          challenge: request.code_challenge!,
          redirectUri: options.redirectUri,
          scope: request.scope!,
          expiresAt: Date.now() + CODE_TTL_MS,
        });
        back.searchParams.set("code", code);
      }
      back.searchParams.set("state", request.state!);
      back.searchParams.set("iss", issuer);
      res.writeHead(303, { location: back.href, "cache-control": "no-store" }).end();
      return;
    }
    if (req.method === "POST" && url.pathname === "/token") return token(req, res);
    if (req.method === "GET" && url.pathname === "/userinfo") {
      const held = accessTokens.get((req.headers.authorization ?? "").replace(/^Bearer /, ""));
      if (!held || held.expiresAt <= Date.now()) return json(res, 401, { error: "invalid_token" });
      return json(res, 200, claimsOf(held.sub));
    }
    res.writeHead(404, { "content-type": "text/plain" }).end("not found");
  }

  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  issuer = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    clientId: CLIENT_ID,
    clientSecret,
    certificate: tls.cert,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The provider's id at Gatehouse: its callback is `<issuer>/upstream/demo-idp/callback`. */
export const DEMO_IDP_ID = "demo-idp";

/**
 * Gatehouse's `upstreamSignIn` for the demo provider: accounts created on first sign-in (everyone
 * it signs in is a local name on this machine), local passwords kept for the `demo` user, and the
 * provider's self-signed certificate trusted through the loopback opt-in.
 */
export function demoUpstreamSignIn(idp: DemoIdentityProvider): UpstreamSignInOptions {
  return {
    providers: [
      {
        id: DEMO_IDP_ID,
        kind: "oidc",
        displayName: "Demo identity provider",
        issuer: idp.issuer,
        clientId: idp.clientId,
        clientSecret: idp.clientSecret,
        algorithms: ["ES256"],
        createAccounts: true,
      },
    ],
    dangerouslyAllowLoopbackForTesting: { ca: [idp.certificate] },
  };
}
