/**
 * Strict refresh rotation must not depend on the instances' clocks agreeing (RFC 9700 §4.14.2:
 * a rotated refresh token presented again revokes the grant). Two in-process servers share one
 * database; B's clock runs 2 s behind A's, as unsynchronised machines do, and the same happens on
 * one machine when a request that read the clock first reaches the database second (the parallel
 * refresh test in multi-instance.ts trips over it by chance; this one does every time).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { obtainCode, redeemCode, refreshGrant, tokenSet } from "../support/flow.js";
import {
  CLIENT_ID,
  createBackend,
  createUsers,
  PASSWORD,
  REDIRECT_URI,
  RESOURCE,
  SCOPES,
  SHARED_ISSUER,
  testClient,
} from "../support/instances.js";

describe.each(["SQLite", "PostgreSQL"] as const)(
  "refresh reuse with skewed instance clocks on %s",
  (name) => {
    let backend: { store: AuthorizationStore; cleanup(): Promise<void> };
    const servers: { server: AuthorizationServer; http: ListeningServer }[] = [];
    let username: string;

    async function instance(skewMs: number) {
      const server = await createAuthorizationServer({
        issuer: SHARED_ISSUER,
        store: backend.store,
        resources: [{ uri: RESOURCE, scopes: SCOPES.split(" ") }],
        allowInsecureLoopback: true,
        maintenanceIntervalMs: 0,
        now: () => Date.now() + skewMs,
        logger: { info() {}, warn() {}, error() {} },
      });
      const http = await listen(server.fetch);
      servers.push({ server, http });
      return http.url;
    }

    beforeAll(async () => {
      backend = await createBackend(name, "skew");
      await backend.store.migrate();
      await backend.store.createClient(testClient());
      [username] = (await createUsers(backend.store, "skew", 1)) as [string];
    }, 60_000);

    afterAll(async () => {
      for (const { server, http } of servers) {
        await http.close();
        await server.close();
      }
      await backend?.cleanup();
    });

    it("a token rotated on the instance whose clock is ahead is still a reuse on the one behind: grant revoked", async () => {
      const ahead = await instance(2000);
      const behind = await instance(0);
      const flow = {
        instanceFor: () => ahead,
        clientId: CLIENT_ID,
        redirectUri: REDIRECT_URI,
        resource: RESOURCE,
        scope: `${SCOPES} offline_access`,
        user: { username, password: PASSWORD },
      };
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
