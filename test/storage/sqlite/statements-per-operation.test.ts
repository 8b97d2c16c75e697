/**
 * How many SQL statements the SQLite store runs per code redemption and per refresh rotation
 * (issue 25: each statement is CPU on the event loop, on every flow). Counted on the connection's
 * prepared statements, transaction control included; a change that adds one shows here.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import type { SupersedeDecision } from "../../../src/storage/contract.js";
import { createSqliteStore, type SqliteStore } from "../../../src/storage/sqlite/index.js";
import { code, secret, T0, tokens } from "../../../src/storage/testing/fixtures.js";

const root = mkdtempSync(join(tmpdir(), "gatehouse-sqlite-statements-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Counts the statements `store` runs while `fn` runs (and settles), by SQL text. */
async function counted(store: SqliteStore, fn: () => Promise<unknown>): Promise<string[]> {
  const proto = Object.getPrototypeOf(store.database.prepare("SELECT 1")) as Record<string, unknown>;
  const seen: string[] = [];
  const originals = new Map<string, (...args: unknown[]) => unknown>();
  for (const method of ["run", "get", "all", "iterate"]) {
    const original = proto[method] as (...args: unknown[]) => unknown;
    originals.set(method, original);
    proto[method] = function (this: Database.Statement, ...args: unknown[]) {
      if (this.database === store.database && this.source !== "PRAGMA data_version") seen.push(this.source);
      return original.apply(this, args);
    };
  }
  try {
    await fn();
  } finally {
    for (const [method, original] of originals) proto[method] = original;
  }
  return seen;
}

const pass = () => undefined;
/** Retires every older grant of the sign-in. */
const retireAll: SupersedeDecision = (_grant, candidates) => candidates.map((c) => c.grantId);
const retireNone: SupersedeDecision = () => [];

describe("SQLite statements per operation", () => {
  it("a code redemption: 9 statements, 15 when it supersedes a grant; a refresh rotation: 8, 9 when it marks its parent", async () => {
    const store = createSqliteStore({ path: join(root, "counted.sqlite") });
    await store.migrate();
    const signIn = { userId: "alice", sessionHash: secret().hash };
    const first = code({ ...signIn, clientId: "client-1" });
    const firstTokens = tokens(T0);
    await store.insertAuthorizationCode(first);
    const alone = await counted(store, () =>
      store.redeemAuthorizationCode(first.codeHash, T0, pass, firstTokens, retireNone),
    );
    const second = code({ ...signIn, clientId: "client-1" });
    await store.insertAuthorizationCode(second);
    let superseded: string[] | undefined;
    const superseding = await counted(store, async () => {
      const result = await store.redeemAuthorizationCode(
        second.codeHash,
        T0 + 1,
        pass,
        tokens(T0 + 1),
        retireAll,
      );
      if (result.status === "issued") superseded = result.superseded;
    });
    expect(superseded).toEqual([first.grantId]);
    expect((await store.getGrant(first.grantId))?.revokedAt).toBe(T0 + 1);
    expect((await store.getRefreshToken(firstTokens.refreshToken!.tokenHash))?.revokedAt).toBe(T0 + 1);

    const third = code({ clientId: "client-2" });
    const thirdTokens = tokens(T0);
    await store.insertAuthorizationCode(third);
    await store.redeemAuthorizationCode(third.codeHash, T0, pass, thirdTokens);
    const next = tokens(T0 + 2);
    const rotation = await counted(store, () =>
      store.rotateRefreshToken(thirdTokens.refreshToken!.tokenHash, T0 + 2, () => ({}), next),
    );
    const rotatedAgain = await counted(store, () =>
      store.rotateRefreshToken(next.refreshToken!.tokenHash, T0 + 3, () => ({}), tokens(T0 + 3)),
    );
    expect({
      alone: alone.length,
      superseding: superseding.length,
      rotation: rotation.length,
      rotatedAgain: rotatedAgain.length,
    }).toEqual({ alone: 9, superseding: 15, rotation: 8, rotatedAgain: 9 });
    await store.close();
  });
});
