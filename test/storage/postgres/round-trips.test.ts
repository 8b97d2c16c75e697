/**
 * Round trips the PostgreSQL store makes for the operations every code flow and every refresh
 * runs (issue 25: each statement is a round trip and a statement for the database to run). The
 * numbers are this store's design (src/storage/postgres/superseded.ts, revocation.ts,
 * transaction-writes.ts, client-cache.ts); a change that adds one should say why.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { createPostgresStore, type PostgresStore } from "../../../src/storage/postgres/index.js";
import {
  client,
  code,
  id,
  issueGrant,
  MINUTE,
  secret,
  T0,
  tokens,
} from "../../../src/storage/testing/fixtures.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../postgres-support.js";

const schemas = schemaNamer("gh_pgtrips");
let store: PostgresStore;

beforeAll(async () => {
  await requirePostgres();
  store = createPostgresStore({ connectionString: POSTGRES_URL, schema: schemas.next(), max: 2 });
  await store.migrate();
});
afterAll(async () => {
  await store?.close();
  await schemas.dropSchemas();
});

/** The statements `run` sent, first words only (BEGIN, COMMIT, SELECT, WITH, ...). */
async function statements(run: (s: AuthorizationStore) => Promise<unknown>): Promise<string[]> {
  const spy = vi.spyOn(pg.Client.prototype, "query");
  try {
    await run(store);
    return spy.mock.calls.map(([config]) => {
      const text = typeof config === "string" ? config : (config as { text: string }).text;
      return text.trim().split(/\s+/).slice(0, 3).join(" ");
    });
  } finally {
    spy.mockRestore();
  }
}

describe("PostgreSQL round trips", () => {
  it("a refresh rotation: BEGIN, the grant locked, the token locked, one statement of writes, COMMIT", async () => {
    const first = await issueGrant(store);
    const second = tokens(T0 + 1);
    await store.rotateRefreshToken(first.issued.refreshToken!.tokenHash, T0 + 1, () => ({}), second);
    // The second rotation also marks its parent's successor used: still one statement of writes.
    const sent = await statements((s) =>
      s.rotateRefreshToken(second.refreshToken!.tokenHash, T0 + 2, () => ({}), tokens(T0 + 2)),
    );
    expect(sent).toEqual(["BEGIN", "SELECT * FROM", "SELECT * FROM", "WITH w0 AS", "COMMIT"]);
  });

  it("a code redemption that retires a superseded grant: one transaction of nine statements", async () => {
    const key = {
      userId: id("user"),
      clientId: id("client"),
      resource: "https://mcp.example/mcp",
      sessionHash: secret().hash,
    };
    await issueGrant(store, T0, key);
    const record = code({ ...key, createdAt: T0 + 1, expiresAt: T0 + 1 + MINUTE });
    await store.insertAuthorizationCode(record);
    const every = (_grant: unknown, candidates: readonly { grantId: string }[]) =>
      candidates.map((c) => c.grantId);
    let superseded: string[] | undefined;
    const sent = await statements(async (s) => {
      const result = await s.redeemAuthorizationCode(
        record.codeHash,
        T0 + 1,
        () => undefined,
        tokens(T0 + 1),
        every,
      );
      if (result.status === "issued") superseded = result.superseded;
    });
    expect(superseded).toHaveLength(1);
    expect(sent).toEqual([
      "BEGIN",
      "UPDATE authorization_codes SET", // the claim
      "WITH w0 AS", // the grant and its refresh token
      "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", // the sign-in's turn
      "SELECT grant_id, scopes,", // its active grants
      "UPDATE grants SET", // the retired grant, then its chain and tokens
      "WITH RECURSIVE chain(grant_id)",
      "WITH RECURSIVE chain(grant_id)",
      "COMMIT",
    ]);
  });

  it("a client read again within the bound costs no statement", async () => {
    const record = client();
    await store.createClient(record);
    const sent = await statements(async (s) => {
      await s.getClient(record.clientId);
      await s.getClient(record.clientId);
    });
    expect(sent).toEqual(["SELECT * FROM"]);
  });
});
