/**
 * Issue 26: `gatehouse keys rotate --database-url …` run without the key-encryption key generated
 * a new KEK in ./.gatehouse and sealed a new signing key with it in the shared database; every
 * running server then failed to sign. A command that would seal under a KEK of its own making, or
 * under one the stored keys do not use, is refused before it writes anything: it names the KEK id
 * the database needs and generates no key file. On PostgreSQL and on SQLite (with the key file
 * kept apart from the data directory, as docs/deployment.md advises), through the built CLI.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../../src/shared/secret-envelope.js";
import { createTestDatabase, type TestDatabase } from "../support/instances.js";
import { ensureBuilt, runCli, startCli, tempDir } from "./helpers.js";

const RESOURCE = ["--resource", "http://localhost:9876", "--scopes", "notes:read"];
const KEK_A = generateKeyEncryptionKey();
const KEK_B = generateKeyEncryptionKey();
const idOf = (key: string) => keyEncryptionKeyId(parseKeyEncryptionKey(key, "test"));

let dir: ReturnType<typeof tempDir>;
let db: TestDatabase;

beforeAll(async () => {
  ensureBuilt();
  db = await createTestDatabase("nokek");
});
afterAll(async () => {
  await db?.drop();
});
beforeEach(() => {
  dir = tempDir("gatehouse-nokek-");
});
afterEach(() => dir.remove());

/** `serve` once on `storeArgs` with KEK_A, so the store holds one signing key sealed under it. */
async function seedStore(storeArgs: string[]): Promise<void> {
  const server = await startCli(
    ["serve", "--json", "--insecure-loopback", "--port", "0", "--no-request-log", ...RESOURCE, ...storeArgs],
    { env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A } },
  );
  await server.stop();
}

async function postgresKeks(): Promise<string[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const rows = await client.query("SELECT private_jwk FROM gatehouse.signing_keys ORDER BY created_at");
    return rows.rows.map((r: { private_jwk: { kek: string } }) => r.private_jwk.kek);
  } finally {
    await client.end();
  }
}

function sqliteKeks(dataDir: string): string[] {
  const sqlite = new Database(join(dataDir, "gatehouse.sqlite"), { readonly: true });
  try {
    const rows = sqlite.prepare("SELECT private_jwk FROM signing_keys ORDER BY created_at").all() as {
      private_jwk: string;
    }[];
    return rows.map((r) => (JSON.parse(r.private_jwk) as { kek: string }).kek);
  } finally {
    sqlite.close();
  }
}

describe("PostgreSQL: a command without the database's key-encryption key", () => {
  beforeAll(async () => {
    await seedStore(["--database-url", db.url]);
  });

  for (const command of [
    ["keys", "rotate"],
    ["keys", "rewrap"],
  ]) {
    it(`${command.join(" ")} --database-url, no KEK configured: refused naming the KEK id it needs, no KEK generated, nothing written`, async () => {
      const r = await runCli([...command, "--database-url", db.url], { cwd: dir.path });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(idOf(KEK_A));
      expect(r.stderr).toContain("GATEHOUSE_KEY_ENCRYPTION_KEY");
      expect(r.stderr).not.toContain("GENERATED A KEY-ENCRYPTION KEY");
      expect(r.stderr).not.toContain(KEK_A);
      expect(existsSync(join(dir.path, ".gatehouse"))).toBe(false);
      expect(await postgresKeks()).toEqual([idOf(KEK_A)]);
    });
  }

  it("serve --database-url, no KEK configured: refused before listening, naming the KEK id, no KEK generated", async () => {
    const r = await runCli(
      ["serve", "--insecure-loopback", "--port", "0", ...RESOURCE, "--database-url", db.url],
      { cwd: dir.path },
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(idOf(KEK_A));
    expect(r.stderr).not.toContain("GENERATED A KEY-ENCRYPTION KEY");
    expect(existsSync(join(dir.path, ".gatehouse"))).toBe(false);
  });

  it("keys rotate with another KEK configured: refused (the servers could not open the new key), naming both ids", async () => {
    const r = await runCli(["keys", "rotate", "--database-url", db.url], {
      cwd: dir.path,
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B },
    });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(idOf(KEK_A));
    expect(r.stderr).toContain(idOf(KEK_B));
    expect(await postgresKeks()).toEqual([idOf(KEK_A)]);
  });

  it("keys rotate with the database's KEK (alone, or second behind a new one) rotates", async () => {
    const same = await runCli(["keys", "rotate", "--database-url", db.url, "--json"], {
      cwd: dir.path,
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A },
    });
    expect(same.code, same.stderr).toBe(0);
    const both = await runCli(["keys", "rotate", "--database-url", db.url, "--json"], {
      cwd: dir.path,
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: `${KEK_B},${KEK_A}` },
    });
    expect(both.code, both.stderr).toBe(0);
    expect(await postgresKeks()).toEqual([idOf(KEK_A), idOf(KEK_A), idOf(KEK_B)]);
  });
});

describe("SQLite: the key file kept apart from the data directory", () => {
  it("keys rotate --data without the key file: refused naming the KEK id, no KEK generated in the data directory", async () => {
    const data = join(dir.path, "data");
    await seedStore(["--data", data]);
    const r = await runCli(["keys", "rotate", "--data", data], { cwd: dir.path });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(idOf(KEK_A));
    expect(existsSync(join(data, "key-encryption-key"))).toBe(false);
    expect(sqliteKeks(data)).toEqual([idOf(KEK_A)]);
  });

  it("a store with no sealed key still gets a generated KEK, announced (first start unchanged)", async () => {
    const data = join(dir.path, "fresh");
    const r = await runCli(["keys", "rotate", "--data", data, "--json"], { cwd: dir.path });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("GENERATED A KEY-ENCRYPTION KEY");
    expect(existsSync(join(data, "key-encryption-key"))).toBe(true);
  });
});
