/**
 * Interop: a third-party authorization server (oidc-provider 9, `features.dPoP`) issues
 * DPoP-bound JWT access tokens (client credentials, RFC 8707 resource indicator) that Gatehouse's
 * gate accepts with the DPoP scheme and a proof by the bound key, and refuses as Bearer or with
 * another key's proof. Everything on loopback.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import Provider from "oidc-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDPoPKey, DPoPSigner } from "../../src/client/protocol/dpop.js";
import { nodeRequireBearer } from "../../src/http/node.js";
import { createResourceServer, jwtVerifier } from "../../src/resource-server/index.js";
import { findChallenge, parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { craftProof, proofKey } from "./dpop-support.js";

function listenOn(server: Server): Promise<string> {
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

const CLIENT_ID = "dpop-service";
const CLIENT_SECRET = "dpop-service-secret-0123456789";

let asServer: Server;
let rsServer: Server;
let issuer: string;
let resource: string;
let signer: DPoPSigner;

beforeAll(async () => {
  const ec = await generateKeyPair("ES256", { extractable: true });
  const signingJwk = { ...(await exportJWK(ec.privateKey)), kid: "ec-1", alg: "ES256", use: "sig" } as JWK;
  const publicJwk = { ...(await exportJWK(ec.publicKey)), kid: "ec-1", alg: "ES256", use: "sig" } as JWK;

  rsServer = createServer();
  const rsBase = await listenOn(rsServer);
  resource = `${rsBase}/mcp`;
  asServer = createServer();
  issuer = await listenOn(asServer);

  const provider = new Provider(issuer, {
    jwks: { keys: [signingJwk] },
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: "client_secret_basic",
        // The provider holds only an ES256 key (its default for ID tokens is RS256).
        id_token_signed_response_alg: "ES256",
      },
    ],
    features: {
      clientCredentials: { enabled: true },
      // No user interaction in this grant; off, so the provider does not warn about it.
      devInteractions: { enabled: false },
      dPoP: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, indicator: string) => {
          if (indicator !== resource) throw new Error("unknown resource");
          return {
            scope: "read",
            audience: resource,
            accessTokenTTL: 300,
            accessTokenFormat: "jwt",
            jwt: { sign: { alg: "ES256" } },
          };
        },
      },
    },
  });
  provider.on("server_error", () => {});
  asServer.on("request", provider.callback());

  const gate = createResourceServer({
    resource,
    authorizationServers: [issuer],
    verifier: jwtVerifier({ issuer, audience: resource, jwks: { keys: [publicJwk] } }),
    dpop: { policy: "allowed" },
  });
  rsServer.on(
    "request",
    nodeRequireBearer(gate, { scopes: ["read"] }, (_req, res, auth) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ client: auth.clientId, jkt: auth.dpopJkt }));
    }),
  );
  signer = new DPoPSigner(await createDPoPKey(issuer, CLIENT_ID));
});

afterAll(async () => {
  await Promise.all([stop(asServer), stop(rsServer)]);
});

/** A client-credentials token from oidc-provider, bound to the signer's key with a token-endpoint proof. */
async function boundAccessToken(): Promise<{ access_token: string; token_type: string }> {
  const tokenUrl = `${issuer}/token`;
  const response = await fetch(tokenUrl, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
      dpop: await signer.proof("POST", tokenUrl),
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope: "read", resource }),
  });
  const body = await response.json();
  expect(response.status, JSON.stringify(body)).toBe(200);
  return body;
}

describe("oidc-provider's DPoP-bound JWT access tokens at the gate", () => {
  it("are accepted with the DPoP scheme and a proof by the bound key", async () => {
    const tokens = await boundAccessToken();
    expect(tokens.token_type).toBe("DPoP");
    const url = `${resource}?q=1`;
    const res = await fetch(url, {
      headers: {
        authorization: `DPoP ${tokens.access_token}`,
        dpop: await signer.proof("GET", url, tokens.access_token),
      },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ client: CLIENT_ID, jkt: await signer.thumbprint() });
  });

  it("are refused as Bearer, and with another key's proof", async () => {
    const tokens = await boundAccessToken();
    const asBearer = await fetch(resource, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(asBearer.status).toBe(401);
    const bearerChallenges = parseWWWAuthenticate(asBearer.headers.get("www-authenticate") ?? "");
    expect(findChallenge(bearerChallenges, "Bearer")?.params.error).toBe("invalid_token");

    const thief = await proofKey();
    const stolen = await fetch(resource, {
      headers: {
        authorization: `DPoP ${tokens.access_token}`,
        dpop: await craftProof(thief, { url: resource, accessToken: tokens.access_token }),
      },
    });
    expect(stolen.status).toBe(401);
    const challenges = parseWWWAuthenticate(stolen.headers.get("www-authenticate") ?? "");
    expect(findChallenge(challenges, "DPoP")?.params.error).toBe("invalid_token");
  });
});
