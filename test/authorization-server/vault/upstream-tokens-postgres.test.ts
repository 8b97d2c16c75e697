/**
 * Kept upstream tokens across two Gatehouse instances on one PostgreSQL schema behind one address:
 * a sign-in through oidc-provider at one instance, the code redeemed at the other, and then, when the
 * upstream access token is due, resource-server requests raced at both instances refresh it at the
 * provider exactly once (a rotated refresh token is never sent twice), all answered with the same
 * new token; the grant's revocation at one instance ends it at both.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { silentLogger } from "../../../src/shared/log.js";
import { generateKeyEncryptionKey } from "../../../src/shared/secret-envelope.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { testTls } from "../../support/tls.js";
import { Agent, hiddenFields, makeClient } from "../pages/harness.js";
import {
  type InstancesBehindOneAddress,
  instancesBehindOneAddress,
  RESOURCE,
  registerMcpClient,
  UPSTREAM_CLIENT_ID,
  UPSTREAM_CLIENT_SECRET,
} from "../upstream/support.js";
import { type RefreshingOidcProvider, startRefreshingOidcProvider, walkProvider } from "./tokens-support.js";

const schemas = schemaNamer("upstream_tokens");
const NOTES_RS = { clientId: "notes-rs", clientSecret: "notes-rs-secret-0123456789" };
const HOUR = 3600_000;
let corp: RefreshingOidcProvider;
let pool: InstancesBehindOneAddress;
let skew = 0;

beforeAll(async () => {
  await requirePostgres();
  const schema = schemas.next();
  const kek = generateKeyEncryptionKey();
  pool = await instancesBehindOneAddress();
  corp = await startRefreshingOidcProvider([`${pool.front.url}/upstream/corp/callback`]);
  for (let i = 0; i < 2; i++) {
    await pool.add(createPostgresStore({ connectionString: POSTGRES_URL, schema }), {
      issuer: pool.front.url,
      resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read"] }],
      allowInsecureLoopback: true,
      logger: silentLogger,
      maintenanceIntervalMs: 0,
      now: () => Date.now() + skew,
      accessTokenTtlSeconds: 86_400,
      keyEncryptionKeys: [kek],
      clients: [
        makeClient({
          clientId: NOTES_RS.clientId,
          redirectUris: [],
          responseTypes: [],
          grantTypes: [],
          tokenEndpointAuthMethod: "client_secret_basic",
          clientSecretHash: sha256Base64url(NOTES_RS.clientSecret),
        }),
      ],
      upstreamSignIn: {
        providers: [
          {
            id: "corp",
            kind: "oidc",
            issuer: corp.issuer,
            clientId: UPSTREAM_CLIENT_ID,
            clientSecret: UPSTREAM_CLIENT_SECRET,
            createAccounts: true,
            keepTokens: { resourceServers: [{ clientId: NOTES_RS.clientId, resource: RESOURCE }] },
          },
        ],
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
    });
  }
});
afterAll(async () => {
  await pool?.close();
  await corp?.close();
  await schemas.dropSchemas();
});

/** A resource server's request for the upstream token, sent to instance `i`. */
async function upstreamTokenAt(
  i: number,
  subjectToken: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await pool.instances[i]!.fetch(
    new Request(`${pool.front.url}/upstream/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${NOTES_RS.clientId}:${NOTES_RS.clientSecret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ subject_token: subjectToken, provider: "corp" }),
    }),
  );
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe("upstream tokens across two instances on PostgreSQL", () => {
  it("a due token raced at both instances is refreshed at the provider once; a revocation at one ends it at both", async () => {
    pool.target = 0;
    const client = await registerMcpClient(pool.front.url);
    const agent = new Agent(pool.front.url);
    const toLogin = await agent.get(client.authorizeUrl("across").replace(pool.front.url, ""));
    const login = await agent.get(toLogin.headers.get("location")!);
    const started = await agent.post("/login", { ...hiddenFields(await login.text()), upstream: "corp" });
    const callback = await walkProvider(started.headers.get("location")!, "ada");
    const done = await agent.get(callback);
    const consent = await agent.get(done.headers.get("location")!);
    const approved = await agent.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    pool.target = 1;
    const tokens = await client.redeem(new URL(approved.headers.get("location")!).searchParams.get("code")!);
    expect(tokens.status).toBe(200);
    const accessToken = String(tokens.body.access_token);

    const first = await upstreamTokenAt(0, accessToken);
    expect(first.status).toBe(200);
    expect((await upstreamTokenAt(1, accessToken)).body.access_token).toBe(first.body.access_token);

    const before = corp.tokenRequests.length;
    skew = 2 * HOUR;
    try {
      const answers = await Promise.all([0, 1, 0, 1, 0, 1].map((i) => upstreamTokenAt(i, accessToken)));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(new Set(answers.map((a) => a.body.access_token)).size).toBe(1);
      expect(answers[0]!.body.access_token).not.toBe(first.body.access_token);
      expect(corp.tokenRequests.slice(before)).toEqual(["refresh_token"]);
    } finally {
      skew = 0;
    }

    pool.target = 0;
    const revoked = await fetch(`${pool.front.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: client.clientId, token: String(tokens.body.refresh_token) }),
    });
    expect(revoked.status).toBe(200);
    for (const i of [0, 1]) {
      const after = await upstreamTokenAt(i, accessToken);
      expect(after.status).toBe(400);
      expect(after.body.error).toBe("invalid_request");
    }
  });
});
