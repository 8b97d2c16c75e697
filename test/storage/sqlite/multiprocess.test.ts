/**
 * Several processes on one SQLite file, as several `gatehouse serve` instances would be: better-sqlite3
 * is synchronous, so only separate processes truly race. The store is compiled to JavaScript once
 * and each child process opens the database and fires its share of the attempts.
 */

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqliteStore } from "../../../src/storage/sqlite/index.js";
import { code, issueGrant, T0, tally } from "../../../src/storage/testing/fixtures.js";

const run = promisify(execFile);
const root = mkdtempSync(join(tmpdir(), "gatehouse-sqlite-mp-"));
const out = join(root, "out");

const WORKER = `
import { randomUUID } from "node:crypto";
import { createSqliteStore } from "./out/storage/sqlite/index.js";
const [path, op, hash, count, startAt] = process.argv.slice(2);
const store = createSqliteStore({ path, busyTimeoutMs: 20000 });
const tokens = (now) => ({
  accessToken: { jti: randomUUID(), createdAt: now, expiresAt: now + 3600000 },
  refreshToken: { tokenHash: randomUUID(), createdAt: now, expiresAt: now + 86400000 },
  grantExpiresAt: now + 864000000,
});
// Start together so the processes overlap.
while (Date.now() < Number(startAt)) await new Promise((r) => setTimeout(r, 2));
const statuses = [];
for (let i = 0; i < Number(count); i++) {
  const now = ${T0} + 1;
  const result = op === "redeem"
    ? await store.redeemAuthorizationCode(hash, now, () => undefined, tokens(now))
    : await store.rotateRefreshToken(hash, now, () => ({}), tokens(now));
  statuses.push(result.status);
}
await store.close();
process.stdout.write(JSON.stringify(statuses));
`;

beforeAll(async () => {
  await run(
    process.execPath,
    [
      resolve("node_modules/typescript/bin/tsc"),
      ...["--outDir", out, "--rootDir", "src", "--module", "nodenext", "--moduleResolution", "nodenext"],
      ...["--target", "es2022", "--skipLibCheck", "--types", "node", "src/storage/sqlite/index.ts"],
    ],
    { cwd: resolve(".") },
  );
  writeFileSync(join(root, "package.json"), '{ "type": "module" }');
  writeFileSync(join(root, "worker.js"), WORKER);
  symlinkSync(resolve("node_modules"), join(root, "node_modules"), "dir");
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function race(path: string, op: "redeem" | "rotate", hash: string, processes: number, each: number) {
  const startAt = Date.now() + 1500;
  const results = await Promise.all(
    Array.from({ length: processes }, () =>
      run(process.execPath, [join(root, "worker.js"), path, op, hash, String(each), String(startAt)], {
        cwd: root,
      }),
    ),
  );
  return results.flatMap((r) => (JSON.parse(r.stdout) as string[]).map((status) => ({ status })));
}

describe("SQLite across processes", () => {
  it("exactly one of 40 redemptions of one code from 4 processes is issued", async () => {
    const path = join(root, "redeem.sqlite");
    const store = createSqliteStore({ path });
    await store.migrate();
    const record = code();
    await store.insertAuthorizationCode(record);
    const statuses = await race(path, "redeem", record.codeHash, 4, 10);
    expect(tally(statuses)).toEqual({ issued: 1, replayed: 39 });
    expect((await store.getGrant(record.grantId))?.revokedAt).toBe(T0 + 1);
    await store.close();
  });

  it("exactly one of 20 rotations of one refresh token from 4 processes is issued, then the grant is revoked", async () => {
    const path = join(root, "rotate.sqlite");
    const store = createSqliteStore({ path });
    await store.migrate();
    const { issued, grantId } = await issueGrant(store);
    const statuses = await race(path, "rotate", issued.refreshToken!.tokenHash, 4, 5);
    const counts = tally(statuses);
    expect(counts.issued).toBe(1);
    expect((counts.reused ?? 0) + (counts.revoked ?? 0)).toBe(19);
    expect(counts.reused).toBeGreaterThanOrEqual(1);
    expect((await store.getGrant(grantId))?.revokedAt).toBe(T0 + 1);
    await store.close();
  });
});
