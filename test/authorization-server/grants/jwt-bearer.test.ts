/**
 * The JWT bearer grant (RFC 7523) against a real authorization server on loopback, in its two uses:
 * enterprise-managed authorization (ID-JAG, redeemed by Gatehouse's own client through a small
 * identity provider) and workload identity. A second, independent signer (jose) serves its JWKS
 * over HTTPS on loopback and signs the hostile assertions: wrong issuer, audience, client, type,
 * resource or scope; expired or too long-lived; replayed `jti` (also across two server instances on
 * one SQLite file and on one PostgreSQL schema); a key not in the JWKS; `alg` confusion (HS256 with
 * the public key's bytes, `none`).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  decodeJwt,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
  UnsecuredJWT,
} from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { enterpriseManagedGrant, jwtBearerGrant } from "../../../src/client/grants/jwt-bearer.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import type { AuthorizationServerMetadata } from "../../../src/shared/metadata.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";
import { basic, client, memoryLogger } from "../helpers.js";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ID_JAG_TYP = "oauth-id-jag+jwt";
const RESOURCE = "https://notes.example.test/mcp";
const OTHER_RESOURCE = "https://calendar.example.test/mcp";
const IDP = "https://idp.example.test";
const DOWN_IDP = "https://down-idp.example.test";
const WORKLOAD_ISSUER = "https://kubernetes.default.svc";
const MCP_CLIENT = "mcp-client";
const MCP_SECRET = "mcp-client-secret-long-enough";
const OTHER_CLIENT = "other-client";
const OTHER_SECRET = "other-client-secret-long-enough";
const WORKLOAD_CLIENT = "billing-job";
const WORKLOAD_SUBJECT = "system:serviceaccount:billing:exporter";
const SELF_REGISTERED_CLIENT = "gh_self_registered_job";
const SELF_REGISTERED_SUBJECT = "system:serviceaccount:billing:self-registered";

/** The identity provider's signing key (ES256) and the workload issuer's (RS256): the independent signer. */
let idpKey: Awaited<ReturnType<typeof generateKeyPair>>;
let idpJwk: JWK;
let workloadKey: Awaited<ReturnType<typeof generateKeyPair>>;
let jwks: TestHttpsServer;
let jwksFetches = 0;

beforeAll(async () => {
  idpKey = await generateKeyPair("ES256", { extractable: true });
  idpJwk = { ...(await exportJWK(idpKey.publicKey)), kid: "idp-1", alg: "ES256", use: "sig" };
  workloadKey = await generateKeyPair("RS256", { extractable: true });
  jwks = await startTestHttpsServer((req, res) => {
    jwksFetches++;
    if (req.url !== "/jwks.json") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [idpJwk] }));
  });
});

afterAll(async () => {
  await jwks?.close();
});

/** A server on loopback (its issuer is its real address) trusting the IdP and the workload issuer. */
async function startServer(
  store: AuthorizationStore,
  log = memoryLogger(),
): Promise<{ issuer: string; server: AuthorizationServer; http: ListeningServer; close(): Promise<void> }> {
  let handler: AuthorizationServer["fetch"] | undefined;
  const http = await listen((request, info) => handler!(request, info));
  const issuer = http.url;
  const options: AuthorizationServerOptions = {
    issuer,
    allowInsecureLoopback: true,
    store,
    resources: [
      { uri: RESOURCE, scopes: ["notes:read", "notes:write"] },
      { uri: OTHER_RESOURCE, scopes: ["calendar:read"] },
    ],
    clients: [
      client({
        clientId: MCP_CLIENT,
        redirectUris: [],
        responseTypes: [],
        grantTypes: [JWT_BEARER],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(MCP_SECRET),
      }),
      client({
        clientId: OTHER_CLIENT,
        redirectUris: [],
        responseTypes: [],
        grantTypes: [JWT_BEARER],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(OTHER_SECRET),
      }),
      client({ clientId: WORKLOAD_CLIENT, redirectUris: [], responseTypes: [], grantTypes: [JWT_BEARER] }),
      // A client that registered itself, as dynamic registration stores it, mapped below.
      client({
        clientId: SELF_REGISTERED_CLIENT,
        source: "dynamic",
        redirectUris: [],
        responseTypes: [],
        grantTypes: [JWT_BEARER],
      }),
    ],
    enterpriseAuthorization: {
      identityProviders: [
        { issuer: IDP, jwksUri: `${jwks.origin}/jwks.json`, algorithms: ["ES256"] },
        // Its JWKS endpoint answers 404: the provider is "down".
        { issuer: DOWN_IDP, jwksUri: `${jwks.origin}/missing.json` },
      ],
      dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
    },
    workloadIdentity: {
      issuers: [
        {
          issuer: WORKLOAD_ISSUER,
          jwks: { keys: [{ ...(await exportJWK(workloadKey.publicKey)), kid: "wl-1" }] },
          algorithms: ["RS256"],
          subjects: [
            { subject: WORKLOAD_SUBJECT, clientId: WORKLOAD_CLIENT, scopes: ["notes:read"] },
            { subject: SELF_REGISTERED_SUBJECT, clientId: SELF_REGISTERED_CLIENT },
          ],
        },
      ],
    },
    logger: log,
    maintenanceIntervalMs: 0,
  };
  const server = await createAuthorizationServer(options);
  handler = server.fetch;
  return {
    issuer,
    server,
    http,
    async close() {
      await http.close();
      await server.close();
    },
  };
}

/** An ID-JAG as the identity provider signs it; `claims` and `header` override the defaults. */
async function idJag(
  issuer: string,
  claims: JWTPayload = {},
  header: Record<string, unknown> = {},
  key: Parameters<SignJWT["sign"]>[0] = idpKey.privateKey,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: IDP,
    sub: "alice@example.test",
    aud: issuer,
    client_id: MCP_CLIENT,
    resource: RESOURCE,
    scope: "notes:read notes:write",
    jti: randomToken(16),
    iat: now,
    exp: now + 300,
    ...claims,
  })
    .setProtectedHeader({ alg: "ES256", typ: ID_JAG_TYP, kid: "idp-1", ...header })
    .sign(key);
}

async function workloadJwt(issuer: string, claims: JWTPayload = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: WORKLOAD_ISSUER,
    sub: WORKLOAD_SUBJECT,
    aud: issuer,
    jti: randomToken(16),
    iat: now,
    exp: now + 600,
    ...claims,
  })
    .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: "wl-1" })
    .sign(workloadKey.privateKey);
}

async function post(issuer: string, params: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(params),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The ID-JAG redemption as the MCP client sends it (client_secret_basic). */
const redeem = (issuer: string, assertion: string, extra: Record<string, string> = {}) =>
  post(
    issuer,
    { grant_type: JWT_BEARER, assertion, resource: RESOURCE, ...extra },
    basic(MCP_CLIENT, MCP_SECRET),
  );

async function metadataOf(issuer: string): Promise<AuthorizationServerMetadata> {
  return (await (
    await fetch(`${issuer}/.well-known/oauth-authorization-server`)
  ).json()) as AuthorizationServerMetadata;
}

describe("enterprise-managed authorization (ID-JAG)", () => {
  let as: Awaited<ReturnType<typeof startServer>>;
  let idp: ListeningServer;
  const log = memoryLogger();

  beforeAll(async () => {
    as = await startServer(createMemoryStore(), log);
    // A small identity provider: its token endpoint performs the RFC 8693 exchange of the user's ID
    // token for an ID-JAG naming the MCP client, the resource, the audience and the scope asked for.
    idp = await listen(async (request) => {
      const form = new URLSearchParams(await request.text());
      if (
        form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:token-exchange" ||
        form.get("requested_token_type") !== "urn:ietf:params:oauth:token-type:id-jag" ||
        form.get("subject_token") !== "alice-id-token"
      ) {
        return Response.json({ error: "invalid_request" }, { status: 400 });
      }
      const assertion = await idJag(form.get("audience")!, {
        resource: form.get("resource")!,
        ...(form.get("scope") ? { scope: form.get("scope")! } : {}),
      });
      return Response.json({
        access_token: assertion,
        issued_token_type: "urn:ietf:params:oauth:token-type:id-jag",
        token_type: "N_A",
      });
    });
  });

  afterAll(async () => {
    await idp?.close();
    await as?.close();
  });

  it("advertises the jwt-bearer grant", async () => {
    expect((await metadataOf(as.issuer)).grant_types_supported).toContain(JWT_BEARER);
  });

  it("issues a token for the asserted user to Gatehouse's client (enterpriseManagedGrant)", async () => {
    const grant = enterpriseManagedGrant({
      idpTokenEndpoint: `${idp.url}/token`,
      idpClientId: "idp-client",
      idToken: "alice-id-token",
      clientId: MCP_CLIENT,
      clientSecret: MCP_SECRET,
    });
    const { response } = await grant({
      metadata: await metadataOf(as.issuer),
      resource: RESOURCE,
      scope: "notes:read",
      fetch,
    });
    expect(response.token_type.toLowerCase()).toBe("bearer");
    expect(response.refresh_token).toBeUndefined();
    expect(response.scope).toBe("notes:read");
    const claims = decodeJwt(response.access_token);
    expect(claims).toMatchObject({
      iss: as.issuer,
      sub: `${IDP}|alice@example.test`,
      client_id: MCP_CLIENT,
      aud: RESOURCE,
      scope: "notes:read",
    });
    const introspected = await fetch(`${as.issuer}/introspect`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...basic(MCP_CLIENT, MCP_SECRET) },
      body: new URLSearchParams({ token: response.access_token }),
    });
    expect(((await introspected.json()) as { active: boolean }).active).toBe(true);
    const issued = log.lines.find((l) => l.event === "grant_issued");
    expect(issued?.fields).toMatchObject({
      grant_type: JWT_BEARER,
      assertion: "identity_assertion",
      assertion_issuer: IDP,
    });
    expect(jwksFetches).toBeGreaterThan(0);
  });

  it("grants the asserted scopes when the request names none, and never more", async () => {
    const narrow = await redeem(as.issuer, await idJag(as.issuer, { scope: "notes:read" }));
    expect(narrow).toMatchObject({ status: 200, body: { scope: "notes:read" } });
    const wider = await redeem(as.issuer, await idJag(as.issuer, { scope: "notes:read" }), {
      scope: "notes:read notes:write",
    });
    expect(wider).toMatchObject({ status: 400, body: { error: "invalid_scope" } });
  });

  const hostile: [string, (issuer: string) => Promise<string>][] = [
    ["an issuer that is not trusted", (i) => idJag(i, { iss: "https://evil.example.test" })],
    ["another audience", (i) => idJag(i, { aud: "https://other-as.example.test" })],
    [
      "an expired assertion",
      (i) => idJag(i, { iat: Math.floor(Date.now() / 1000) - 900, exp: Math.floor(Date.now() / 1000) - 600 }),
    ],
    ["a lifetime over five minutes", (i) => idJag(i, { exp: Math.floor(Date.now() / 1000) + 900 })],
    [
      "an iat in the future",
      (i) => idJag(i, { iat: Math.floor(Date.now() / 1000) + 200, exp: Math.floor(Date.now() / 1000) + 400 }),
    ],
    ["another client_id", (i) => idJag(i, { client_id: OTHER_CLIENT })],
    ["no jti", (i) => idJag(i, { jti: undefined })],
    ["another resource", (i) => idJag(i, { resource: OTHER_RESOURCE })],
    ["the plain JWT type", (i) => idJag(i, {}, { typ: "JWT" })],
    [
      "a key that is not in the JWKS",
      async (i) => idJag(i, {}, { kid: "idp-2" }, (await generateKeyPair("ES256")).privateKey),
    ],
    [
      "a right kid but another key",
      async (i) => idJag(i, {}, {}, (await generateKeyPair("ES256")).privateKey),
    ],
    [
      "HS256 signed with the public key's bytes (algorithm confusion)",
      async (i) => {
        const now = Math.floor(Date.now() / 1000);
        const pem = new TextEncoder().encode(await exportSPKI(idpKey.publicKey));
        return new SignJWT({
          iss: IDP,
          sub: "alice",
          aud: i,
          client_id: MCP_CLIENT,
          resource: RESOURCE,
          jti: randomToken(16),
          iat: now,
          exp: now + 60,
        })
          .setProtectedHeader({ alg: "HS256", typ: ID_JAG_TYP, kid: "idp-1" })
          .sign(pem);
      },
    ],
    [
      "alg none",
      async (i) => {
        const now = Math.floor(Date.now() / 1000);
        const unsigned = new UnsecuredJWT({
          iss: IDP,
          sub: "alice",
          aud: i,
          client_id: MCP_CLIENT,
          resource: RESOURCE,
          jti: randomToken(16),
          iat: now,
          exp: now + 60,
        }).encode();
        // UnsecuredJWT writes {"alg":"none"}; give it the ID-JAG type so it takes the ID-JAG path.
        const [, payload] = unsigned.split(".");
        const header = Buffer.from(JSON.stringify({ alg: "none", typ: ID_JAG_TYP })).toString("base64url");
        return `${header}.${payload}.`;
      },
    ],
  ];

  for (const [name, make] of hostile) {
    it(`refuses ${name} with invalid_grant`, async () => {
      const { status, body } = await redeem(as.issuer, await make(as.issuer));
      expect({ status, error: body.error }).toEqual({ status: 400, error: "invalid_grant" });
    });
  }

  it("answers 503 temporarily_unavailable when the provider's keys cannot be fetched", async () => {
    const { status, body } = await redeem(as.issuer, await idJag(as.issuer, { iss: DOWN_IDP }));
    expect({ status, error: body.error }).toEqual({ status: 503, error: "temporarily_unavailable" });
  });

  it("refuses a replayed jti, and audits the refusal without the assertion", async () => {
    const assertion = await idJag(as.issuer);
    expect((await redeem(as.issuer, assertion)).status).toBe(200);
    const replay = await redeem(as.issuer, assertion);
    expect(replay).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    const refused = log.lines.filter((l) => l.event === "assertion_refused");
    expect(refused.at(-1)?.fields).toMatchObject({
      client_id: MCP_CLIENT,
      error: "invalid_grant",
      assertion_issuer: IDP,
    });
    expect(JSON.stringify(log.lines)).not.toContain(assertion);
  });

  it("refuses a public client, a resource it does not serve, and the wrong client's credentials", async () => {
    const publicClient = await post(as.issuer, {
      grant_type: JWT_BEARER,
      assertion: await idJag(as.issuer, { client_id: WORKLOAD_CLIENT }),
      resource: RESOURCE,
      client_id: WORKLOAD_CLIENT,
    });
    // A public client is identified, not failed: the grant is not for its kind (policy/grants.ts).
    expect(publicClient).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    const unserved = await redeem(as.issuer, await idJag(as.issuer), {
      resource: "https://unknown.example.test/",
    });
    expect(unserved).toMatchObject({ status: 400, body: { error: "invalid_target" } });
    const otherClient = await post(
      as.issuer,
      { grant_type: JWT_BEARER, assertion: await idJag(as.issuer), resource: RESOURCE },
      basic(OTHER_CLIENT, OTHER_SECRET),
    );
    expect(otherClient).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });
});

describe("workload identity", () => {
  let as: Awaited<ReturnType<typeof startServer>>;

  beforeAll(async () => {
    as = await startServer(createMemoryStore());
  });

  afterAll(async () => {
    await as?.close();
  });

  it("issues a client-credentials-like token to Gatehouse's client (jwtBearerGrant)", async () => {
    const assertion = await workloadJwt(as.issuer);
    const { response } = await jwtBearerGrant({ clientId: WORKLOAD_CLIENT, assertion })({
      metadata: await metadataOf(as.issuer),
      resource: RESOURCE,
      scope: undefined,
      fetch,
    });
    expect(response.refresh_token).toBeUndefined();
    expect(response.scope).toBe("notes:read");
    expect(decodeJwt(response.access_token)).toMatchObject({
      sub: WORKLOAD_CLIENT,
      client_id: WORKLOAD_CLIENT,
      aud: RESOURCE,
      scope: "notes:read",
    });
  });

  const send = (issuer: string, assertion: string, extra: Record<string, string> = {}) =>
    post(issuer, {
      grant_type: JWT_BEARER,
      assertion,
      resource: RESOURCE,
      client_id: WORKLOAD_CLIENT,
      ...extra,
    });

  it("refuses a subject that is not mapped, a wrong audience, a replay and a wider scope", async () => {
    expect(
      await send(as.issuer, await workloadJwt(as.issuer, { sub: "system:serviceaccount:billing:other" })),
    ).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    expect(
      await send(as.issuer, await workloadJwt(as.issuer, { aud: "https://elsewhere.example.test" })),
    ).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    const once = await workloadJwt(as.issuer);
    expect((await send(as.issuer, once)).status).toBe(200);
    expect(await send(as.issuer, once)).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(await send(as.issuer, await workloadJwt(as.issuer), { scope: "notes:write" })).toMatchObject({
      status: 400,
      body: { error: "invalid_scope" },
    });
  });

  it("refuses a mapped workload presenting itself as another client", async () => {
    const { status, body } = await post(
      as.issuer,
      { grant_type: JWT_BEARER, assertion: await workloadJwt(as.issuer), resource: RESOURCE },
      basic(OTHER_CLIENT, OTHER_SECRET),
    );
    expect({ status, error: body.error }).toEqual({ status: 400, error: "invalid_grant" });
  });

  it("refuses a workload acting as a client that registered itself, even a mapped one (unauthorized_client)", async () => {
    const assertion = await workloadJwt(as.issuer, { sub: SELF_REGISTERED_SUBJECT });
    const r = await send(as.issuer, assertion, { client_id: SELF_REGISTERED_CLIENT });
    expect(r).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    expect(r.body.access_token).toBeUndefined();
  });

  it("refuses an ID-JAG-typed token from the workload issuer", async () => {
    const now = Math.floor(Date.now() / 1000);
    const typed = await new SignJWT({
      iss: WORKLOAD_ISSUER,
      sub: WORKLOAD_SUBJECT,
      aud: as.issuer,
      jti: randomToken(16),
      iat: now,
      exp: now + 60,
    })
      .setProtectedHeader({ alg: "RS256", typ: ID_JAG_TYP, kid: "wl-1" })
      .sign(workloadKey.privateKey);
    // Routed to the identity assertion grant, which is not for a public client (policy/grants.ts).
    expect(await send(as.issuer, typed)).toMatchObject({
      status: 400,
      body: { error: "unauthorized_client" },
    });
  });
});

describe("jti single use across instances", () => {
  const schemas = schemaNamer("gh_jwt_bearer");
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gatehouse-jwt-bearer-"));
  });

  afterAll(async () => {
    await schemas.dropSchemas();
    await rm(dir, { recursive: true, force: true });
  });

  async function replayAcross(stores: [AuthorizationStore, AuthorizationStore]) {
    const first = await startServer(stores[0]);
    // The second instance shares the issuer: it is the same server behind a load balancer.
    let handler: AuthorizationServer["fetch"] | undefined;
    const http = await listen((request, info) => handler!(request, info));
    const second = await createAuthorizationServer({
      issuer: first.issuer,
      allowInsecureLoopback: true,
      store: stores[1],
      resources: [{ uri: RESOURCE, scopes: ["notes:read", "notes:write"] }],
      enterpriseAuthorization: {
        identityProviders: [{ issuer: IDP, jwksUri: `${jwks.origin}/jwks.json` }],
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
      logger: memoryLogger(),
      maintenanceIntervalMs: 0,
    });
    handler = second.fetch;
    try {
      const assertion = await idJag(first.issuer);
      const results = await Promise.all([redeem(first.issuer, assertion), redeem(http.url, assertion)]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
      expect(results.find((r) => r.status === 400)?.body.error).toBe("invalid_grant");
      // And later, on either instance, it stays used.
      expect((await redeem(http.url, assertion)).status).toBe(400);
    } finally {
      await http.close();
      await second.close();
      await first.close();
    }
  }

  it("on one SQLite file", async () => {
    const path = join(dir, "gatehouse.db");
    await replayAcross([createSqliteStore({ path }), createSqliteStore({ path })]);
  });

  it("on one PostgreSQL schema", async () => {
    await requirePostgres();
    const schema = schemas.next();
    await replayAcross([
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
    ]);
  });
});

describe("configuration", () => {
  // Only its shape is checked at start-up.
  const publicJwk = {
    kty: "EC",
    crv: "P-256",
    x: "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
    y: "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
  };
  const base = {
    issuer: "https://as.example.test",
    resources: [{ uri: RESOURCE, scopes: ["notes:read"] }],
    logger: memoryLogger(),
    maintenanceIntervalMs: 0,
  };
  it.each([
    [
      "an HMAC algorithm",
      {
        identityProviders: [{ issuer: IDP, jwksUri: "https://idp.example.test/jwks", algorithms: ["HS256"] }],
      },
    ],
    [
      "alg none",
      {
        identityProviders: [{ issuer: IDP, jwksUri: "https://idp.example.test/jwks", algorithms: ["none"] }],
      },
    ],
    [
      "a symmetric key",
      { identityProviders: [{ issuer: IDP, jwks: { keys: [{ kty: "oct", k: "c2VjcmV0" }] } }] },
    ],
    [
      "a plain http JWKS URI",
      { identityProviders: [{ issuer: IDP, jwksUri: "http://idp.example.test/jwks" }] },
    ],
    [
      "both key sources",
      {
        identityProviders: [
          { issuer: IDP, jwksUri: "https://idp.example.test/jwks", jwks: { keys: [publicJwk] } },
        ],
      },
    ],
    [
      "a lifetime over an hour",
      {
        identityProviders: [{ issuer: IDP, jwks: { keys: [publicJwk] } }],
        maxAssertionLifetimeSeconds: 7200,
      },
    ],
  ])("refuses %s at start-up", async (_name, enterpriseAuthorization) => {
    await expect(
      createAuthorizationServer({
        ...base,
        store: createMemoryStore(),
        enterpriseAuthorization:
          enterpriseAuthorization as AuthorizationServerOptions["enterpriseAuthorization"],
      }),
    ).rejects.toMatchObject({ code: "ERR_INVALID_OPTION" });
  });

  it("offers no jwt-bearer grant unless an issuer is trusted", async () => {
    const plain = await createAuthorizationServer({ ...base, store: createMemoryStore() });
    try {
      const response = await plain.fetch(
        new Request("https://as.example.test/.well-known/oauth-authorization-server"),
      );
      expect(
        ((await response.json()) as { grant_types_supported: string[] }).grant_types_supported,
      ).not.toContain(JWT_BEARER);
    } finally {
      await plain.close();
    }
  });
});
