/**
 * Step-up for an MCP SDK v1 client through `gatehouse gateway` (its own process) sharing the
 * authorization server's store, SQLite (`--data`) or PostgreSQL (GATEHOUSE_DATABASE_URL): its 403
 * `insufficient_scope` marks the grant as a co-hosted resource server's `onInsufficientScope` does
 * (AuthorizationServer.requestStepUp, refresh-policy.ts stepUpRefusal). The official SDK v1
 * client, which answers a 403 by refreshing and never re-authorizes on its own, gets
 * `invalid_grant` for that refresh and so authorizes again for the added scope. Control: the same
 * client through a gateway without the store refreshes successfully at the old scope and never
 * gets the tool.
 *
 * Real parts: the authorization server (in process, a SQLite file or a PostgreSQL database of its
 * own, plain http on loopback), server-everything over Streamable HTTP (its own process), the
 * gateway CLI (dist), SDK v1; the browser is the form-submitting user agent of the examples'
 * tests, coming back to the client's loopback redirect.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
} from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { silentLogger } from "../../src/shared/log.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore, type SqliteStore } from "../../src/storage/sqlite/index.js";
import { ensureBuilt, runCli } from "../cli/helpers.js";
import { FormUserAgent } from "../examples/form-user-agent.js";
import { AuthorizationHandoff, type ChromiumUser, LoopbackRedirect } from "../interop/browser-user.js";
import { SdkV1NotesApp, SdkV1Provider } from "../interop/sdk-v1-app.js";
import { createTestDatabase, type TestDatabase } from "../support/instances.js";
import { freePort, startEverything } from "./everything.js";
import { type GatewayProcess, startGatewayProcess } from "./gateway-process.js";

const PASSWORD = "correct horse battery staple";

let dir: string;
let store: SqliteStore;
let as: AuthorizationServer;
let asHttp: ListeningServer;
let everything: Awaited<ReturnType<typeof startEverything>>;
let policyFile: string;
/** What clients sent to /token: the grant type, and the answer's status and error. */
const tokenCalls: { grantType: string | null; status: number; error?: string }[] = [];

/** Test PostgreSQL database of the second authorization server (dropped at the end). */
let database: TestDatabase;
let pgStore: AuthorizationStore;
let pgAs: { as: AuthorizationServer; http: ListeningServer };
let resources: string[] = [];
let gatewayPorts: number[] = [];

/** An authorization server on `store`, listening on loopback, recording /token answers, with alice. */
async function startAuthorizationServer(store: AuthorizationStore, uris: string[]) {
  let server: AuthorizationServer | undefined;
  const http = await listen(async (request) => {
    if (new URL(request.url).pathname !== "/token") return server!.fetch(request);
    const form = new URLSearchParams(await request.clone().text());
    const response = await server!.fetch(request);
    const answer = (await response.clone().json()) as { error?: string };
    tokenCalls.push({
      grantType: form.get("grant_type"),
      status: response.status,
      ...(answer.error && { error: answer.error }),
    });
    return response;
  });
  server = await createAuthorizationServer({
    issuer: http.url,
    allowInsecureLoopback: true,
    store,
    resources: uris.map((uri) => ({ uri, name: "Everything", scopes: ["mcp:use", "math"] })),
    scopeDescriptions: { "mcp:use": "Use the MCP server", math: "Do sums" },
    maintenanceIntervalMs: 0,
    logger: silentLogger,
  });
  await store.createUser({
    id: "u-alice",
    username: "alice",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
  return { as: server, http };
}

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-step-up-"));
  everything = await startEverything();
  policyFile = join(dir, "policy.yaml");
  writeFileSync(policyFile, "base: [mcp:use]\ndefault: {}\ntools: { get-sum: { scopes: [math] } }\n");
  // The gateways' resources: sharing the SQLite store, the control, sharing the PostgreSQL one.
  gatewayPorts = [await freePort(), await freePort(), await freePort()];
  resources = gatewayPorts.map((p) => `http://127.0.0.1:${p}/mcp`);
  store = createSqliteStore({ path: join(dir, "gatehouse.sqlite") });
  ({ as, http: asHttp } = await startAuthorizationServer(store, resources.slice(0, 2)));
  database = await createTestDatabase("gwstepup");
  pgStore = createPostgresStore({ connectionString: database.url });
  pgAs = await startAuthorizationServer(pgStore, resources.slice(2));
}, 60_000);

afterAll(async () => {
  await as?.close();
  await asHttp?.close();
  await store?.close();
  await pgAs?.as.close();
  await pgAs?.http.close();
  await pgStore?.close();
  await database?.drop();
  everything?.child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** The SDK v1 app with a "browser" that signs alice in, consents, and comes back to the redirect. */
async function sdkV1App(resource: string) {
  const agent = new FormUserAgent("alice", PASSWORD);
  const redirect = await LoopbackRedirect.start();
  const user = {
    async authorize(url: URL) {
      await fetch(await agent.open(url));
    },
  } as unknown as ChromiumUser;
  const handoff = new AuthorizationHandoff(user, redirect);
  const provider = new SdkV1Provider(handoff);
  const app = new SdkV1NotesApp(new URL(resource), provider);
  return { agent, handoff, provider, app, redirect };
}

function gatewayArgs(port: number, extra: string[], issuer = asHttp.url): string[] {
  return [
    "--upstream",
    everything.url,
    "--resource",
    `http://127.0.0.1:${port}/mcp`,
    "--authorization-server",
    issuer,
    "--policy",
    policyFile,
    "--port",
    String(port),
    "--json",
    ...extra,
  ];
}

describe("gatehouse gateway --data: step-up for MCP SDK v1 through the shared store", () => {
  /** Login, a permitted call, then get-sum: SDK v1's step-up through the gateway's mark. */
  async function expectSdkV1StepUp(gateway: GatewayProcess, resource: string, storeLine: string) {
    const { agent, handoff, provider, app, redirect } = await sdkV1App(resource);
    try {
      expect(JSON.parse(gateway.stdout.split("\n")[0]!)).toMatchObject({ step_up_store: storeLine });
      await app.connect();
      expect(agent.visits).toHaveLength(1);
      expect(agent.visits[0]!.consentPage).not.toContain("Do sums");
      const echoed = await app.callTool("echo", { message: "through the gateway" });
      expect(JSON.stringify(echoed.content)).toContain("through the gateway");

      const before = tokenCalls.length;
      const sum = await app.callTool("get-sum", { a: 20, b: 22 });
      expect(JSON.stringify(sum.content)).toContain("42");
      // SDK v1 answered the 403 by refreshing; the mark made that refresh invalid_grant, so it
      // dropped its tokens and sent the user to authorize math.
      const after = tokenCalls.slice(before);
      expect(after.filter((c) => c.grantType === "refresh_token")).toEqual([
        { grantType: "refresh_token", status: 400, error: "invalid_grant" },
      ]);
      expect(provider.invalidated).toContain("tokens");
      expect(handoff.opened).toBe(2);
      expect(agent.visits[1]).toMatchObject({ login: false, consent: true });
      expect(agent.visits[1]!.consentPage).toContain("Do sums");
      // The stepped-up grant goes on working.
      expect(JSON.stringify((await app.callTool("get-sum", { a: 1, b: 2 })).content)).toContain("3");
    } finally {
      await app.close().catch(() => {});
      await redirect.close();
      expect(await gateway.stop()).toBe(0);
    }
    expect(gateway.stderr).toContain('"decision":"insufficient_scope"');
  }

  it("SQLite (--data): the 403 marks the grant, SDK v1's refresh gets invalid_grant, it authorizes again for math", async () => {
    const gateway = await startGatewayProcess(gatewayArgs(gatewayPorts[0]!, ["--data", dir]));
    await expectSdkV1StepUp(gateway, resources[0]!, `SQLite ${join(dir, "gatehouse.sqlite")}`);
  }, 90_000);

  it("PostgreSQL (GATEHOUSE_DATABASE_URL): the same through the shared database", async () => {
    const gateway = await startGatewayProcess(gatewayArgs(gatewayPorts[2]!, [], pgAs.http.url), {
      ...process.env,
      GATEHOUSE_DATABASE_URL: database.url,
    });
    await expectSdkV1StepUp(gateway, resources[2]!, `PostgreSQL 127.0.0.1:5432/${database.name}`);
  }, 90_000);

  it("usage: --data must hold the authorization server's database; not with --database-url", async () => {
    const empty = mkdtempSync(join(tmpdir(), "gatehouse-gateway-no-store-"));
    try {
      const missing = await runCli(["gateway", ...gatewayArgs(1, ["--data", empty])]);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(
        `--data: no authorization server database at ${join(empty, "gatehouse.sqlite")}`,
      );
      const both = await runCli([
        "gateway",
        ...gatewayArgs(1, ["--data", dir, "--database-url", "postgres://127.0.0.1/test"]),
      ]);
      expect(both.code).toBe(2);
      expect(both.stderr).toContain("give --data or --database-url, not both");
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("control, without the store: SDK v1 refreshes at the old scope and never gets the tool", async () => {
    const gateway = await startGatewayProcess(gatewayArgs(gatewayPorts[1]!, []));
    const { handoff, app, redirect } = await sdkV1App(resources[1]!);
    try {
      await app.connect();
      const before = tokenCalls.length;
      const failure = await app.callTool("get-sum", { a: 20, b: 22 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(Error);
      const refreshes = tokenCalls.slice(before).filter((c) => c.grantType === "refresh_token");
      expect(refreshes.length).toBeGreaterThan(0);
      expect(refreshes.every((c) => c.status === 200)).toBe(true);
      expect(handoff.opened).toBe(1);
    } finally {
      await app.close().catch(() => {});
      await redirect.close();
      await gateway.stop();
    }
  }, 90_000);
});
