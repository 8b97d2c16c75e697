/**
 * Token exchange for downstream calls (RFC 8693) against a real authorization server on loopback:
 * the resource server's `exchangeToken` helper, the downstream gate (src/resource-server) verifying
 * the exchanged token and its `act` claim, and the hostile cases (unauthenticated client, subject
 * token for another audience, revoked or expired subject token, wider scope, a resource outside
 * the policy, a subject token from another issuer).
 */
import { decodeJwt, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { createResourceServer, exchangeToken, jwtVerifier } from "../../../src/resource-server/index.js";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import { GatehouseError, OAuthError } from "../../../src/shared/errors.js";
import { grantIdOfAccessTokenId } from "../../../src/storage/access-token-id.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { proof, proofKey } from "../dpop-support.js";
import { basic, client, ensureUser, memoryLogger, pkcePair, REDIRECT } from "../helpers.js";

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
// Scope names are shared between the resources: an exchanged token's scopes are a subset of the
// subject token's (never wider), so the downstream resources must know the same names.
const NOTES = "https://notes.example.test/mcp";
const STORAGE = "https://storage.example.test/api";
const ARCHIVE = "https://archive.example.test/api";
const ELSEWHERE = "https://elsewhere.example.test/api";
const APP = "user-app";
const NOTES_SERVICE = "notes-service";
const NOTES_SECRET = "notes-service-secret-long-enough";
const STORAGE_SERVICE = "storage-service";
const STORAGE_SECRET = "storage-service-secret-long-enough";
const PUBLIC_EXCHANGER = "public-exchanger";
/** A client that registered itself (a row as dynamic registration stores it), named by a policy. */
const SELF_REGISTERED = "gh_self_registered_service";
const SELF_REGISTERED_SECRET = "self-registered-secret-long-enough";

let http: ListeningServer;
let server: AuthorizationServer;
let issuer: string;
const store = createMemoryStore();
const log = memoryLogger();
const clock = { now: Date.now() };

beforeAll(async () => {
  let handler: AuthorizationServer["fetch"] | undefined;
  http = await listen((request, info) => handler!(request, info));
  issuer = http.url;
  const service = (
    clientId: string,
    secret: string,
    tokenEndpointAuthMethod: "client_secret_basic" | "client_secret_post" = "client_secret_basic",
  ) =>
    client({
      clientId,
      redirectUris: [],
      responseTypes: [],
      grantTypes: [TOKEN_EXCHANGE],
      tokenEndpointAuthMethod,
      clientSecretHash: sha256Base64url(secret),
    });
  server = await createAuthorizationServer({
    issuer,
    allowInsecureLoopback: true,
    store,
    resources: [
      { uri: NOTES, scopes: ["files:read", "files:write"] },
      { uri: STORAGE, scopes: ["files:read", "files:write"] },
      { uri: ARCHIVE, scopes: ["files:read"] },
      { uri: ELSEWHERE, scopes: ["files:read"] },
    ],
    clients: [
      client({ clientId: APP }),
      service(NOTES_SERVICE, NOTES_SECRET),
      service(STORAGE_SERVICE, STORAGE_SECRET, "client_secret_post"),
      client({ clientId: PUBLIC_EXCHANGER, grantTypes: [TOKEN_EXCHANGE] }),
      { ...service(SELF_REGISTERED, SELF_REGISTERED_SECRET), source: "dynamic" },
    ],
    tokenExchange: {
      policies: [
        { clientId: NOTES_SERVICE, fromResource: NOTES, toResources: [STORAGE] },
        { clientId: STORAGE_SERVICE, fromResource: STORAGE, toResources: [ARCHIVE], scopes: ["files:read"] },
        { clientId: PUBLIC_EXCHANGER, fromResource: NOTES, toResources: [STORAGE] },
        { clientId: SELF_REGISTERED, fromResource: NOTES, toResources: [STORAGE] },
      ],
    },
    logger: log,
    now: () => clock.now,
    maintenanceIntervalMs: 0,
  });
  handler = server.fetch;
});

afterAll(async () => {
  await http.close();
  await server.close();
});

async function post(path: string, params: Record<string, string>, headers: Record<string, string> = {}) {
  const response = await fetch(`${issuer}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(params),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

/** A user's access token for `resource`, through a real code redemption by the public app. */
async function userToken(resource = NOTES, scopes = ["files:read", "files:write"]): Promise<string> {
  const { verifier, challenge } = pkcePair();
  const code = randomToken();
  await ensureUser(store, "alice");
  await store.insertAuthorizationCode({
    codeHash: sha256Base64url(code),
    grantId: randomToken(16),
    clientId: APP,
    userId: "alice",
    redirectUri: REDIRECT,
    redirectUriSent: true,
    scopes,
    resource,
    codeChallenge: challenge,
    codeChallengeMethod: "S256",
    refreshAllowed: false,
    createdAt: clock.now,
    expiresAt: clock.now + 60_000,
  });
  const { status, body } = await post("/token", {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: REDIRECT,
    resource,
    client_id: APP,
  });
  expect(status).toBe(200);
  return body.access_token as string;
}

/** A token exchange request by the notes service; a parameter given as undefined is not sent. */
const exchange = (
  subjectToken: string,
  extra: Record<string, string | undefined> = {},
  headers: Record<string, string> = basic(NOTES_SERVICE, NOTES_SECRET),
) => {
  const params: Record<string, string | undefined> = {
    grant_type: TOKEN_EXCHANGE,
    subject_token: subjectToken,
    subject_token_type: ACCESS_TOKEN_TYPE,
    resource: STORAGE,
    ...extra,
  };
  const sent = Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined);
  return post("/token", Object.fromEntries(sent), headers);
};

/** The real gate of a downstream resource, verifying against the server's JWKS. */
function gateFor(resource: string) {
  return createResourceServer({
    resource,
    authorizationServers: [issuer],
    verifier: jwtVerifier({ issuer, audience: resource, jwksUri: `${issuer}/jwks.json` }),
  });
}

const bearer = (resource: string, token: string) =>
  new Request(resource, { headers: { authorization: `Bearer ${token}` } });

describe("token exchange (RFC 8693)", () => {
  it("is listed in grant_types_supported when a policy is configured", async () => {
    const metadata = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: string[];
    };
    expect(metadata.grant_types_supported).toContain(TOKEN_EXCHANGE);
    expect(metadata.grant_types_supported).not.toContain("urn:ietf:params:oauth:grant-type:jwt-bearer");
  });

  it("exchanges a user's token for one the downstream gate accepts, with act naming the service", async () => {
    const subject = await userToken();
    const exchanged = await exchangeToken({
      tokenEndpoint: `${issuer}/token`,
      clientAuth: { clientId: NOTES_SERVICE, clientSecret: NOTES_SECRET },
      subjectToken: subject,
      resource: STORAGE,
      scope: ["files:read"],
    });
    expect(exchanged.issuedTokenType).toBe(ACCESS_TOKEN_TYPE);
    expect(exchanged.tokenType).toBe("Bearer");
    expect(exchanged.scopes).toEqual(["files:read"]);
    const auth = await gateFor(STORAGE).authenticate(bearer(STORAGE, exchanged.accessToken), ["files:read"]);
    expect(auth.subject).toBe("alice");
    expect(auth.clientId).toBe(NOTES_SERVICE);
    expect(auth.claims?.aud).toBe(STORAGE);
    expect(auth.claims?.act).toEqual({ sub: NOTES_SERVICE });
    // The exchanged token is for the downstream resource only: the upstream gate refuses it.
    await expect(gateFor(NOTES).authenticate(bearer(NOTES, exchanged.accessToken))).rejects.toMatchObject({
      code: "invalid_token",
    });
    const event = log.lines.find((l) => l.event === "token_exchanged");
    expect(event?.fields).toMatchObject({
      client_id: NOTES_SERVICE,
      subject_client_id: APP,
      from_resource: NOTES,
      to_resource: STORAGE,
    });
    expect(JSON.stringify(log.lines)).not.toContain(subject);
  });

  it("answers with issued_token_type, the subject's scopes by default and no refresh token", async () => {
    const { status, body } = await exchange(await userToken());
    expect(status).toBe(200);
    expect(body.issued_token_type).toBe(ACCESS_TOKEN_TYPE);
    expect(body.token_type).toBe("Bearer");
    expect(body.scope).toBe("files:read files:write");
    expect(body.refresh_token).toBeUndefined();
  });

  it("nests act when an exchanged token is exchanged again (RFC 8693 §4.1)", async () => {
    const first = await exchange(await userToken());
    const second = await exchangeToken({
      tokenEndpoint: `${issuer}/token`,
      clientAuth: { clientId: STORAGE_SERVICE, clientSecret: STORAGE_SECRET, method: "client_secret_post" },
      subjectToken: first.body.access_token as string,
      resource: ARCHIVE,
    });
    // The policy caps the archive at files:read, though the subject token also had files:write.
    expect(second.scopes).toEqual(["files:read"]);
    const auth = await gateFor(ARCHIVE).authenticate(bearer(ARCHIVE, second.accessToken), ["files:read"]);
    expect(auth.subject).toBe("alice");
    expect(auth.claims?.act).toEqual({ sub: STORAGE_SERVICE, act: { sub: NOTES_SERVICE } });
  });

  it("takes audience as the target, and refuses resource and audience that disagree", async () => {
    const subject = await userToken();
    const byAudience = await exchange(subject, { audience: STORAGE, resource: undefined });
    expect(byAudience.status).toBe(200);
    const both = await exchange(subject, { audience: ARCHIVE });
    expect(both).toMatchObject({ status: 400, body: { error: "invalid_target" } });
  });

  it("never lets the new token outlive the subject token", async () => {
    const subject = await userToken();
    clock.now += 200_000;
    try {
      const { status, body } = await exchange(subject);
      expect(status).toBe(200);
      expect(body.expires_in).toBeLessThanOrEqual(100);
    } finally {
      clock.now -= 200_000;
    }
  });
});

describe("token exchange with DPoP (RFC 9449)", () => {
  it("binds the exchanged token to the key of the proof the service sent", async () => {
    const key = await proofKey();
    const { status, body } = await exchange(
      await userToken(),
      {},
      {
        ...basic(NOTES_SERVICE, NOTES_SECRET),
        dpop: await proof(key, `${issuer}/token`, clock.now),
      },
    );
    expect(status).toBe(200);
    expect(body.token_type).toBe("DPoP");
    expect(decodeJwt(body.access_token as string)).toMatchObject({
      cnf: { jkt: key.jkt },
      act: { sub: NOTES_SERVICE },
    });
  });
});

describe("token exchange: hostile requests", () => {
  it("refuses a client that does not authenticate", async () => {
    const subject = await userToken();
    // A public client is identified, not failed: the grant is not for its kind (policy/grants.ts).
    const publicClient = await exchange(subject, { client_id: PUBLIC_EXCHANGER }, {});
    expect(publicClient).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    const wrongSecret = await exchange(subject, {}, basic(NOTES_SERVICE, "not-the-secret"));
    expect(wrongSecret).toMatchObject({ status: 401, body: { error: "invalid_client" } });
    const noCredentials = await exchange(subject, { client_id: NOTES_SERVICE }, {});
    expect(noCredentials).toMatchObject({ status: 401, body: { error: "invalid_client" } });
  });

  it("refuses a client that registered itself, even one a policy names (unauthorized_client, audited)", async () => {
    const subject = await userToken();
    const r = await exchange(subject, {}, basic(SELF_REGISTERED, SELF_REGISTERED_SECRET));
    expect(r).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    expect(r.body.access_token).toBeUndefined();
    const refused = log.lines.find((l) => l.event === "grant_without_user_refused");
    expect(refused?.fields).toMatchObject({ client_id: SELF_REGISTERED, grant_type: "token_exchange" });
  });

  it("refuses a subject token issued for a resource the client does not serve", async () => {
    const storageToken = await userToken(STORAGE);
    const { status, body } = await exchange(storageToken);
    expect(status).toBe(400);
    expect(body.error).toBe("invalid_request");
  });

  it("refuses a revoked subject token", async () => {
    const subject = await userToken();
    const revoked = await post("/revoke", { token: subject, client_id: APP });
    expect(revoked.status).toBe(200);
    expect(await exchange(subject)).toMatchObject({ status: 400, body: { error: "invalid_request" } });
  });

  it("refuses exchanging again a token exchanged from a grant since revoked; the derived token is revoked too", async () => {
    const subject = await userToken();
    const first = await exchange(subject);
    expect(first.status).toBe(200);
    const derived = first.body.access_token as string;
    // The user's grant goes (the account page, the admin page, a reused refresh token...).
    expect(await store.revokeGrant(grantIdOfAccessTokenId(tokenId(subject))!, clock.now)).toBe(true);
    // RFC 7009 §2.1: what was derived from the grant goes with it.
    expect((await store.getGrant(grantIdOfAccessTokenId(tokenId(derived))!))?.revokedAt).toBeDefined();
    const again = await post(
      "/token",
      {
        grant_type: TOKEN_EXCHANGE,
        subject_token: derived,
        subject_token_type: ACCESS_TOKEN_TYPE,
        resource: ARCHIVE,
        client_id: STORAGE_SERVICE,
        client_secret: STORAGE_SECRET,
      },
      {},
    );
    expect(again).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    expect(again.body.access_token).toBeUndefined();
  });

  it("refuses an expired subject token", async () => {
    const subject = await userToken();
    clock.now += 301_000;
    try {
      expect(await exchange(subject)).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    } finally {
      clock.now -= 301_000;
    }
  });

  it("refuses a scope wider than the subject token's, also through the helper", async () => {
    const readOnly = await userToken(NOTES, ["files:read"]);
    expect(await exchange(readOnly, { scope: "files:read files:write" })).toMatchObject({
      status: 400,
      body: { error: "invalid_scope" },
    });
    const error = await exchangeToken({
      tokenEndpoint: `${issuer}/token`,
      clientAuth: { clientId: NOTES_SERVICE, clientSecret: NOTES_SECRET },
      subjectToken: readOnly,
      resource: STORAGE,
      scope: "files:write",
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).code).toBe("invalid_scope");
    expect((error as Error).message).not.toContain(readOnly);
  });

  it("refuses a target outside the client's policy, and one this server does not serve", async () => {
    const subject = await userToken();
    expect(await exchange(subject, { resource: ELSEWHERE })).toMatchObject({
      status: 400,
      body: { error: "invalid_target" },
    });
    expect(await exchange(subject, { resource: "https://unknown.example.test/x" })).toMatchObject({
      status: 400,
      body: { error: "invalid_target" },
    });
    const helper = await exchangeToken({
      tokenEndpoint: `${issuer}/token`,
      clientAuth: { clientId: NOTES_SERVICE, clientSecret: NOTES_SECRET },
      subjectToken: subject,
      resource: ARCHIVE,
    }).catch((e: unknown) => e);
    expect((helper as OAuthError).code).toBe("invalid_target");
  });

  it("refuses a subject token signed by another issuer with the same claims", async () => {
    const { privateKey } = await generateKeyPair("ES256");
    const now = Math.floor(clock.now / 1000);
    const forged = await new SignJWT({
      sub: "alice",
      client_id: APP,
      aud: NOTES,
      scope: "files:read",
      jti: randomToken(16),
    })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "forged" })
      .setIssuer(issuer)
      .setIssuedAt(now)
      .setExpirationTime(now + 300)
      .sign(privateKey);
    expect(await exchange(forged)).toMatchObject({ status: 400, body: { error: "invalid_request" } });
  });

  it("refuses other token types, actor tokens and a missing target", async () => {
    const subject = await userToken();
    const idToken = await exchange(subject, {
      subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
    });
    expect(idToken).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    const actor = await exchange(subject, { actor_token: subject, actor_token_type: ACCESS_TOKEN_TYPE });
    expect(actor).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    const refreshWanted = await exchange(subject, {
      requested_token_type: "urn:ietf:params:oauth:token-type:refresh_token",
    });
    expect(refreshWanted).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    const { status, body } = await post(
      "/token",
      { grant_type: TOKEN_EXCHANGE, subject_token: subject, subject_token_type: ACCESS_TOKEN_TYPE },
      basic(NOTES_SERVICE, NOTES_SECRET),
    );
    expect({ status, error: body.error }).toEqual({ status: 400, error: "invalid_request" });
  });

  it("the helper reports a non-JSON answer and an oversized answer as GatehouseErrors", async () => {
    const junk = await listen(async () => new Response("<html>oops</html>", { status: 502 }));
    const huge = await listen(async () => new Response(`{"a":"${"x".repeat(200_000)}"}`));
    try {
      const options = {
        clientAuth: { clientId: NOTES_SERVICE, clientSecret: NOTES_SECRET },
        subjectToken: "t",
        resource: STORAGE,
      };
      const notJson = await exchangeToken({ ...options, tokenEndpoint: `${junk.url}/token` }).catch((e) => e);
      expect(notJson).toBeInstanceOf(GatehouseError);
      expect((notJson as GatehouseError).code).toBe("bad_body");
      const tooLarge = await exchangeToken({ ...options, tokenEndpoint: `${huge.url}/token` }).catch(
        (e) => e,
      );
      expect((tooLarge as GatehouseError).code).toBe("too_large");
    } finally {
      await junk.close();
      await huge.close();
    }
  });
});

describe("token exchange is off by default", () => {
  it("is not offered without a policy", async () => {
    const plain = await createAuthorizationServer({
      issuer: "https://as.example.test",
      store: createMemoryStore(),
      resources: [{ uri: NOTES, scopes: ["files:read"] }],
      clients: [client({ clientId: NOTES_SERVICE, grantTypes: [TOKEN_EXCHANGE] })],
      logger: memoryLogger(),
      maintenanceIntervalMs: 0,
    });
    try {
      const metadata = (await (
        await plain.fetch(new Request("https://as.example.test/.well-known/oauth-authorization-server"))
      ).json()) as { grant_types_supported: string[] };
      expect(metadata.grant_types_supported).not.toContain(TOKEN_EXCHANGE);
      const response = await plain.fetch(
        new Request("https://as.example.test/token", {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ grant_type: TOKEN_EXCHANGE, client_id: NOTES_SERVICE }),
        }),
      );
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: string }).error).toBe("unsupported_grant_type");
    } finally {
      await plain.close();
    }
  });

  it("refuses a policy naming a resource the server does not serve, at start-up", async () => {
    await expect(
      createAuthorizationServer({
        issuer: "https://as.example.test",
        store: createMemoryStore(),
        resources: [{ uri: NOTES, scopes: ["files:read"] }],
        tokenExchange: { policies: [{ clientId: "x", fromResource: NOTES, toResources: [STORAGE] }] },
        logger: memoryLogger(),
        maintenanceIntervalMs: 0,
      }),
    ).rejects.toMatchObject({ code: "ERR_INVALID_OPTION" });
  });
});

/** The `jti` of one of this server's access tokens (read without verification: the store has the record). */
function tokenId(token: string): string {
  return JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).jti as string;
}
