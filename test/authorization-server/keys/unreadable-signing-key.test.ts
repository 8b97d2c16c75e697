/**
 * Issue 26: a running server meets a signing key it cannot open (another process rotated with a
 * key-encryption key this server lacks). Before, every /token answered 500 while /health said ok.
 * Now the server keeps signing with the newest key it can open that is still published, logs an
 * error naming the unreadable key and the KEK it needs, and /health says "degraded"; once no key
 * it can open is published any more it cannot sign and /health answers 503. On real SQLite and
 * real PostgreSQL stores, the bad rotation done through the storage contract by a key manager of
 * its own, as `gatehouse keys rotate` did.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  createKeyManager,
  RETIRED_KEY_MARGIN_SECONDS,
} from "../../../src/authorization-server/keys/key-manager.js";
import { silentLogger } from "../../../src/shared/log.js";
import {
  createKeyEncryptionKeyring,
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../../../src/shared/secret-envelope.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { codeTokens, decodeHeader, ISSUER, makeServer, type TestServer } from "../helpers.js";

const KEK_A = generateKeyEncryptionKey();
const KEK_B = generateKeyEncryptionKey();
const KEK_B_ID = keyEncryptionKeyId(parseKeyEncryptionKey(KEK_B, "b"));
const ACCESS_TOKEN_TTL = 300;

const schemas = schemaNamer("unreadable_key");
let dir: string;
const opened: { close(): unknown }[] = [];

beforeAll(async () => {
  await requirePostgres();
  dir = await mkdtemp(join(tmpdir(), "gatehouse-unreadable-key-"));
});
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});
afterAll(async () => {
  await schemas.dropSchemas();
  await rm(dir, { recursive: true, force: true });
});

const STORES: [string, () => AuthorizationStore][] = [
  ["SQLite", () => createSqliteStore({ path: join(dir, `${Math.random().toString(36).slice(2)}.sqlite`) })],
  ["PostgreSQL", () => createPostgresStore({ connectionString: POSTGRES_URL, schema: schemas.next() })],
];

async function health(t: TestServer): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await t.server.fetch(new Request(`${ISSUER}/health`));
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe.each(STORES)("%s: a signing key this server cannot open", (_name, openStore) => {
  it("signing goes on with the newest published key it can open, loudly; /health degraded, then 503 when none is left", async () => {
    const store = openStore();
    await store.migrate?.();
    opened.push(store);
    const t = await makeServer({
      store,
      keyEncryptionKeys: [KEK_A],
      accessTokenTtlSeconds: ACCESS_TOKEN_TTL,
    });
    opened.push(t.server);
    const first = await codeTokens(t);
    const goodKid = decodeHeader(String(first.access_token)).kid;
    expect(await health(t)).toEqual({ status: 200, body: { status: "ok" } });

    // Another process rotates with a KEK this server does not hold.
    const stray = createKeyManager({
      store,
      issuer: ISSUER,
      now: () => t.clock.now,
      accessTokenTtlSeconds: ACCESS_TOKEN_TTL,
      log: silentLogger,
      keyring: await createKeyEncryptionKeyring([KEK_B]),
    });
    const strayKid = await stray.rotate();
    t.clock.advance(6); // past the key list's cache

    const during = await codeTokens(t);
    expect(decodeHeader(String(during.access_token)).kid).toBe(goodKid);
    const loud = t.log.lines.filter((l) => l.event === "signing_key_unreadable");
    expect(loud).toHaveLength(1);
    expect(loud[0]!.level).toBe("error");
    expect(loud[0]!.fields).toMatchObject({ kid: strayKid, kek: KEK_B_ID, signingWith: goodKid });
    expect(JSON.stringify(loud[0]!.fields)).not.toContain(KEK_B);
    expect(await health(t)).toEqual({ status: 200, body: { status: "degraded" } });
    // Said once per key, not once per token.
    await codeTokens(t);
    expect(t.log.lines.filter((l) => l.event === "signing_key_unreadable")).toHaveLength(1);

    // The key it signs with is retired: once its publication ends, nothing is left to sign with.
    t.clock.advance(ACCESS_TOKEN_TTL + RETIRED_KEY_MARGIN_SECONDS + 1);
    const after = await health(t);
    expect(after).toEqual({ status: 503, body: { status: "unavailable" } });
    await expect(codeTokens(t)).rejects.toThrow(/token request failed/);
    expect(t.log.lines.some((l) => l.event === "health_check_failed" && l.level === "error")).toBe(true);
  });
});
