/**
 * Loopback authorization servers that behave like ones the field runs, each with the protected
 * resource in front of it, for the client's per-issuer compatibility settings:
 * - `entra`: Microsoft Entra ID's multi-tenant endpoint. The resource names
 *   `<base>/organizations/v2.0`; its OpenID configuration says `issuer: <base>/{tenantid}/v2.0`,
 *   omits `code_challenge_methods_supported` (PKCE S256 is still enforced), refuses any `resource`
 *   parameter with AADSTS9010010 (`invalid_target`), and issues RS256 ID tokens with `tid` and the
 *   tenant's issuer. No dynamic registration: the client is pre-registered.
 * - `cognito`: Amazon Cognito: an exact issuer, PKCE enforced but not advertised.
 * - `google`: Google: the resource names `<base>/`, the OpenID configuration says `<base>` (the
 *   trailing slash differs between documents); it sends `iss` in the authorization response.
 * Each also offers the device grant (RFC 8628), approved at once. Everything seen (authorization
 * and device authorization requests, token requests) is recorded for the tests to inspect.
 */
import { createHash, createSign, generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { body } from "./fixtures.js";

export type FieldFlavour = "entra" | "cognito" | "google";

export const TENANT = "6f1c2d3e-4a5b-4c7d-8e9f-0a1b2c3d4e5f";
export const OTHER_TENANT = "0a0b0c0d-1111-4222-8333-944455556666";
export const CLIENT_ID = "field-client";

export interface FieldServer {
  base: string;
  resourceUrl: string;
  /** The issuer the resource's metadata names (what an operator configures settings under). */
  issuer: string;
  /** The issuer the server itself uses in its documents, `iss` and ID tokens. */
  serverIssuer: string;
  seen: { authorize: URLSearchParams[]; token: URLSearchParams[] };
  /** Forgets every access token issued so far: the next call is answered 401 and refreshes. */
  expireAccessTokens(): void;
  close(): Promise<void>;
}

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });

function signJwt(claims: Record<string, unknown>): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const input = `${encode({ alg: "RS256", typ: "JWT", kid: "k1" })}.${encode(claims)}`;
  const signature = createSign("RSA-SHA256").update(input).sign(privateKey).toString("base64url");
  return `${input}.${signature}`;
}

export async function startFieldServer(
  flavour: FieldFlavour,
  options: { userTenant?: string } = {},
): Promise<FieldServer> {
  const seen: FieldServer["seen"] = { authorize: [], token: [] };
  const codes = new Map<string, { challenge: string; scope: string }>();
  const access = new Set<string>();
  const refresh = new Set<string>();
  let n = 0;
  let base = "";
  const userTenant = options.userTenant ?? TENANT;
  const names = () => {
    switch (flavour) {
      case "entra":
        return {
          issuer: `${base}/organizations/v2.0`,
          documentIssuer: `${base}/{tenantid}/v2.0`,
          serverIssuer: `${base}/${TENANT}/v2.0`,
          tokenIssuer: `${base}/${userTenant}/v2.0`,
        };
      case "cognito":
        return { issuer: base, documentIssuer: base, serverIssuer: base, tokenIssuer: base };
      case "google":
        return { issuer: `${base}/`, documentIssuer: base, serverIssuer: base, tokenIssuer: base };
    }
  };
  const metadata = (issuer: string) => ({
    issuer,
    authorization_endpoint: `${base}/oauth2/authorize`,
    token_endpoint: `${base}/oauth2/token`,
    device_authorization_endpoint: `${base}/oauth2/devicecode`,
    scopes_supported: ["openid", "notes.read", "offline_access"],
    response_types_supported: ["code"],
    id_token_signing_alg_values_supported: ["RS256"],
    // Google advertises PKCE; Entra and Cognito support S256 without saying so.
    ...(flavour === "google" && {
      authorization_response_iss_parameter_supported: true,
      code_challenge_methods_supported: ["plain", "S256"],
    }),
  });
  const tokens = (scope: string) => {
    n++;
    const at = `field-at-${n}`;
    const rt = `field-rt-${n}`;
    access.add(at);
    refresh.add(rt);
    const now = Math.floor(Date.now() / 1000);
    const scopes = scope.split(" ");
    return {
      access_token: at,
      token_type: "Bearer",
      expires_in: 3600,
      refresh_token: rt,
      scope,
      ...(scopes.includes("openid") && {
        id_token: signJwt({
          iss: names().tokenIssuer,
          sub: "user-1",
          aud: CLIENT_ID,
          iat: now,
          exp: now + 3600,
          ...(flavour === "entra" && { tid: userTenant }),
        }),
      }),
    };
  };
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", base);
    const json = (status: number, value: unknown) =>
      res
        .writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
        .end(JSON.stringify(value));
    const { issuer, documentIssuer, serverIssuer } = names();
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      return json(200, {
        resource: `${base}/mcp`,
        authorization_servers: [issuer],
        scopes_supported: ["notes.read"],
      });
    }
    // OpenID configuration only (RFC 8414 forms answer 404), as these providers publish it.
    if (flavour === "entra") {
      if (url.pathname === "/organizations/v2.0/.well-known/openid-configuration") {
        return json(200, metadata(documentIssuer));
      }
      if (url.pathname === `/${TENANT}/v2.0/.well-known/openid-configuration`) {
        return json(200, metadata(serverIssuer));
      }
    } else if (url.pathname === "/.well-known/openid-configuration") {
      return json(200, metadata(documentIssuer));
    }
    if (url.pathname === "/oauth2/authorize") {
      seen.authorize.push(url.searchParams);
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      if (flavour === "entra" && url.searchParams.has("resource")) {
        target.searchParams.set("error", "invalid_target");
        target.searchParams.set(
          "error_description",
          "AADSTS9010010: The resource parameter provided in the request doesn't match with the requested scopes.",
        );
        return res.writeHead(302, { location: target.href }).end();
      }
      if (url.searchParams.get("code_challenge_method") !== "S256") {
        target.searchParams.set("error", "invalid_request");
        return res.writeHead(302, { location: target.href }).end();
      }
      const code = `field-code-${codes.size + 1}-${n}`;
      codes.set(code, {
        challenge: url.searchParams.get("code_challenge") ?? "",
        scope: url.searchParams.get("scope") ?? "",
      });
      target.searchParams.set("code", code);
      if (flavour === "google") target.searchParams.set("iss", serverIssuer);
      return res.writeHead(302, { location: target.href }).end();
    }
    if (url.pathname === "/oauth2/devicecode") {
      // RFC 8628 §3.1-3.2, approved at once: the first poll gets the tokens.
      const form = new URLSearchParams(await body(req));
      seen.authorize.push(form);
      if (flavour === "entra" && form.has("resource")) {
        return json(400, {
          error: "invalid_target",
          error_description: "AADSTS9010010: resource not allowed.",
        });
      }
      const deviceCode = `field-device-${codes.size + 1}-${n}`;
      codes.set(deviceCode, { challenge: "", scope: form.get("scope") ?? "" });
      return json(200, {
        device_code: deviceCode,
        user_code: "ABCD-EFGH",
        verification_uri: `${base}/device`,
        expires_in: 60,
        interval: 1,
      });
    }
    if (url.pathname === "/oauth2/token") {
      const form = new URLSearchParams(await body(req));
      seen.token.push(form);
      if (flavour === "entra" && form.has("resource")) {
        return json(400, {
          error: "invalid_target",
          error_description: "AADSTS9010010: The resource parameter provided in the request doesn't match.",
        });
      }
      if (form.get("client_id") !== CLIENT_ID) return json(401, { error: "invalid_client" });
      if (form.get("grant_type") === "authorization_code") {
        const entry = codes.get(form.get("code") ?? "");
        const verifier = form.get("code_verifier") ?? "";
        if (!entry || createHash("sha256").update(verifier).digest("base64url") !== entry.challenge) {
          return json(400, { error: "invalid_grant" });
        }
        codes.delete(form.get("code") ?? "");
        return json(200, tokens(entry.scope));
      }
      if (form.get("grant_type") === "urn:ietf:params:oauth:grant-type:device_code") {
        const entry = codes.get(form.get("device_code") ?? "");
        if (!entry) return json(400, { error: "expired_token" });
        codes.delete(form.get("device_code") ?? "");
        return json(200, tokens(entry.scope));
      }
      if (form.get("grant_type") === "refresh_token") {
        const presented = form.get("refresh_token") ?? "";
        if (!refresh.delete(presented)) return json(400, { error: "invalid_grant" });
        return json(200, tokens("notes.read"));
      }
      return json(400, { error: "unsupported_grant_type" });
    }
    if (url.pathname === "/mcp") {
      const auth = req.headers.authorization ?? "";
      if (!access.has(auth.replace(/^Bearer /, ""))) {
        return res
          .writeHead(401, {
            "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", scope="notes.read"`,
          })
          .end();
      }
      return json(200, { ok: true });
    }
    json(404, { error: "not_found" });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    resourceUrl: `${base}/mcp`,
    issuer: names().issuer,
    serverIssuer: names().serverIssuer,
    seen,
    expireAccessTokens: () => access.clear(),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
