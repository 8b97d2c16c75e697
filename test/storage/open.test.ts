import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { openStore, StorageUnavailableError, sqlitePathFor } from "../../src/storage/index.js";
import { code, T0, tokens } from "../../src/storage/testing/fixtures.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "./postgres-support.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-open-"));
const schemas = schemaNamer("gh_open");
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await schemas.dropSchemas();
});

async function roundTrip(store: Awaited<ReturnType<typeof openStore>>): Promise<void> {
  const record = code();
  await store.insertAuthorizationCode(record);
  const result = await store.redeemAuthorizationCode(record.codeHash, T0, () => undefined, tokens(T0));
  expect(result.status).toBe("issued");
}

/** Follows the static imports of a source file (`.js` specifiers name `.ts` files). */
function staticImports(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(file, "utf8");
  for (const match of text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gm)) {
    const spec = match[1]!;
    if (spec.startsWith(".")) staticImports(resolve(dirname(file), spec.replace(/\.js$/, ".ts")), seen);
    else seen.add(spec);
  }
  return seen;
}

describe("openStore", () => {
  it("a directory holds gatehouse.sqlite", async () => {
    const dir = join(root, "dir");
    mkdirSync(dir);
    const store = await openStore(dir);
    try {
      await roundTrip(store);
      expect(statSync(join(dir, "gatehouse.sqlite")).isFile()).toBe(true);
      expect("database" in store).toBe(true);
    } finally {
      await store.close();
    }
  });

  it("a file path (or a file: URL) is the SQLite database itself; a trailing separator names a directory", async () => {
    const file = join(root, "nested", "auth.db");
    const store = await openStore(file);
    try {
      await roundTrip(store);
      expect(statSync(file).isFile()).toBe(true);
    } finally {
      await store.close();
    }
    expect(sqlitePathFor(pathToFileURL(file).href)).toBe(file);
    expect(sqlitePathFor(`${join(root, "new-dir")}/`)).toBe(join(root, "new-dir", "gatehouse.sqlite"));
  });

  it("postgres:// and postgresql:// URLs open PostgreSQL", async () => {
    await requirePostgres();
    for (const url of [POSTGRES_URL, POSTGRES_URL.replace(/^postgres:/, "postgresql:")]) {
      const store = await openStore(url, { schema: schemas.next(), max: 2 });
      try {
        await roundTrip(store);
        expect("pool" in store).toBe(true);
      } finally {
        await store.close();
      }
    }
  });

  it("an unreachable PostgreSQL fails with StorageUnavailableError", async () => {
    await expect(
      openStore("postgres://postgres@127.0.0.1:1/test", { schema: "gh_unreachable" }),
    ).rejects.toBeInstanceOf(StorageUnavailableError);
  });

  it("importing gatehouse-auth/storage loads no driver (the backends are imported dynamically)", () => {
    const reached = [...staticImports(resolve("src/storage/index.ts"))];
    expect(reached).toContain(resolve("src/storage/open.ts"));
    expect(reached.filter((m) => m === "pg" || m === "better-sqlite3")).toEqual([]);
    expect(reached.filter((m) => /storage[\\/](sqlite|postgres)[\\/]/.test(m))).toEqual([]);
  });
});
