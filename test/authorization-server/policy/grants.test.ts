/**
 * Which grant types a client may use (policy/grants.ts): "this grant needs a client that
 * authenticates" is one answer, `unauthorized_client` (RFC 6749 §5.2: the client is not allowed
 * this grant type), for client_credentials, token exchange and the identity assertion grant alike
 * (issue 23 defect 4: two of them answered 401 invalid_client).
 */
import { exportJWK, generateKeyPair } from "jose";
import { describe, expect, it } from "vitest";
import { client, makeServer, postToken, RESOURCE, type TestServer } from "../helpers.js";

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const IDP = "https://idp.example.test";

/** An unsigned JWT with the ID-JAG `typ`: the grant must refuse the client before it reads it. */
function idJagShaped(): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "ES256", typ: "oauth-id-jag+jwt" })}.${part({ iss: IDP, sub: "u" })}.sig`;
}

async function serverWithPublicClient(): Promise<TestServer> {
  const { publicKey } = await generateKeyPair("ES256");
  return makeServer({
    clients: [
      // A public client that declared every grant: only the confidential-client rule stands in the way.
      client({
        clientId: "public-everything",
        redirectUris: [],
        responseTypes: [],
        grantTypes: ["client_credentials", TOKEN_EXCHANGE, JWT_BEARER],
      }),
    ],
    tokenExchange: {
      policies: [{ clientId: "public-everything", fromResource: RESOURCE, toResources: [RESOURCE] }],
    },
    enterpriseAuthorization: {
      identityProviders: [{ issuer: IDP, jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: "k" }] } }],
    },
  });
}

describe("a grant for confidential clients only answers a public client unauthorized_client (400)", () => {
  it.each([
    ["client_credentials", { grant_type: "client_credentials", resource: RESOURCE }],
    [
      "token exchange",
      {
        grant_type: TOKEN_EXCHANGE,
        subject_token: "x.y.z",
        subject_token_type: "urn:ietf:params:oauth:token-type:access_token",
        resource: RESOURCE,
      },
    ],
    [
      "the identity assertion grant",
      { grant_type: JWT_BEARER, assertion: idJagShaped(), resource: RESOURCE },
    ],
  ])("%s", async (_name, params) => {
    const t = await serverWithPublicClient();
    const r = await postToken(t, { ...params, client_id: "public-everything" });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({
      error: "unauthorized_client",
      error_description: "this grant is for clients that authenticate (a secret or a private key)",
    });
    expect(r.headers.get("www-authenticate")).toBeNull();
    expect(r.body.access_token).toBeUndefined();
  });
});
