/**
 * Strict refresh rotation must not depend on the instances' clocks agreeing (RFC 9700 §4.14.2:
 * a rotated refresh token presented again revokes the grant). Two in-process servers share one
 * database; B's clock runs 2 s behind A's, as unsynchronised machines do, and the same happens on
 * one machine when a request that read the clock first reaches the database second (the parallel
 * refresh test in multi-instance.ts trips over it by chance; this one does every time).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { obtainCode, redeemCode, refreshGrant, tokenSet } from "../support/flow.js";
import { type InProcessServer, serveInProcess, testFlow } from "../support/in-process.js";
import { CLIENT_ID, createBackend, createUsers, testClient } from "../support/instances.js";

describe.each(["SQLite", "PostgreSQL"] as const)(
  "refresh reuse with skewed instance clocks on %s",
  (name) => {
    let backend: { store: AuthorizationStore; cleanup(): Promise<void> };
    const servers: InProcessServer[] = [];
    let username: string;

    async function instance(skewMs: number) {
      // Strict reuse detection (no refresh race window), the case where the clocks' order mattered.
      const served = await serveInProcess(backend.store, {
        now: () => Date.now() + skewMs,
        refreshTokens: { reuseGraceSeconds: 0 },
      });
      servers.push(served);
      return served.http.url;
    }

    beforeAll(async () => {
      backend = await createBackend(name, "skew");
      await backend.store.migrate();
      await backend.store.createClient(testClient());
      [username] = (await createUsers(backend.store, "skew", 1)) as [string];
    }, 60_000);

    afterAll(async () => {
      for (const served of servers) await served.close();
      await backend?.cleanup();
    });

    it("a token rotated on the instance whose clock is ahead is still a reuse on the one behind: grant revoked", async () => {
      const ahead = await instance(2000);
      const behind = await instance(0);
      const flow = testFlow(() => ahead, username);
      const first = await tokenSet(await redeemCode(ahead, flow, await obtainCode(flow)));
      const rotated = await tokenSet(await refreshGrant(ahead, CLIENT_ID, first.refresh_token!));

      const replay = await refreshGrant(behind, CLIENT_ID, first.refresh_token!);
      expect(replay.status).toBe(400);
      expect(((await replay.json()) as { error: string }).error).toBe("invalid_grant");
      // The reuse revoked the grant: the token the legitimate rotation returned is dead too.
      expect((await refreshGrant(ahead, CLIENT_ID, rotated.refresh_token!)).status).toBe(400);
    });
  },
);
