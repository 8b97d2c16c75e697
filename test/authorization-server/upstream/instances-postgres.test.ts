/**
 * Two Gatehouse instances on one PostgreSQL schema behind one address (as behind a load balancer):
 * an upstream sign-in started at one instance completes at the other, for an MCP client's
 * authorization request (callback at B, consent at A, code redeemed at B) and for an account
 * sign-in; and the same callback raced at both instances signs in exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { silentLogger } from "../../../src/shared/log.js";
import { createPostgresStore, type PostgresStore } from "../../../src/storage/postgres/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { testTls } from "../../support/tls.js";
import { Agent, hiddenFields } from "../pages/harness.js";
import {
  pressProviderButton,
  RESOURCE,
  registerMcpClient,
  type ScriptedOidc,
  scriptedProviderOptions,
  startScriptedOidc,
  visitProvider,
} from "./support.js";

const schemas = schemaNamer("upstream_instances");
let idp: ScriptedOidc;
let front: ListeningServer;
let instances: AuthorizationServer[] = [];
let stores: PostgresStore[] = [];
/** Which instance the shared address sends the next request to. */
let target = 0;

beforeAll(async () => {
  await requirePostgres();
  idp = await startScriptedOidc();
  const schema = schemas.next();
  front = await listen((request, info) => instances[target]!.fetch(request, info));
  for (let i = 0; i < 2; i++) {
    const store = createPostgresStore({ connectionString: POSTGRES_URL, schema });
    stores.push(store);
    instances.push(
      await createAuthorizationServer({
        issuer: front.url,
        store,
        resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read"] }],
        allowInsecureLoopback: true,
        logger: silentLogger,
        maintenanceIntervalMs: 0,
        upstreamSignIn: {
          providers: [scriptedProviderOptions(idp, { createAccounts: true })],
          dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
        },
      }),
    );
  }
});
afterAll(async () => {
  for (const instance of instances) await instance.close();
  for (const store of stores) await store.close();
  await front?.close();
  await idp?.close();
  await schemas.dropSchemas();
  instances = [];
  stores = [];
});

describe("upstream sign-in across two instances on PostgreSQL", () => {
  it("an MCP client's request: started at A, callback at B, consent at A, code redeemed at B", async () => {
    target = 0;
    const client = await registerMcpClient(front.url);
    const agent = new Agent(front.url);
    const toLogin = await agent.get(client.authorizeUrl("across").replace(front.url, ""));
    expect(toLogin.status).toBe(303);
    const login = await agent.get(toLogin.headers.get("location")!);
    const started = await agent.post("/login", { ...hiddenFields(await login.text()), upstream: "idp" });
    expect(started.status).toBe(303);
    const back = await visitProvider(started.headers.get("location")!);

    target = 1;
    const done = await agent.get(back.location!);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toMatch(/^\/consent\?interaction=/);

    target = 0;
    const consent = await agent.get(done.headers.get("location")!);
    expect(consent.status).toBe(200);
    const approved = await agent.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    expect(approved.status).toBe(303);
    const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;

    target = 1;
    const tokens = await client.redeem(code);
    expect(tokens.status).toBe(200);
  });

  it("an account sign-in started at B completes at A; the state then is spent at both", async () => {
    target = 1;
    const agent = new Agent(front.url);
    const back = await visitProvider(await pressProviderButton(agent, "idp"));
    target = 0;
    expect((await agent.get(back.location!)).status).toBe(303);
    expect((await agent.get(back.location!)).status).toBe(400);
    target = 1;
    expect((await agent.get(back.location!)).status).toBe(400);
  });

  it("the same callback raced at both instances signs in exactly once", async () => {
    target = 0;
    const agent = new Agent(front.url);
    const back = await visitProvider(await pressProviderButton(agent, "idp"));
    const cookie = [...agent.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const answers = await Promise.all(
      [0, 1, 0, 1].map((i) =>
        instances[i]!.fetch(new Request(back.location!, { headers: { cookie } })).then((r) => r.status),
      ),
    );
    expect(answers.sort()).toEqual([303, 400, 400, 400]);
  });
});
