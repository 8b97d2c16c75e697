/**
 * Expired codes, tokens and registrations are purged without touching live grants (issue 5 "Faults
 * and durability"), through the server's own maintenance job, on SQLite and PostgreSQL. The clock
 * is the server's `now` option; everything else is real HTTP on loopback.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationServer } from "../../src/authorization-server/index.js";
import type { ListeningServer } from "../../src/http/node.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { codeHash } from "../support/fault-server.js";
import { obtainCode, redeemCode, refreshGrant, tokenSet } from "../support/flow.js";
import { serveInProcess, testFlow } from "../support/in-process.js";
import {
  CLIENT_ID,
  createTestDatabase,
  createUsers,
  REDIRECT_URI,
  testClient,
} from "../support/instances.js";

interface Backend {
  store: AuthorizationStore;
  codeExists(hash: string): Promise<boolean>;
  cleanup(): Promise<void>;
}

const backends: Record<string, () => Promise<Backend>> = {
  SQLite: async () => {
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-purge-"));
    const store = createSqliteStore({ path: join(dir, "gatehouse.sqlite") });
    return {
      store,
      async codeExists(hash) {
        return (
          store.database.prepare("SELECT 1 FROM authorization_codes WHERE code_hash = ?").get(hash) !==
          undefined
        );
      },
      async cleanup() {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
  PostgreSQL: async () => {
    const db = await createTestDatabase("purge");
    const store = createPostgresStore({ connectionString: db.url });
    return {
      store,
      async codeExists(hash) {
        const rows = await store.pool.query(
          "SELECT 1 FROM gatehouse.authorization_codes WHERE code_hash = $1",
          [hash],
        );
        return (rows.rowCount ?? 0) > 0;
      },
      async cleanup() {
        await store.close();
        await db.drop();
      },
    };
  },
};

const MINUTE = 60_000;

describe.each(Object.keys(backends))("purge on %s", (name) => {
  let backend: Backend;
  let server: AuthorizationServer;
  let http: ListeningServer;
  const clock = { now: Date.now() };
  let username: string;

  beforeAll(async () => {
    backend = await backends[name]!();
    await backend.store.migrate();
    await backend.store.createClient(testClient());
    [username] = (await createUsers(backend.store, "purge", 1)) as [string];
    ({ server, http } = await serveInProcess(backend.store, {
      refreshTokens: { idleTtlSeconds: 60 * 60, absoluteTtlSeconds: 24 * 60 * 60 },
      dynamicRegistration: { unusedTtlSeconds: 10 * 60 },
      now: () => clock.now,
    }));
  }, 60_000);

  afterAll(async () => {
    await http?.close();
    await server?.close();
    await backend?.cleanup();
  });

  const flow = () => testFlow(() => http.url, username);

  it("expired codes, idle refresh tokens and unused registrations go; a live grant keeps working", async () => {
    const t0 = clock.now;
    // A live grant (refreshed along the way), a grant left idle, a code never redeemed, a registration never used.
    const live = await obtainCode(flow());
    let liveRefresh = (await tokenSet(await redeemCode(http.url, flow(), live))).refresh_token!;
    // Its own sign-in: a grant of the live one's sign-in covering its scopes would supersede it.
    const idle = await obtainCode(flow());
    const idleRefresh = (await tokenSet(await redeemCode(http.url, flow(), idle))).refresh_token!;
    const unredeemed = await obtainCode({ ...flow(), browser: live.browser });
    const registered = await fetch(`${http.url}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: "none",
        client_name: "unused",
      }),
    });
    expect(registered.status).toBe(201);
    const unusedClientId = ((await registered.json()) as { client_id: string }).client_id;
    const liveGrantId = (await backend.store.getRefreshToken(hashOf(liveRefresh)))!.grantId;

    clock.now = t0 + 30 * MINUTE;
    liveRefresh = (await tokenSet(await refreshGrant(http.url, CLIENT_ID, liveRefresh))).refresh_token!;
    // Past the idle refresh token (60 min), the code (60 s), the registration (10 min), the first access tokens (5 min).
    clock.now = t0 + 70 * MINUTE;
    await server.purgeExpired();

    expect(await backend.codeExists(codeHash(unredeemed.code))).toBe(false);
    expect(await backend.store.getClient(unusedClientId)).toBeUndefined();
    expect(await backend.store.getRefreshToken(hashOf(idleRefresh))).toBeUndefined();
    // The live grant and its current token survive, and the grant keeps rotating.
    expect((await backend.store.getGrant(liveGrantId))?.revokedAt).toBeUndefined();
    expect(await backend.store.getRefreshToken(hashOf(liveRefresh))).toBeDefined();
    const next = await tokenSet(await refreshGrant(http.url, CLIENT_ID, liveRefresh));
    expect(next.access_token).toBeTypeOf("string");
    // The idle one is gone for good.
    expect((await refreshGrant(http.url, CLIENT_ID, idleRefresh)).status).toBe(400);
    // And the pre-registered client, never marked unused-expiring, stays.
    expect(await backend.store.getClient(CLIENT_ID)).toBeDefined();
  });
});

function hashOf(token: string): string {
  return codeHash(token);
}
