/**
 * Signing private keys at rest through the command line (DESIGN.md "Secrets at rest"): the
 * generated key-encryption key (KEK) and its announcement, key files and their permissions, the
 * environment variable, a wrong KEK at start-up, and KEK rotation with `gatehouse keys rewrap`,
 * on SQLite and on PostgreSQL, reading the stored rows directly; and the rewrap itself in process,
 * on the memory and SQLite stores, through the storage contract alone.
 */
import { chmodSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createKeyManager } from "../../src/authorization-server/keys/key-manager.js";
import { openPrivateJwk } from "../../src/authorization-server/keys/signing-key-envelope.js";
import { createKeyFile } from "../../src/cli/key-encryption.js";
import { rewrapSigningKeys } from "../../src/cli/signing-key-rewrap.js";
import { silentLogger } from "../../src/shared/log.js";
import {
  createKeyEncryptionKeyring,
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../../src/shared/secret-envelope.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { createTestDatabase, type TestDatabase } from "../support/instances.js";
import { ensureBuilt, logLines, type RunningCli, runCli, startCli, startDemo, tempDir } from "./helpers.js";

type Ready = { event: string; issuer: string; port: number };

const RESOURCE = ["--resource", "http://localhost:9876", "--scopes", "notes:read"];
const KEK_A = generateKeyEncryptionKey();
const KEK_B = generateKeyEncryptionKey();
const idOf = (key: string) => keyEncryptionKeyId(parseKeyEncryptionKey(key, "test"));

let dir: ReturnType<typeof tempDir>;
const running: RunningCli<unknown>[] = [];

beforeAll(() => ensureBuilt());
beforeEach(() => {
  dir = tempDir("gatehouse-kek-");
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
  dir.remove();
});

function serveArgs(extra: string[] = []): string[] {
  return ["serve", "--json", "--insecure-loopback", "--port", "0", "--no-request-log", ...RESOURCE, ...extra];
}

async function serve(extra: string[], env: NodeJS.ProcessEnv = {}): Promise<RunningCli<Ready>> {
  const r = await startCli<Ready>(serveArgs(["--data", dir.path, ...extra]), { env });
  running.push(r);
  return r;
}

/** `serve` until ready, then stopped: what one start leaves in the data directory. */
async function serveOnce(extra: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<RunningCli<Ready>> {
  const r = await serve(extra, env);
  await r.stop();
  running.splice(running.indexOf(r), 1);
  return r;
}

/** The stored private JWKs, read from the SQLite file over our own connection. */
function sqliteRows(): { kid: string; privateJwk: Record<string, unknown> }[] {
  const db = new Database(join(dir.path, "gatehouse.sqlite"), { readonly: true });
  try {
    const rows = db.prepare("SELECT kid, private_jwk FROM signing_keys").all() as {
      kid: string;
      private_jwk: string;
    }[];
    return rows.map((r) => ({
      kid: r.kid,
      privateJwk: JSON.parse(r.private_jwk) as Record<string, unknown>,
    }));
  } finally {
    db.close();
  }
}

function keyFile(name: string, contents: string, mode: number): string {
  const path = join(dir.path, name);
  writeFileSync(path, contents, { mode });
  chmodSync(path, mode);
  return path;
}

describe("the generated key-encryption key", () => {
  it("serve without a KEK generates one in a 0600 file beside the database, says so loudly, and seals the key with it", async () => {
    const first = await serveOnce();
    const path = join(dir.path, "key-encryption-key");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(path).not.toBe(join(dir.path, "gatehouse.sqlite"));
    expect(first.stderr()).toContain("!!! GENERATED A KEY-ENCRYPTION KEY");
    expect(first.stderr()).toContain(path);
    const generated = logLines(first.stderr()).find((l) => l.event === "key_encryption_key_generated");
    const [fileKey] = readFileSync(path, "utf8")
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(generated).toMatchObject({ level: "warn", path, kek: idOf(fileKey!) });
    // The key itself is never printed.
    expect(first.stderr() + first.stdout()).not.toContain(fileKey);

    const [row] = sqliteRows();
    expect(row!.privateJwk).toMatchObject({ enc: "A256GCM", kek: idOf(fileKey!) });
    expect(row!.privateJwk).not.toHaveProperty("d");

    // The next start reads the same file: no new key, no banner, same signing key.
    const second = await serveOnce();
    expect(second.stderr()).not.toContain("GENERATED");
    expect(logLines(second.stderr()).find((l) => l.event === "key_encryption_keys")).toMatchObject({
      keks: [idOf(fileKey!)],
    });
    expect(sqliteRows().map((r) => r.kid)).toEqual([row!.kid]);
  });

  it("two processes creating the key file at once end up with one key (link, never overwrite)", () => {
    const path = join(dir.path, "race-key");
    expect(createKeyFile(path)).toBe(true);
    const first = readFileSync(path, "utf8");
    expect(createKeyFile(path)).toBe(false);
    expect(readFileSync(path, "utf8")).toBe(first);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it("demo generates its key in its data directory and names it (in its summary and the log, without the production banner)", async () => {
    const demo = await startDemo(dir.path);
    running.push(demo);
    const path = join(dir.path, "key-encryption-key");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(demo.stderr()).not.toContain("GENERATED A KEY-ENCRYPTION KEY");
    expect(logLines(demo.stderr()).find((l) => l.event === "key_encryption_key_generated")).toMatchObject({
      path,
    });
    expect((demo.ready as unknown as { keyEncryptionKeySource: string }).keyEncryptionKeySource).toContain(
      path,
    );
    expect(sqliteRows()[0]!.privateJwk).not.toHaveProperty("d");
  });
});

describe("configured key-encryption keys", () => {
  it("a key file readable or writable by group or others is refused with a clear message", async () => {
    for (const mode of [0o644, 0o640, 0o620, 0o604]) {
      const path = keyFile(`kek-${mode.toString(8)}`, `${KEK_A}\n`, mode);
      const r = await runCli([...serveArgs(["--data", dir.path]), "--key-encryption-key-file", path]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`has mode 0${mode.toString(8)}`);
      expect(r.stderr).toContain(`chmod 600 ${path}`);
      expect(r.stderr).not.toContain(KEK_A);
    }
    // Nothing was started, so nothing was generated either.
    expect(() => statSync(join(dir.path, "key-encryption-key"))).toThrow();
  });

  it("the config file's keyEncryptionKeyFile is read with the same permission check", async () => {
    const loose = keyFile("loose", `${KEK_A}\n`, 0o644);
    const config = join(dir.path, "gatehouse.json");
    writeFileSync(config, JSON.stringify({ keyEncryptionKeyFile: loose }));
    const r = await runCli([...serveArgs(["--data", dir.path]), "--config", config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`key-encryption key file ${loose} has mode 0644`);
    chmodSync(loose, 0o600);
    await serveOnce(["--config", config]);
    expect(sqliteRows()[0]!.privateJwk).toMatchObject({ kek: idOf(KEK_A) });
  });

  it("a 0600 or 0400 key file is used; its key seals the stored key", async () => {
    for (const mode of [0o600, 0o400]) {
      const path = keyFile(`kek-${mode.toString(8)}`, `# comment\n\n${KEK_A}\n`, mode);
      await serveOnce(["--key-encryption-key-file", path]);
    }
    expect(sqliteRows()[0]!.privateJwk).toMatchObject({ kek: idOf(KEK_A) });
    expect(() => statSync(join(dir.path, "key-encryption-key"))).toThrow();
  });

  it("refuses a malformed key (without echoing it), an empty file, and the file and the variable together", async () => {
    const bad = keyFile("bad", "not-a-key-at-all\n", 0o600);
    let r = await runCli([...serveArgs(["--data", dir.path]), "--key-encryption-key-file", bad]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("43 characters");
    expect(r.stderr).not.toContain("not-a-key-at-all");
    const empty = keyFile("empty", "# nothing\n", 0o600);
    r = await runCli([...serveArgs(["--data", dir.path]), "--key-encryption-key-file", empty]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("holds no key-encryption key");
    const good = keyFile("good", `${KEK_A}\n`, 0o600);
    r = await runCli([...serveArgs(["--data", dir.path]), "--key-encryption-key-file", good], {
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B },
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("not both");
  });

  it("a wrong KEK stops start-up (exit 1) with the key id and KEK ids, never key material", async () => {
    await serveOnce([], { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A });
    const [row] = sqliteRows();
    const r = await runCli(serveArgs(["--data", dir.path]), { env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`signing key ${row!.kid} cannot be read`);
    expect(r.stderr).toContain(idOf(KEK_A));
    expect(r.stderr).toContain(idOf(KEK_B));
    expect(r.stderr).toContain("GATEHOUSE_KEY_ENCRYPTION_KEY");
    for (const secret of [KEK_A, KEK_B, String(row!.privateJwk.ct)]) expect(r.stderr).not.toContain(secret);
  });
});

describe("KEK rotation with gatehouse keys rewrap (SQLite)", () => {
  it("NEW,OLD reads old keys and seals new ones; rewrap moves every key to NEW; then NEW alone starts", async () => {
    const both = { GATEHOUSE_KEY_ENCRYPTION_KEY: `${KEK_B},${KEK_A}` };
    await serveOnce([], { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A });
    const [original] = sqliteRows();
    const rotate = await runCli(["keys", "rotate", "--data", dir.path, "--json"], { env: both });
    expect(rotate.code, rotate.stderr).toBe(0);
    const rotatedKid = (JSON.parse(rotate.stdout) as { kid: string }).kid;
    const kekByKid = () => Object.fromEntries(sqliteRows().map((r) => [r.kid, r.privateJwk.kek]));
    expect(kekByKid()).toEqual({ [original!.kid]: idOf(KEK_A), [rotatedKid]: idOf(KEK_B) });

    const list = await runCli(["keys", "list", "--data", dir.path]);
    expect(list.stdout).toContain(`kek ${idOf(KEK_A)}`);

    // NEW alone cannot start yet: the original key is still sealed under OLD.
    const early = await runCli(serveArgs(["--data", dir.path]), {
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B },
    });
    expect(early.code).toBe(1);
    expect(early.stderr).toContain(original!.kid);

    const rewrap = await runCli(["keys", "rewrap", "--data", dir.path, "--json"], { env: both });
    expect(rewrap.code, rewrap.stderr).toBe(0);
    expect(JSON.parse(rewrap.stdout)).toMatchObject({
      kek: idOf(KEK_B),
      rewrapped: [{ kid: original!.kid, from: `kek ${idOf(KEK_A)}` }],
      unchanged: [rotatedKid],
    });
    expect(kekByKid()).toEqual({ [original!.kid]: idOf(KEK_B), [rotatedKid]: idOf(KEK_B) });
    expect(sqliteRows().every((r) => !("d" in r.privateJwk))).toBe(true);

    const after = await serve([], { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B });
    const jwks = (await (await fetch(`${after.ready.issuer}/jwks.json`)).json()) as {
      keys: { kid: string }[];
    };
    expect(jwks.keys.map((k) => k.kid).sort()).toEqual([original!.kid, rotatedKid].sort());

    // Rewrap with only OLD: nothing it can do, and it says which key and which KEK.
    const wrong = await runCli(["keys", "rewrap", "--data", dir.path], {
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A },
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/signing key \S+ cannot be read/);
    expect(wrong.stderr).toContain(idOf(KEK_B));
  });

  it("rows stored before encryption keep working and rewrap encrypts them", async () => {
    const store = createSqliteStore({ path: join(dir.path, "gatehouse.sqlite") });
    await store.migrate();
    const manager = createKeyManager({
      store,
      issuer: "https://unused.invalid",
      now: () => Date.now(),
      accessTokenTtlSeconds: 300,
      log: silentLogger,
    });
    await manager.ensureSigningKey();
    await store.close();
    const [plain] = sqliteRows();
    expect(plain!.privateJwk).toHaveProperty("d");
    expect((await runCli(["keys", "list", "--data", dir.path])).stdout).toContain("plaintext");

    const env = { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A };
    const before = await serveOnce([], env);
    expect(logLines(before.stderr()).find((l) => l.event === "signing_keys_plaintext")).toMatchObject({
      kids: [plain!.kid],
    });
    const rewrap = await runCli(["keys", "rewrap", "--data", dir.path], { env });
    expect(rewrap.code, rewrap.stderr).toBe(0);
    expect(rewrap.stdout).toContain(`${plain!.kid}  was plaintext`);
    const [row] = sqliteRows();
    expect(row!.privateJwk).toMatchObject({ enc: "A256GCM", kek: idOf(KEK_A) });
    expect(JSON.stringify(row!.privateJwk)).not.toContain(String(plain!.privateJwk.d));
    const after = await serveOnce([], env);
    expect(logLines(after.stderr()).map((l) => l.event)).not.toContain("signing_keys_plaintext");
  });

  it("generate-kek prints a usable key; --out writes a 0600 file and never overwrites one", async () => {
    const printed = await runCli(["keys", "generate-kek", "--json"]);
    const { kek, key } = JSON.parse(printed.stdout) as { kek: string; key: string };
    expect(idOf(key)).toBe(kek);
    const path = join(dir.path, "new-kek");
    const written = await runCli(["keys", "generate-kek", "--out", path]);
    expect(written.code).toBe(0);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const again = await runCli(["keys", "generate-kek", "--out", path]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("EEXIST");
    await serveOnce(["--key-encryption-key-file", path]);
    expect(sqliteRows()[0]!.privateJwk.kek).toBe(idOf(readFileSync(path, "utf8").trim()));
  });
});

describe("KEK rotation with gatehouse keys rewrap (PostgreSQL)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase("kek");
  });
  afterAll(async () => {
    await db.drop();
  });

  it("rewrap re-encrypts the rows under the new KEK (compare-and-swap through the storage contract)", async () => {
    const pgArgs = ["--database-url", db.url];
    await serveOnce(pgArgs, { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_A });
    const rewrap = await runCli(["keys", "rewrap", ...pgArgs, "--json"], {
      env: { GATEHOUSE_KEY_ENCRYPTION_KEY: `${KEK_B},${KEK_A}` },
    });
    expect(rewrap.code, rewrap.stderr).toBe(0);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const stored = await client.query("SELECT kid, private_jwk FROM gatehouse.signing_keys");
      expect(stored.rows).toHaveLength(1);
      expect(stored.rows[0].private_jwk).toMatchObject({ enc: "A256GCM", kek: idOf(KEK_B) });
      expect(stored.rows[0].private_jwk).not.toHaveProperty("d");
    } finally {
      await client.end();
    }
    await serveOnce(pgArgs, { GATEHOUSE_KEY_ENCRYPTION_KEY: KEK_B });
  });
});

describe("rewrapSigningKeys in process, through the storage contract", () => {
  const stores: Record<string, () => AuthorizationStore> = {
    memory: () => createMemoryStore(),
    sqlite: () => createSqliteStore({ path: join(dir.path, "in-process.sqlite") }),
  };
  for (const [name, open] of Object.entries(stores)) {
    it(`${name}: rewraps under the new KEK; of two rewraps racing from one reading, the later one writes nothing`, async () => {
      const store = open();
      await store.migrate();
      try {
        const manager = createKeyManager({
          store,
          issuer: "https://unused.invalid",
          now: () => Date.now(),
          accessTokenTtlSeconds: 300,
          log: silentLogger,
          keyring: await createKeyEncryptionKeyring([KEK_A]),
        });
        await manager.ensureSigningKey();
        const [original] = await store.listSigningKeys();
        expect(original!.privateJwk).toMatchObject({ kek: idOf(KEK_A) });

        // Both read the keys before either writes (each lists them before its first await).
        const both = await createKeyEncryptionKeyring([KEK_B, KEK_A]);
        const results = await Promise.all([rewrapSigningKeys(store, both), rewrapSigningKeys(store, both)]);
        const winner = results.find((r) => r.rewrapped.length > 0);
        const loser = results.find((r) => r !== winner);
        expect(winner).toEqual({
          rewrapped: [{ kid: original!.kid, from: `kek ${idOf(KEK_A)}` }],
          unchanged: [],
          changedMeanwhile: [],
        });
        expect(loser).toEqual({ rewrapped: [], unchanged: [], changedMeanwhile: [original!.kid] });

        const [rewrapped] = await store.listSigningKeys();
        expect(rewrapped).toEqual({ ...original, privateJwk: expect.objectContaining({ kek: idOf(KEK_B) }) });
        await openPrivateJwk(rewrapped!, await createKeyEncryptionKeyring([KEK_B]));
        expect(await rewrapSigningKeys(store, both)).toEqual({
          rewrapped: [],
          unchanged: [original!.kid],
          changedMeanwhile: [],
        });
      } finally {
        await store.close();
      }
    });
  }
});
