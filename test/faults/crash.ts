/**
 * The crash suite (issue 5 "Faults and durability"): a `gatehouse serve` process armed with
 * `GATEHOUSE_TEST_FAULT` (test/faults/fault-injection.ts) SIGKILLs itself at a chosen point of
 * `/token`; a fresh process on the same database then finds a consistent state: all-old (the code or
 * refresh token still works, nothing of the new state exists) or all-new (the new state exists, and
 * the client's retry revokes it, so no undelivered token stays usable).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { codeHash } from "../support/fault-server.js";
import { type FlowOptions, obtainCode, redeemCode, refreshGrant, tokenSet } from "../support/flow.js";
import { testFlow } from "../support/in-process.js";
import {
  CLIENT_ID,
  createUsers,
  type Database,
  type Instance,
  openDatabase,
  startInstance,
  stopAll,
  testClient,
} from "../support/instances.js";

export interface CrashFixture {
  database: Database;
  /** Runs SQL (with `$1` placeholders) on the database and returns the rows. */
  sql(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** Backend-specific durability check after the crash (SQLite: `PRAGMA integrity_check`). */
  integrity(): Promise<void>;
  cleanup(): Promise<void>;
}

export function crashSuite(name: string, makeFixture: () => Promise<CrashFixture>): void {
  describe(`SIGKILL during /token on ${name}`, () => {
    let fixture: CrashFixture;
    let store: AuthorizationStore;
    let users: string[];
    let nextUser = 0;
    const running: Instance[] = [];

    beforeAll(async () => {
      fixture = await makeFixture();
      store = await openDatabase(fixture.database);
      await store.createClient(testClient());
      users = await createUsers(store, "crash", 4);
    }, 60_000);

    afterAll(async () => {
      await stopAll(running);
      await store?.close();
      await fixture?.cleanup();
    }, 60_000);

    async function start(fault?: string): Promise<Instance> {
      const instance = await startInstance({ database: fixture.database, ...(fault ? { fault } : {}) });
      running.push(instance);
      return instance;
    }

    function flowOn(instance: Instance): FlowOptions {
      return testFlow(() => instance.base, users[nextUser++ % users.length]!);
    }

    /** The request dies with the process: no response at all, and the process ended by SIGKILL. */
    async function expectKilled(instance: Instance, request: Promise<Response>): Promise<void> {
      await expect(request).rejects.toThrow();
      const { signal } = await instance.exited;
      expect(signal, instance.stderr()).toBe("SIGKILL");
      await fixture.integrity();
    }

    async function codeRow(code: string): Promise<Record<string, unknown>> {
      const [row] = await fixture.sql(
        "SELECT grant_id, consumed_at FROM authorization_codes WHERE code_hash = $1",
        [codeHash(code)],
      );
      expect(row).toBeDefined();
      return row!;
    }
    async function liveRefreshTokens(grantId: unknown): Promise<number> {
      const rows = await fixture.sql(
        "SELECT count(*) AS n FROM refresh_tokens WHERE grant_id = $1 AND revoked_at IS NULL AND rotated_at IS NULL",
        [grantId],
      );
      return Number(rows[0]!.n);
    }
    async function liveAccessTokens(grantId: unknown): Promise<number> {
      const rows = await fixture.sql(
        "SELECT count(*) AS n FROM access_tokens WHERE grant_id = $1 AND revoked_at IS NULL",
        [grantId],
      );
      return Number(rows[0]!.n);
    }

    it("killed inside the redemption transaction (redeem:after-consume): all-old, the code still redeems once", async () => {
      const armed = await start("redeem:after-consume");
      const flow = flowOn(armed);
      const obtained = await obtainCode(flow);
      await expectKilled(armed, redeemCode(armed.base, flow, obtained));

      // Nothing of the redemption persists: a sealed code (the server has a key-encryption key)
      // left no row at all, a stored one an unconsumed row; no grant exists for the user.
      const [row] = await fixture.sql("SELECT consumed_at FROM authorization_codes WHERE code_hash = $1", [
        codeHash(obtained.code),
      ]);
      if (row) expect(row.consumed_at).toBeNull();
      const grants = await fixture.sql(
        "SELECT count(*) AS n FROM grants g JOIN users u ON g.user_id = u.id WHERE u.username = $1",
        [flow.user.username],
      );
      expect(Number(grants[0]!.n)).toBe(0);

      const restarted = await start();
      const tokens = await tokenSet(await redeemCode(restarted.base, flow, obtained));
      expect(tokens.refresh_token).toBeTypeOf("string");
      // Single use still holds after the crash.
      expect((await redeemCode(restarted.base, flow, obtained)).status).toBe(400);
      await restarted.stop();
    });

    it("killed after the redemption committed (redeem:after-commit): all-new, and the client's retry revokes the undelivered tokens", async () => {
      const armed = await start("redeem:after-commit");
      const flow = flowOn(armed);
      const obtained = await obtainCode(flow);
      await expectKilled(armed, redeemCode(armed.base, flow, obtained));

      const row = await codeRow(obtained.code);
      expect(row.consumed_at).not.toBeNull();
      const grant = await store.getGrant(String(row.grant_id));
      expect(grant?.revokedAt).toBeUndefined();
      expect(await liveRefreshTokens(row.grant_id)).toBe(1);

      const restarted = await start();
      const retry = await redeemCode(restarted.base, flow, obtained);
      expect(retry.status).toBe(400);
      expect(((await retry.json()) as { error: string }).error).toBe("invalid_grant");
      // OAuth 2.1 §4.1.3: the replay revoked the grant, so the tokens nobody received are dead.
      expect((await store.getGrant(String(row.grant_id)))?.revokedAt).toBeTypeOf("number");
      expect(await liveRefreshTokens(row.grant_id)).toBe(0);
      expect(await liveAccessTokens(row.grant_id)).toBe(0);
      await restarted.stop();
    });

    it("killed inside the rotation before the old token is marked (rotate:before-mark): all-old, the old token still refreshes", async () => {
      const armed = await start("rotate:before-mark");
      const flow = flowOn(armed);
      const obtained = await obtainCode(flow);
      const tokens = await tokenSet(await redeemCode(armed.base, flow, obtained));
      const { grant_id: grantId } = await codeRow(obtained.code);
      await expectKilled(armed, refreshGrant(armed.base, CLIENT_ID, tokens.refresh_token!));

      const refreshRows = await fixture.sql(
        "SELECT rotated_at, revoked_at FROM refresh_tokens WHERE grant_id = $1",
        [grantId],
      );
      expect(refreshRows).toHaveLength(1);
      expect(refreshRows[0]!.rotated_at).toBeNull();
      // No access-token row per issuance (storage contract version 2): its token lives with the grant.
      expect(await liveAccessTokens(grantId)).toBe(0);
      expect((await store.getGrant(String(grantId)))?.revokedAt).toBeUndefined();

      const restarted = await start();
      const next = await tokenSet(await refreshGrant(restarted.base, CLIENT_ID, tokens.refresh_token!));
      expect(next.refresh_token).not.toBe(tokens.refresh_token);
      await restarted.stop();
    });

    it("killed after the rotation committed (rotate:after-commit): all-new; the client's retry inside the race window gets a sibling, and reuse after that revokes", async () => {
      const armed = await start("rotate:after-commit");
      const flow = flowOn(armed);
      const obtained = await obtainCode(flow);
      const tokens = await tokenSet(await redeemCode(armed.base, flow, obtained));
      const { grant_id: grantId } = await codeRow(obtained.code);
      await expectKilled(armed, refreshGrant(armed.base, CLIENT_ID, tokens.refresh_token!));

      const refreshRows = await fixture.sql("SELECT rotated_at FROM refresh_tokens WHERE grant_id = $1", [
        grantId,
      ]);
      expect(refreshRows).toHaveLength(2);
      expect(refreshRows.filter((r) => r.rotated_at !== null)).toHaveLength(1);

      const restarted = await start();
      // The undelivered successor was never used, so the client's retry of the token it still holds
      // is inside the refresh race window (grants/refresh-policy.ts): it gets a sibling and stays
      // logged in, where strict detection would have logged it out for the server's crash.
      const retry = await tokenSet(await refreshGrant(restarted.base, CLIENT_ID, tokens.refresh_token!));
      expect((await store.getGrant(String(grantId)))?.revokedAt).toBeUndefined();
      const onward = await tokenSet(await refreshGrant(restarted.base, CLIENT_ID, retry.refresh_token!));
      // RFC 9700 §4.14.2: a successor was used, so the old token is reuse, and ends the grant with
      // every token of it, the undelivered one included.
      expect((await refreshGrant(restarted.base, CLIENT_ID, tokens.refresh_token!)).status).toBe(400);
      expect((await store.getGrant(String(grantId)))?.revokedAt).toBeTypeOf("number");
      expect(onward.refresh_token).toBeDefined();
      expect(await liveRefreshTokens(grantId)).toBe(0);
      expect(await liveAccessTokens(grantId)).toBe(0);
      await restarted.stop();
    });
  });
}
