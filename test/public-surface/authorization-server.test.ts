/**
 * The authorization server's public face (issue 23 item 9): `createAuthorizationServer` returns
 * what a host needs (fetch, metadata, rotateKeys, requestStepUp, purgeExpired, close) and not its
 * composition root: the ServerContext (options resolved, store, keys, limits) stays inside, so a
 * caller cannot reach past the endpoints into the store or the signing keys. Custom scheduling of
 * the purge is `purgeExpired()`, not `startMaintenance(server.context, …)`. Real memory store.
 */
import { describe, expect, it } from "vitest";
import * as entry from "../../src/authorization-server/index.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";

const ISSUER = "https://as.example.test";
const RESOURCE = "https://rs.example.test/api";

describe("createAuthorizationServer's result", () => {
  it("has no context and the entry exports no startMaintenance or ServerContext", async () => {
    const server = await entry.createAuthorizationServer({
      issuer: ISSUER,
      store: createMemoryStore(),
      resources: [{ uri: RESOURCE, scopes: ["notes:read"] }],
      maintenanceIntervalMs: 0,
    });
    try {
      expect(Object.keys(server).sort()).toEqual(
        ["close", "fetch", "metadata", "purgeExpired", "requestStepUp", "rotateKeys"].sort(),
      );
      expect("context" in server).toBe(false);
      expect(Object.keys(entry)).not.toContain("startMaintenance");
    } finally {
      await server.close();
    }
  });

  it("purgeExpired() deletes what has expired from the store, as the timer does", async () => {
    const store = createMemoryStore();
    const purged: Array<Record<string, unknown> | undefined> = [];
    const logger = {
      info(event: string, fields?: Record<string, unknown>) {
        if (event === "purged_expired") purged.push(fields);
      },
      warn() {},
      error() {},
    };
    let now = Date.parse("2026-01-01T00:00:00Z");
    const server = await entry.createAuthorizationServer({
      issuer: ISSUER,
      store,
      resources: [{ uri: RESOURCE, scopes: ["notes:read"] }],
      maintenanceIntervalMs: 0,
      logger,
      now: () => now,
    });
    try {
      // A one-time marker that expires in a minute, purged two minutes later (and only once).
      expect(await store.useOnce("marker:purge-test", now + 60_000, now)).toBe(true);
      now += 120_000;
      await server.purgeExpired();
      await server.purgeExpired();
      expect(purged.map((fields) => fields?.markers)).toEqual([1, 0]);
    } finally {
      await server.close();
    }
  });
});
