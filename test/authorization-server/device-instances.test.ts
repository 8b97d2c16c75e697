/**
 * The device authorization grant (RFC 8628) across two authorization-server instances on one
 * SQLite file, and on one PostgreSQL schema, each on loopback: the device asks instance A, the user
 * answers at instance B's verification page, and after the approval the device's polls race at
 * both instances at once. Exactly one poll gets tokens; every other is invalid_grant.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuthorizationServer } from "../../src/authorization-server/index.js";
import { listen } from "../../src/http/node.js";
import { silentLogger } from "../../src/shared/log.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../storage/postgres-support.js";
import { Agent, hiddenFields, PASSWORD } from "./pages/harness.js";
import { publicClient, RESOURCE, startFlowServer, USERNAME } from "./support/flow-server.js";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const CLIENT = publicClient({
  clientId: "tv-app",
  grantTypes: [DEVICE_GRANT, "refresh_token", "authorization_code"],
});
const POLLS = 6;

async function acrossInstances(stores: [AuthorizationStore, AuthorizationStore]): Promise<void> {
  const a = await startFlowServer({ clients: [CLIENT], wrapStore: () => stores[0] });
  // Instance B: the same issuer and configuration over the same database, on its own port.
  const b = await createAuthorizationServer({
    issuer: a.issuer,
    store: stores[1],
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    clients: [CLIENT],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    now: () => a.clock.now,
  });
  const bHttp = await listen((request, info) => b.fetch(request, info));
  try {
    const started = await fetch(`${a.issuer}/device_authorization`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: CLIENT.clientId, resource: RESOURCE, scope: "notes:read" }),
    });
    expect(started.status).toBe(200);
    const device = (await started.json()) as { device_code: string; user_code: string };

    // The user signs in and answers at instance B.
    const agent = new Agent(bHttp.url);
    const toLogin = await agent.get("/device");
    const login = hiddenFields(await (await agent.get(toLogin.headers.get("location")!)).text());
    expect((await agent.post("/login", { ...login, username: USERNAME, password: PASSWORD })).status).toBe(
      303,
    );
    const entry = hiddenFields(await (await agent.get("/device")).text());
    const confirm = await agent.post("/device", { ...entry, user_code: device.user_code });
    expect(confirm.status).toBe(200);
    const decided = await agent.post("/device", {
      ...hiddenFields(await confirm.text()),
      decision: "approve",
    });
    expect(decided.status).toBe(200);

    a.clock.now += 5_000;
    const polls = await Promise.all(
      Array.from({ length: POLLS }, async (_, i) => {
        const response = await fetch(`${i % 2 === 0 ? a.issuer : bHttp.url}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: DEVICE_GRANT,
            device_code: device.device_code,
            client_id: CLIENT.clientId,
          }),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      }),
    );
    const issued = polls.filter((p) => p.status === 200);
    expect(issued).toHaveLength(1);
    expect(typeof issued[0]!.body.access_token).toBe("string");
    const refused = polls.filter((p) => p.status !== 200);
    expect(refused.map((p) => [p.status, p.body.error])).toEqual(
      Array.from({ length: POLLS - 1 }, () => [400, "invalid_grant"]),
    );
  } finally {
    await bHttp.close();
    await b.close();
    await a.close();
  }
}

describe("device authorization across instances", () => {
  const schemas = schemaNamer("gh_device_as");
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "gatehouse-device-as-"));
  });

  afterAll(async () => {
    await schemas.dropSchemas();
    await rm(dir, { recursive: true, force: true });
  });

  it("on one SQLite file: approved at one, redeemed exactly once across both", async () => {
    const path = join(dir, "gatehouse.db");
    await acrossInstances([createSqliteStore({ path }), createSqliteStore({ path })]);
  });

  it("on one PostgreSQL schema: approved at one, redeemed exactly once across both", async () => {
    await requirePostgres();
    const schema = schemas.next();
    await acrossInstances([
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
      createPostgresStore({ connectionString: POSTGRES_URL, schema }),
    ]);
  });
});
