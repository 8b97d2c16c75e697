/**
 * DPoP proof `jti` single use across authorization-server instances (RFC 9449 §11.1): two
 * instances on one SQLite file, and on one PostgreSQL schema, each given the same proof at once;
 * exactly one accepts it, and it stays used on both. Nonces issued by one are accepted by the
 * other when they share the key-encryption key (§8).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../src/shared/crypto.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../storage/postgres-support.js";
import { proof, proofKey } from "./dpop-support.js";
import { codeRequest, ISSUER, issueCode, makeServer, postToken, type TestServer } from "./helpers.js";

const TOKEN_URL = `${ISSUER}/token`;

describe("DPoP proofs are single use across instances", () => {
  const schemas = schemaNamer("gh_dpop_as");
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gatehouse-dpop-as-"));
  });

  afterAll(async () => {
    await schemas.dropSchemas();
    await rm(dir, { recursive: true, force: true });
  });

  async function redeemWith(t: TestServer, dpop: string) {
    const { code, verifier } = await issueCode(t);
    return postToken(t, codeRequest(code, verifier), { dpop });
  }

  async function acrossInstances(stores: [AuthorizationStore, AuthorizationStore]) {
    const keyEncryptionKeys = [randomToken(32)];
    const a = await makeServer({ store: stores[0], keyEncryptionKeys });
    const b = await makeServer({ store: stores[1], keyEncryptionKeys });
    try {
      const key = await proofKey();
      const once = await proof(key, TOKEN_URL, a.clock.now);
      const results = await Promise.all([redeemWith(a, once), redeemWith(b, once)]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
      expect(results.find((r) => r.status === 400)?.body.error).toBe("invalid_dpop_proof");
      for (const t of [a, b]) expect((await redeemWith(t, once)).body.error).toBe("invalid_dpop_proof");

      // Server nonces: one instance's nonce is good at the other (same key-encryption key).
      const strictA = await makeServer({ store: stores[0], keyEncryptionKeys, dpop: { requireNonce: true } });
      const strictB = await makeServer({ store: stores[1], keyEncryptionKeys, dpop: { requireNonce: true } });
      try {
        const challenge = await redeemWith(strictA, await proof(key, TOKEN_URL, a.clock.now));
        expect(challenge.body.error).toBe("use_dpop_nonce");
        const nonce = challenge.headers.get("dpop-nonce")!;
        const answered = await redeemWith(strictB, await proof(key, TOKEN_URL, a.clock.now, { nonce }));
        expect(answered.status).toBe(200);
        expect(answered.body.token_type).toBe("DPoP");
      } finally {
        await strictA.server.close();
        await strictB.server.close();
      }
    } finally {
      await a.server.close();
      await b.server.close();
    }
  }

  it("on one SQLite file", async () => {
    const path = join(dir, "gatehouse.db");
    await acrossInstances([createSqliteStore({ path }), createSqliteStore({ path })]);
  });

  it("on one PostgreSQL schema", async () => {
    await requirePostgres();
    const schema = schemas.next();
    await acrossInstances([
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
    ]);
  });
});
