/**
 * Enterprise-managed authorization (ID-JAG) for a Client ID Metadata Document client (issue 21): a
 * client whose document says `private_key_jwt`, with its keys, may redeem an identity assertion
 * naming its user, like a pre-registered confidential client. An ID-JAG acts for a user, so the rule
 * "self-registered clients act for a user" (policy/grants-without-user.ts) lets it through, while a
 * workload's assertion (no user) presented by the same document client is refused, and a document
 * with `none` gets no jwt-bearer grant at all. Real servers on loopback: the authorization server,
 * and an HTTPS server with a test CA serving the documents and the identity provider's JWKS.
 */
import { decodeJwt, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { randomToken } from "../../src/shared/crypto.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../support/tls.js";
import { memoryLogger } from "./helpers.js";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const RESOURCE = "https://notes.example.test/mcp";
const IDP = "https://idp.example.test";
const WORKLOAD_ISSUER = "https://ci.example.test";

let idpKey: Awaited<ReturnType<typeof generateKeyPair>>;
let clientKey: Awaited<ReturnType<typeof generateKeyPair>>;
let workloadKey: Awaited<ReturnType<typeof generateKeyPair>>;
let https: TestHttpsServer;
let http: ListeningServer;
let server: AuthorizationServer;
let issuer: string;
const log = memoryLogger();

/** The documents served, by path: ChatGPT's shape (private_key_jwt, keys) and a public one. */
const KEYED = "/keyed-client.json";
const PUBLIC = "/public-client.json";
const keyedId = () => `${https.origin}${KEYED}`;
const publicId = () => `${https.origin}${PUBLIC}`;

beforeAll(async () => {
  idpKey = await generateKeyPair("ES256", { extractable: true });
  clientKey = await generateKeyPair("RS256", { extractable: true });
  workloadKey = await generateKeyPair("ES256", { extractable: true });
  const idpJwk: JWK = { ...(await exportJWK(idpKey.publicKey)), kid: "idp-1", alg: "ES256" };
  const clientJwk: JWK = { ...(await exportJWK(clientKey.publicKey)), kid: "c-1", alg: "RS256", use: "sig" };
  https = await startTestHttpsServer((req, res) => {
    const send = (body: unknown) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    const common = {
      client_name: "Chat assistant",
      redirect_uris: ["https://chat.example.test/callback"],
      grant_types: ["authorization_code", "refresh_token", JWT_BEARER],
    };
    if (req.url === "/idp-jwks.json") return send({ keys: [idpJwk] });
    if (req.url === KEYED)
      return send({
        ...common,
        client_id: keyedId(),
        token_endpoint_auth_method: "private_key_jwt",
        token_endpoint_auth_signing_alg: "RS256",
        jwks: { keys: [clientJwk] },
      });
    if (req.url === PUBLIC)
      return send({ ...common, client_id: publicId(), token_endpoint_auth_method: "none" });
    res.writeHead(404).end();
  });
  let handler: AuthorizationServer["fetch"] | undefined;
  http = await listen((request, info) => handler!(request, info));
  issuer = http.url;
  server = await createAuthorizationServer({
    issuer,
    allowInsecureLoopback: true,
    store: createMemoryStore(),
    resources: [{ uri: RESOURCE, scopes: ["notes:read", "notes:write"] }],
    clientMetadataDocuments: { enabled: true, dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] } },
    enterpriseAuthorization: {
      identityProviders: [{ issuer: IDP, jwksUri: `${https.origin}/idp-jwks.json`, algorithms: ["ES256"] }],
      dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
    },
    workloadIdentity: {
      issuers: [
        {
          issuer: WORKLOAD_ISSUER,
          jwks: { keys: [{ ...(await exportJWK(workloadKey.publicKey)), kid: "wl-1" }] },
          algorithms: ["ES256"],
          // The operator even maps a workload to the document client: still no grant without a user.
          subjects: [{ subject: "repo:example/app", clientId: keyedId() }],
        },
      ],
    },
    logger: log,
    maintenanceIntervalMs: 0,
  });
  handler = server.fetch;
});

afterAll(async () => {
  await http?.close();
  await server?.close();
  await https?.close();
});

const now = () => Math.floor(Date.now() / 1000);

async function idJag(clientId: string, claims: JWTPayload = {}): Promise<string> {
  return new SignJWT({
    iss: IDP,
    sub: "alice@example.test",
    aud: issuer,
    client_id: clientId,
    resource: RESOURCE,
    scope: "notes:read",
    jti: randomToken(16),
    iat: now(),
    exp: now() + 120,
    ...claims,
  })
    .setProtectedHeader({ alg: "ES256", typ: "oauth-id-jag+jwt", kid: "idp-1" })
    .sign(idpKey.privateKey);
}

/** The client's own private_key_jwt assertion (RFC 7523 §2.2), signed with `key`. */
async function clientAssertion(clientId: string, key = clientKey.privateKey): Promise<string> {
  return new SignJWT({ jti: randomToken(16) })
    .setProtectedHeader({ alg: "RS256", kid: "c-1" })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(`${issuer}/token`)
    .setIssuedAt()
    .setExpirationTime("60s")
    .sign(key);
}

async function token(params: Record<string, string>) {
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ resource: RESOURCE, ...params }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe("ID-JAG for a Client ID Metadata Document client", () => {
  it("a document client authenticating with private_key_jwt redeems an identity assertion for its user", async () => {
    const r = await token({
      grant_type: JWT_BEARER,
      assertion: await idJag(keyedId()),
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await clientAssertion(keyedId()),
    });
    expect(r.status).toBe(200);
    expect(r.body.refresh_token).toBeUndefined();
    expect(decodeJwt(r.body.access_token as string)).toMatchObject({
      sub: `${IDP}|alice@example.test`,
      client_id: keyedId(),
      aud: RESOURCE,
      scope: "notes:read",
    });
  });

  it("refuses the document client's identity assertion under another key's client assertion (invalid_client)", async () => {
    const stranger = await generateKeyPair("RS256");
    const r = await token({
      grant_type: JWT_BEARER,
      assertion: await idJag(keyedId()),
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await clientAssertion(keyedId(), stranger.privateKey),
    });
    expect(r).toMatchObject({ status: 401, body: { error: "invalid_client" } });
  });

  it("a public document listing jwt-bearer is not given the grant (unauthorized_client)", async () => {
    const r = await token({
      grant_type: JWT_BEARER,
      assertion: await idJag(publicId()),
      client_id: publicId(),
    });
    expect(r).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    expect(r.body.access_token).toBeUndefined();
  });

  it("a workload assertion (no user) from the document client is refused even when mapped (unauthorized_client)", async () => {
    const workload = await new SignJWT({ jti: randomToken(16) })
      .setProtectedHeader({ alg: "ES256", typ: "JWT", kid: "wl-1" })
      .setIssuer(WORKLOAD_ISSUER)
      .setSubject("repo:example/app")
      .setAudience(issuer)
      .setIssuedAt()
      .setExpirationTime("60s")
      .sign(workloadKey.privateKey);
    const r = await token({
      grant_type: JWT_BEARER,
      assertion: workload,
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await clientAssertion(keyedId()),
    });
    expect(r).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    const refused = log.lines.find((l) => l.event === "grant_without_user_refused");
    expect(refused?.fields).toMatchObject({
      client_id: keyedId(),
      grant_type: "workload_identity",
      client_source: "metadata-document",
    });
  });
});
