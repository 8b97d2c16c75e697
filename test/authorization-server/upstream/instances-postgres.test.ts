/**
 * Two Gatehouse instances on one PostgreSQL schema behind one address (as behind a load balancer):
 * an upstream sign-in started at one instance completes at the other, for an MCP client's
 * authorization request (callback at B, consent at A, code redeemed at B) and for an account
 * sign-in; and the same callback raced at both instances signs in exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/shared/log.js";
import { createPostgresStore } from "../../../src/storage/postgres/index.js";
import { POSTGRES_URL, requirePostgres, schemaNamer } from "../../storage/postgres-support.js";
import { testTls } from "../../support/tls.js";
import { Agent, hiddenFields } from "../pages/harness.js";
import {
  type InstancesBehindOneAddress,
  instancesBehindOneAddress,
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
/** Two instances; `pool.target` is the one the shared address sends the next request to. */
let pool: InstancesBehindOneAddress;

beforeAll(async () => {
  await requirePostgres();
  idp = await startScriptedOidc();
  const schema = schemas.next();
  pool = await instancesBehindOneAddress();
  for (let i = 0; i < 2; i++) {
    await pool.add(createPostgresStore({ connectionString: POSTGRES_URL, schema }), {
      issuer: pool.front.url,
      resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read"] }],
      allowInsecureLoopback: true,
      logger: silentLogger,
      maintenanceIntervalMs: 0,
      upstreamSignIn: {
        providers: [scriptedProviderOptions(idp, { createAccounts: true })],
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
    });
  }
});
afterAll(async () => {
  await pool?.close();
  await idp?.close();
  await schemas.dropSchemas();
});

describe("upstream sign-in across two instances on PostgreSQL", () => {
  it("an MCP client's request: started at A, callback at B, consent at A, code redeemed at B", async () => {
    pool.target = 0;
    const client = await registerMcpClient(pool.front.url);
    const agent = new Agent(pool.front.url);
    const toLogin = await agent.get(client.authorizeUrl("across").replace(pool.front.url, ""));
    expect(toLogin.status).toBe(303);
    const login = await agent.get(toLogin.headers.get("location")!);
    const started = await agent.post("/login", { ...hiddenFields(await login.text()), upstream: "idp" });
    expect(started.status).toBe(303);
    const back = await visitProvider(started.headers.get("location")!);

    pool.target = 1;
    const done = await agent.get(back.location!);
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toMatch(/^\/consent\?interaction=/);

    pool.target = 0;
    const consent = await agent.get(done.headers.get("location")!);
    expect(consent.status).toBe(200);
    const approved = await agent.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    expect(approved.status).toBe(303);
    const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;

    pool.target = 1;
    const tokens = await client.redeem(code);
    expect(tokens.status).toBe(200);
  });

  it("an account sign-in started at B completes at A; the state then is spent at both", async () => {
    pool.target = 1;
    const agent = new Agent(pool.front.url);
    const back = await visitProvider(await pressProviderButton(agent, "idp"));
    pool.target = 0;
    expect((await agent.get(back.location!)).status).toBe(303);
    expect((await agent.get(back.location!)).status).toBe(400);
    pool.target = 1;
    expect((await agent.get(back.location!)).status).toBe(400);
  });

  it("the same callback raced at both instances signs in exactly once", async () => {
    pool.target = 0;
    const agent = new Agent(pool.front.url);
    const back = await visitProvider(await pressProviderButton(agent, "idp"));
    const cookie = [...agent.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const answers = await Promise.all(
      [0, 1, 0, 1].map((i) =>
        pool.instances[i]!.fetch(new Request(back.location!, { headers: { cookie } })).then((r) => r.status),
      ),
    );
    expect(answers.sort()).toEqual([303, 400, 400, 400]);
  });
});
