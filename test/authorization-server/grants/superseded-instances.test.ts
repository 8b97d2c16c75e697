/**
 * Two instances of one client log each other out (issue 21): a new grant for the same user, client,
 * resource and browser sign-in retired every older grant it covered, so two terminals of one CLI,
 * two windows of one app or two installations of a metadata-document client (one client_id)
 * authorizing in one browser session revoked each other. The rule now (superseded-grants.ts
 * `supersededInSignIn`): an older grant is retired only when the new one proves to come from the
 * same instance (the same DPoP key, or a step-up a co-hosted resource asked of that grant), and a
 * sign-in keeps at most MAX_ACTIVE_GRANTS_PER_SIGN_IN active grants, the oldest retired.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomToken } from "../../../src/authorization-server/core/random.js";
import { MAX_ACTIVE_GRANTS_PER_SIGN_IN } from "../../../src/authorization-server/grants/superseded-grants.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { Browser, obtainCode, redeemCode, refreshGrant, tokenSet } from "../../support/flow.js";
import { type InProcessServer, serveInProcess, testFlow } from "../../support/in-process.js";
import { CLIENT_ID, createBackend, createUsers, testClient } from "../../support/instances.js";
import { type ProofKey, proof, proofKey } from "../dpop-support.js";
import {
  codeRequest,
  ISSUER,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  postToken,
  type TestServer,
} from "../helpers.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  redeem,
  refresh,
  signIn,
  startAuthorization,
  startFlowServer,
  tokenId,
} from "../support/flow-server.js";

const REDIRECT_CLI = "http://127.0.0.1:40001/callback";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** One instance's authorization in the browser `agent` (signed in already, or signing in now). */
async function authorize(agent: Agent, scope: string, first = false) {
  const attempt = { clientId: "cli", redirectUri: REDIRECT_CLI, scope };
  return approve(agent, await (first ? signIn : startAuthorization)(agent, attempt));
}

async function activeGrants() {
  return (await server!.store.listGrants({ clientId: "cli" })).filter((g) => g.revokedAt === undefined);
}

describe("instances of one client in one browser sign-in", () => {
  it("two instances authorizing one after the other both keep their grants and both refresh", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const browser = new Agent(server.http.url);
    const one = await redeem(
      server.issuer,
      "cli",
      await authorize(browser, "notes:read", true),
      REDIRECT_CLI,
    );
    server.clock.now += 1000;
    const two = await redeem(server.issuer, "cli", await authorize(browser, "notes:read"), REDIRECT_CLI);
    expect([one.status, two.status]).toEqual([200, 200]);
    expect(await activeGrants()).toHaveLength(2);
    expect((await refresh(server.issuer, "cli", one.body.refresh_token!)).status).toBe(200);
    expect((await refresh(server.issuer, "cli", two.body.refresh_token!)).status).toBe(200);
  });

  it("16 instances finishing their flows together all keep refreshing (the measured case)", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const browser = new Agent(server.http.url);
    const codes = [await authorize(browser, "notes:read", true)];
    for (let i = 1; i < 16; i++) codes.push(await authorize(browser, "notes:read"));
    const answers = await Promise.all(codes.map((code) => redeem(server!.issuer, "cli", code, REDIRECT_CLI)));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const refreshed = await Promise.all(
      answers.map((a) => refresh(server!.issuer, "cli", a.body.refresh_token!)),
    );
    expect(refreshed.map((r) => r.status)).toEqual(refreshed.map(() => 200));
    expect(await activeGrants()).toHaveLength(16);
  });

  it("a step-up retires the older grant of the instance the resource asked to step up, not its sibling's", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const browser = new Agent(server.http.url);
    const stepping = await redeem(
      server.issuer,
      "cli",
      await authorize(browser, "notes:read", true),
      REDIRECT_CLI,
    );
    server.clock.now += 1000;
    const sibling = await redeem(server.issuer, "cli", await authorize(browser, "notes:read"), REDIRECT_CLI);
    // A co-hosted resource refused the first instance's token for insufficient scope.
    expect(await server.as.requestStepUp(tokenId(stepping.body.access_token!))).toBe(true);
    server.clock.now += 1000;
    const wider = await redeem(
      server.issuer,
      "cli",
      await authorize(browser, "notes:read notes:write"),
      REDIRECT_CLI,
    );
    expect(wider.status).toBe(200);
    const active = await activeGrants();
    expect(active.map((g) => [...g.scopes].sort())).toEqual([["notes:read"], ["notes:read", "notes:write"]]);
    expect((await refresh(server.issuer, "cli", stepping.body.refresh_token!)).body.error).toBe(
      "invalid_grant",
    );
    expect((await refresh(server.issuer, "cli", sibling.body.refresh_token!)).status).toBe(200);
    expect((await refresh(server.issuer, "cli", wider.body.refresh_token!)).status).toBe(200);
  });

  it("a grant of equal scopes does not retire a marked grant: only a strictly wider one is its step-up", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const browser = new Agent(server.http.url);
    const marked = await redeem(
      server.issuer,
      "cli",
      await authorize(browser, "notes:read", true),
      REDIRECT_CLI,
    );
    expect(await server.as.requestStepUp(tokenId(marked.body.access_token!))).toBe(true);
    server.clock.now += 1000;
    await redeem(server.issuer, "cli", await authorize(browser, "notes:read"), REDIRECT_CLI);
    expect(await activeGrants()).toHaveLength(2);
  });

  it(`a sign-in keeps at most ${MAX_ACTIVE_GRANTS_PER_SIGN_IN} active grants of one client: the oldest is retired`, async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const browser = new Agent(server.http.url);
    const first = await redeem(
      server.issuer,
      "cli",
      await authorize(browser, "notes:read", true),
      REDIRECT_CLI,
    );
    const rest: string[] = [];
    for (let i = 1; i <= MAX_ACTIVE_GRANTS_PER_SIGN_IN; i++) {
      server.clock.now += 1000;
      const answer = await redeem(server.issuer, "cli", await authorize(browser, "notes:read"), REDIRECT_CLI);
      rest.push(answer.body.refresh_token!);
    }
    expect(await activeGrants()).toHaveLength(MAX_ACTIVE_GRANTS_PER_SIGN_IN);
    expect((await refresh(server.issuer, "cli", first.body.refresh_token!)).body.error).toBe("invalid_grant");
    expect((await refresh(server.issuer, "cli", rest[0]!)).status).toBe(200);
  });
});

/** Redeems a code of `sessionHash` for the public client with a DPoP proof of `key`. */
async function redeemBound(t: TestServer, sessionHash: string, key: ProofKey) {
  const { code, verifier } = await issueCode(t, { sessionHash });
  const answer = await postToken(t, codeRequest(code, verifier), {
    dpop: await proof(key, `${ISSUER}/token`, t.clock.now),
  });
  expect(answer.status).toBe(200);
  return answer.body;
}

describe("the same DPoP key is the same instance (RFC 9449 §5)", () => {
  it("a new grant bound to an older grant's key retires it; a grant of another key stays", async () => {
    const t = await makeServer();
    const session = sha256Base64url(randomToken());
    const [keyA, keyB] = [await proofKey(), await proofKey()];
    await redeemBound(t, session, keyA);
    t.clock.advance(1);
    await redeemBound(t, session, keyB);
    expect(await t.store.listGrants({ clientId: PUBLIC_CLIENT, active: true })).toHaveLength(2);
    t.clock.advance(1);
    await redeemBound(t, session, keyA);
    const active = await t.store.listGrants({ clientId: PUBLIC_CLIENT, active: true });
    expect(active).toHaveLength(2);
    expect(active.map((g) => g.dpopJkt).sort()).toEqual([keyA.jkt, keyB.jkt].sort());
    expect(active.find((g) => g.dpopJkt === keyA.jkt)?.createdAt).toBe(t.clock.now);
  });
});

describe.each(["SQLite", "PostgreSQL"] as const)("instances of one client in one sign-in on %s", (name) => {
  let backend: { store: AuthorizationStore; cleanup(): Promise<void> };
  let served: InProcessServer;
  let username: string;

  beforeAll(async () => {
    backend = await createBackend(name, "instances");
    await backend.store.migrate();
    await backend.store.createClient(testClient());
    [username] = (await createUsers(backend.store, "instances", 1)) as [string];
    served = await serveInProcess(backend.store);
  }, 60_000);

  afterAll(async () => {
    await served?.close();
    await backend?.cleanup();
  });

  it("two instances keep their grants; the marked one's step-up retires only its own older grant", async () => {
    const base = served.http.url;
    const browser = new Browser();
    const narrow = { ...testFlow(() => base, username), scope: "notes:read offline_access", browser };
    const one = await tokenSet(await redeemCode(base, narrow, await obtainCode(narrow)));
    const two = await tokenSet(await redeemCode(base, narrow, await obtainCode(narrow)));
    expect((await refreshGrant(base, CLIENT_ID, one.refresh_token!)).status).toBe(200);
    const twoNext = await tokenSet(await refreshGrant(base, CLIENT_ID, two.refresh_token!));
    // The co-hosted resource refused the first instance's token; it steps up in the same browser.
    const jti = JSON.parse(Buffer.from(one.access_token.split(".")[1]!, "base64url").toString()).jti;
    expect(await served.server.requestStepUp(jti)).toBe(true);
    const wide = { ...narrow, scope: "notes:read notes:write offline_access" };
    const stepped = await tokenSet(await redeemCode(base, wide, await obtainCode(wide)));
    const grants = await backend.store.listGrants({ clientId: CLIENT_ID, active: true });
    expect(grants.map((g) => [...g.scopes].sort().join(" ")).sort()).toEqual([
      "notes:read notes:write offline_access",
      "notes:read offline_access",
    ]);
    expect((await refreshGrant(base, CLIENT_ID, twoNext.refresh_token!)).status).toBe(200);
    expect((await refreshGrant(base, CLIENT_ID, stepped.refresh_token!)).status).toBe(200);
  }, 60_000);
});
