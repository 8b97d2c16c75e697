/**
 * Is this `jti` fresh, and is this assertion's lifetime acceptable (policy/assertions.ts, issue 23
 * defect 5): a client assertion (`private_key_jwt`, RFC 7523 §2.2) is held to the same rules as an
 * ID-JAG or a workload's JWT: its `jti` used once through the store's `useOnce` on every backend and
 * across instances sharing one, an `iat` in the future refused, one `jti` length bound.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../../src/shared/crypto.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { client, ISSUER, makeServer, postToken, RESOURCE, type TestServer } from "../helpers.js";

const TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const CLIENT_ID = "key-client";
const keys = await generateKeyPair("ES256");
const jwk = { ...(await exportJWK(keys.publicKey)), kid: "k1", alg: "ES256" };
const keyClient = client({
  clientId: CLIENT_ID,
  redirectUris: [],
  responseTypes: [],
  grantTypes: ["client_credentials"],
  tokenEndpointAuthMethod: "private_key_jwt",
  jwks: { keys: [jwk] },
});

/** A client assertion signed with the client's key; `claims` override the defaults. */
function clientAssertion(t: TestServer, claims: Record<string, unknown> = {}): Promise<string> {
  const now = Math.floor(t.clock.now / 1000);
  return new SignJWT({
    iss: CLIENT_ID,
    sub: CLIENT_ID,
    aud: `${ISSUER}/token`,
    jti: randomToken(),
    iat: now,
    exp: now + 60,
    ...claims,
  })
    .setProtectedHeader({ alg: "ES256", kid: "k1" })
    .sign(keys.privateKey);
}

const send = (t: TestServer, assertion: string) =>
  postToken(t, {
    grant_type: "client_credentials",
    resource: RESOURCE,
    client_assertion_type: TYPE,
    client_assertion: assertion,
  });

const schemas = schemaNamer("gh_policy_assertions");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "gatehouse-assertions-"));
});
afterAll(async () => {
  await schemas.dropSchemas();
  await rm(dir, { recursive: true, force: true });
});

const stores: [string, () => Promise<AuthorizationStore>][] = [
  ["memory", async () => createMemoryStore()],
  ["SQLite", async () => createSqliteStore({ path: join(dir, `${randomToken(6)}.db`) })],
  [
    "PostgreSQL",
    async () => {
      await requirePostgres();
      return createPostgresStore({ connectionString: POSTGRES_URL, schema: schemas.next() });
    },
  ],
];

describe.each(stores)("a replayed client assertion on %s", (_name, open) => {
  it("is refused within its lifetime (invalid_client), and the first use stands", async () => {
    const store = await open();
    const t = await makeServer({ store, clients: [keyClient] });
    try {
      const assertion = await clientAssertion(t);
      const first = await send(t, assertion);
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      t.clock.advance(30);
      const again = await send(t, assertion);
      expect(again.status).toBe(401);
      expect(again.body).toMatchObject({ error: "invalid_client" });
      expect(again.body.access_token).toBeUndefined();
    } finally {
      await t.server.close();
    }
  });
});

describe("a replayed client assertion across two instances sharing PostgreSQL", () => {
  it("is accepted by exactly one of them, and refused by both afterwards", async () => {
    await requirePostgres();
    const schema = schemas.next();
    const a = await makeServer({
      store: createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      clients: [keyClient],
    });
    const b = await makeServer({
      store: createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      clients: [keyClient],
    });
    try {
      const assertion = await clientAssertion(a);
      const results = await Promise.all([send(a, assertion), send(b, assertion)]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
      expect((await send(a, assertion)).status).toBe(401);
      expect((await send(b, assertion)).status).toBe(401);
    } finally {
      await a.server.close();
      await b.server.close();
    }
  });
});

describe("a client assertion is held to the rules of every other assertion", () => {
  it("hostile: an iat in the future is refused (it would stretch the lifetime bound)", async () => {
    const t = await makeServer({ clients: [keyClient] });
    const now = Math.floor(t.clock.now / 1000);
    const r = await send(t, await clientAssertion(t, { iat: now + 3600, exp: now + 60 }));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
  });

  it("hostile: a jti longer than 255 characters is refused, as for an ID-JAG", async () => {
    const t = await makeServer({ clients: [keyClient] });
    const long = await send(t, await clientAssertion(t, { jti: "j".repeat(256) }));
    expect(long.status).toBe(401);
    expect(long.body.error).toBe("invalid_client");
    const longest = await send(t, await clientAssertion(t, { jti: "j".repeat(255) }));
    expect(longest.status).toBe(200);
  });
});
