/**
 * A real third-party authorization server for the client's tests: oidc-provider 9 on loopback,
 * with resource indicators (JWT access tokens whose `aud` is our resource), PKCE required, open
 * dynamic registration and rotating refresh tokens under its default refresh policy; plus a small
 * resource server that publishes protected resource metadata naming it and validates its tokens
 * with jose.
 *
 * Deviation from production: the issuer is `http://127.0.0.1:<port>`. oidc-provider accepts an
 * http issuer (it only warns), and the client permits http on loopback hosts only, so no TLS is
 * needed here. Its development interactions (login + consent forms) stand in for a user, driven
 * by {@link interactiveUserAgent} with plain fetch and a cookie jar.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { calculateJwkThumbprint, EmbeddedJWK, exportJWK, generateKeyPair, type JWK, jwtVerify } from "jose";
import Provider from "oidc-provider";

export interface OidcProviderFixture {
  issuer: string;
  resourceUrl: string;
  /** Access tokens the resource server accepted (their `jti`), in order. */
  accepted: Array<{ jti: string | undefined; aud: unknown; scope: unknown; scheme: string; jkt?: string }>;
  /** Sends a refresh token straight to the token endpoint (to check rotation). */
  redeemRefreshToken(refreshToken: string, clientId: string): Promise<{ status: number; body: unknown }>;
  close(): Promise<void>;
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}

function stop(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

export interface OidcProviderOptions {
  accessTokenTtl?: number;
  /**
   * The resource accepts only DPoP-bound tokens (challenging with `DPoP` and checking proofs with
   * jose, RFC 9449 §4.3 and §7.1); with `requireNonce` the provider's token endpoint demands its
   * own DPoP nonce (RFC 9449 §8).
   */
  dpop?: { requireNonce?: boolean };
  /**
   * The device authorization grant (RFC 8628): oidc-provider's `deviceFlow` feature, its
   * verification pages at `/device`, device codes living `codeTtlSeconds` (its default 600).
   * oidc-provider never answers `slow_down` (RFC 8628 §3.5); with `slowDownFirstPolls` the
   * server in front of it does, to that many device-code polls, as a server with a polling rate
   * limit would (the body it read goes on to oidc-provider as `req.body`, which it accepts).
   */
  deviceFlow?: { codeTtlSeconds?: number; slowDownFirstPolls?: number };
}

/** RFC 9449 §4.3 at the resource: returns the proof key's thumbprint, or why it is refused. */
async function checkResourceProof(
  proof: string | string[] | undefined,
  method: string,
  url: string,
  token: string,
  seen: Set<string>,
): Promise<{ jkt: string } | { error: string }> {
  if (typeof proof !== "string") return { error: "one DPoP header" };
  try {
    const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
      typ: "dpop+jwt",
      algorithms: ["ES256", "RS256", "PS256", "EdDSA"],
      maxTokenAge: "60s",
    });
    const jwk = protectedHeader.jwk as JWK;
    if ("d" in jwk) return { error: "private key in jwk" };
    if (typeof payload.jti !== "string" || seen.has(payload.jti)) return { error: "jti" };
    seen.add(payload.jti);
    const target = new URL(url);
    if (payload.htm !== method || payload.htu !== `${target.origin}${target.pathname}`)
      return { error: "htm/htu" };
    if (payload.ath !== createHash("sha256").update(token, "ascii").digest("base64url"))
      return { error: "ath" };
    return { jkt: await calculateJwkThumbprint(jwk, "sha256") };
  } catch {
    return { error: "proof" };
  }
}

export async function startOidcProvider(options: OidcProviderOptions = {}): Promise<OidcProviderFixture> {
  const ec = await generateKeyPair("ES256", { extractable: true });
  const rsa = await generateKeyPair("RS256", { extractable: true });
  const jwks = {
    keys: [
      { ...(await exportJWK(ec.privateKey)), kid: "ec-1", alg: "ES256", use: "sig" },
      { ...(await exportJWK(rsa.privateKey)), kid: "rsa-1", alg: "RS256", use: "sig" },
    ] as JWK[],
  };

  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => {
    res.writeHead(503).end();
  };
  const asServer = createServer((req, res) => handler(req, res));
  const issuer = await listen(asServer);

  let rsBase = "";
  const rsServer = createServer();
  rsBase = await listen(rsServer);
  const resource = `${rsBase}/mcp`;

  const provider = new Provider(issuer, {
    jwks,
    cookies: { keys: ["gatehouse-test-cookie-key-0123456789"] },
    scopes: ["openid", "offline_access"],
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      ...(options.deviceFlow && { deviceFlow: { enabled: true } }),
      revocation: { enabled: true },
      dPoP: {
        enabled: true,
        ...(options.dpop?.requireNonce && { nonceSecret: randomBytes(32), requireNonce: () => true }),
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string) => {
          if (indicator !== resource) throw new Error("unknown resource");
          return {
            scope: "read",
            audience: resource,
            accessTokenTTL: options.accessTokenTtl ?? 300,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          };
        },
      },
    },
    ...(options.deviceFlow?.codeTtlSeconds !== undefined && {
      ttl: { DeviceCode: options.deviceFlow.codeTtlSeconds },
    }),
    pkce: { required: () => true },
    // No `issueRefreshToken` override: oidc-provider's default follows OpenID Connect Core §11
    // (a refresh token only for `offline_access`, which counts only with `prompt=consent`), so the
    // tests see what a client gets from a provider left at its defaults.
    rotateRefreshToken: true,
    findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id }) }),
  });
  // Expected configuration warnings (dev interactions, http issuer) are not test output.
  provider.on("server_error", () => {});
  const callback = provider.callback();
  let slowDowns = options.deviceFlow?.slowDownFirstPolls ?? 0;
  handler = async (req, res) => {
    if (slowDowns > 0 && req.method === "POST" && req.url === "/token") {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks).toString("utf8");
      if (new URLSearchParams(body).get("grant_type") === "urn:ietf:params:oauth:grant-type:device_code") {
        slowDowns--;
        res
          .writeHead(400, { "content-type": "application/json", "cache-control": "no-store" })
          .end(JSON.stringify({ error: "slow_down", error_description: "polling too fast" }));
        return;
      }
      (req as IncomingMessage & { body?: string }).body = body;
    }
    callback(req, res);
  };

  const ecPublic = ec.publicKey;
  const accepted: OidcProviderFixture["accepted"] = [];
  const prmUrl = `${rsBase}/.well-known/oauth-protected-resource/mcp`;
  const jtis = new Set<string>();
  rsServer.on("request", async (req, res) => {
    const url = new URL(req.url ?? "/", rsBase);
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ resource, authorization_servers: [issuer], scopes_supported: ["read"] }));
      return;
    }
    if (url.pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const scheme = options.dpop ? "DPoP" : "Bearer";
    const challenge = (error?: string) =>
      res
        .writeHead(401, {
          "www-authenticate": `${scheme} ${error ? `error="${error}", ` : ""}${options.dpop ? 'algs="ES256", ' : ""}scope="read", resource_metadata="${prmUrl}"`,
        })
        .end();
    const authorization = req.headers.authorization ?? "";
    if (!authorization.startsWith(`${scheme} `)) return challenge();
    const token = authorization.slice(scheme.length + 1);
    let jkt: string | undefined;
    if (options.dpop) {
      const checked = await checkResourceProof(req.headers.dpop, req.method ?? "GET", url.href, token, jtis);
      if ("error" in checked) return challenge("invalid_dpop_proof");
      jkt = checked.jkt;
    }
    try {
      const { payload } = await jwtVerify(token, ecPublic, {
        issuer,
        audience: resource,
        typ: "at+jwt",
        algorithms: ["ES256"],
      });
      if (
        !String(payload.scope ?? "")
          .split(" ")
          .includes("read")
      )
        return challenge("insufficient_scope");
      // RFC 9449 §7.1: a bound token is accepted only with a proof by the key it is bound to.
      const bound = (payload.cnf as { jkt?: string } | undefined)?.jkt;
      if (options.dpop ? bound !== jkt : bound !== undefined) return challenge("invalid_token");
      accepted.push({
        jti: payload.jti,
        aud: payload.aud,
        scope: payload.scope,
        scheme,
        ...(jkt !== undefined && { jkt }),
      });
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ ok: true, sub: payload.sub }));
    } catch {
      challenge("invalid_token");
    }
  });

  return {
    issuer,
    resourceUrl: resource,
    accepted,
    async redeemRefreshToken(refreshToken, clientId) {
      const response = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: refreshToken,
          client_id: clientId,
          resource,
        }),
      });
      return { status: response.status, body: await response.json() };
    },
    close: async () => {
      await Promise.all([stop(asServer), stop(rsServer)]);
    },
  };
}

/** A cookie jar good enough for one host: names only (paths ignored), expiry honoured. */
class CookieJar {
  readonly #cookies = new Map<string, string>();

  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attributes.some((a) => {
        const [k, v] = a.trim().split("=");
        if (k?.toLowerCase() === "max-age") return Number(v) <= 0;
        if (k?.toLowerCase() === "expires") return Date.parse(v ?? "") <= Date.now();
        return false;
      });
      if (expired || value === "") this.#cookies.delete(name);
      else this.#cookies.set(name, value);
    }
  }

  header(): string {
    return [...this.#cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

/**
 * A user who signs in as `login` and consents: follows redirects by hand, fills in the
 * development login and consent forms, and returns the redirect to `redirectUri` unfollowed.
 */
export function interactiveUserAgent(redirectUri: string, login = "alice") {
  return async (authorizationUrl: URL): Promise<string> => {
    const jar = new CookieJar();
    let next: { url: string; init: RequestInit } = { url: authorizationUrl.href, init: { method: "GET" } };
    for (let step = 0; step < 12; step++) {
      const response = await fetch(next.url, {
        ...next.init,
        redirect: "manual",
        headers: { ...(next.init.headers as Record<string, string>), cookie: jar.header() },
      });
      jar.store(response);
      if (response.status >= 300 && response.status < 400) {
        await response.body?.cancel();
        const location = new URL(response.headers.get("location") ?? "", next.url).href;
        if (location.startsWith(redirectUri)) return location;
        next = { url: location, init: { method: "GET" } };
        continue;
      }
      const html = await response.text();
      if (response.status !== 200) throw new Error(`authorization server answered ${response.status}`);
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
      if (!action || !prompt) throw new Error("no interaction form on the page");
      const form = new URLSearchParams({ prompt });
      if (prompt === "login") {
        form.set("login", login);
        form.set("password", "irrelevant");
      }
      next = {
        url: new URL(action.replaceAll("&amp;", "&"), next.url).href,
        init: {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: form.toString(),
        },
      };
    }
    throw new Error("too many steps without reaching the redirect URI");
  };
}
