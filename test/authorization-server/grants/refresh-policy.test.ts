/**
 * The refresh policy (refresh-policy.ts, docs/authorization-server.md "Refresh policy"), superseded
 * grants (grants/superseded-grants.ts) and the step-up refusal for co-hosted resources, through
 * whole flows against a real server on loopback with a controlled clock.
 */
import { afterEach, describe, expect, it } from "vitest";
import { STEP_UP_REFRESH_WINDOW_MS } from "../../../src/authorization-server/grants/refresh-policy.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  RESOURCE,
  redeem,
  refresh,
  signIn,
  startAuthorization,
  startFlowServer,
  tokenId,
} from "../support/flow-server.js";

const DAY = 24 * 60 * 60 * 1000;
const REDIRECT = "http://127.0.0.1:40001/callback";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Login + consent + token for `clientId` with `scope`; returns the token response. */
async function logIn(agent: Agent, clientId: string, scope: string) {
  const grant = await approve(agent, await signIn(agent, { clientId, redirectUri: REDIRECT, scope }));
  const tokens = await redeem(server!.issuer, clientId, grant, REDIRECT);
  expect(tokens.status).toBe(200);
  return tokens.body;
}

async function activeGrants(clientId: string) {
  return (await server!.store.listGrants({ clientId })).filter((g) => g.revokedAt === undefined);
}

describe("who gets a refresh token", () => {
  it("a client that declared the refresh_token grant gets one without offline_access, with the shorter lifetimes", async () => {
    server = await startFlowServer();
    const clientId = await server.register({
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
    });
    const started = server.clock.now;
    const body = await logIn(new Agent(server.http.url), clientId, "notes:read");
    expect(body.refresh_token).toBeTruthy();
    expect(body.scope).toBe("notes:read");
    const [grant] = await activeGrants(clientId);
    expect(grant!.expiresAt).toBe(started + 7 * DAY);
    const token = await server.store.getRefreshToken(sha256Base64url(body.refresh_token!));
    expect(token!.expiresAt).toBe(started + DAY);
    // A rotated successor keeps the shorter idle lifetime.
    server.clock.now += 1000;
    const rotated = await refresh(server.issuer, clientId, body.refresh_token!);
    expect(rotated.status).toBe(200);
    const successor = await server.store.getRefreshToken(sha256Base64url(rotated.body.refresh_token!));
    expect(successor!.expiresAt).toBe(server.clock.now + DAY);
    // Past the idle lifetime without use: refused.
    server.clock.now += DAY + 1000;
    const late = await refresh(server.issuer, clientId, rotated.body.refresh_token!);
    expect(late.status).toBe(400);
    expect(late.body.error).toBe("invalid_grant");
  });

  it("with offline_access the grant gets the configured (longer) lifetimes", async () => {
    server = await startFlowServer();
    const clientId = await server.register({
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
    });
    const started = server.clock.now;
    const body = await logIn(new Agent(server.http.url), clientId, "notes:read offline_access");
    expect(body.refresh_token).toBeTruthy();
    const [grant] = await activeGrants(clientId);
    expect(grant!.expiresAt).toBe(started + 90 * DAY);
    server.clock.now += 3 * DAY;
    expect((await refresh(server.issuer, clientId, body.refresh_token!)).status).toBe(200);
  });

  it("a client that declared grant types without refresh_token gets none, even with offline_access", async () => {
    server = await startFlowServer();
    const clientId = await server.register({
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
    });
    const body = await logIn(new Agent(server.http.url), clientId, "notes:read offline_access");
    expect(body.refresh_token).toBeUndefined();
  });

  it("a pre-registered client without declared grant types gets one only with offline_access, and can use it", async () => {
    server = await startFlowServer({ clients: [publicClient({ grantTypes: [] })] });
    const without = await logIn(new Agent(server.http.url), "cli", "notes:read");
    expect(without.refresh_token).toBeUndefined();
    const withOffline = await logIn(new Agent(server.http.url), "cli", "notes:read offline_access");
    expect(withOffline.refresh_token).toBeTruthy();
    // Issued, so usable: the token endpoint asks policy/grants.ts the same question (issue 23 defect 1).
    const refreshed = await refresh(server.issuer, "cli", withOffline.refresh_token!);
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    expect(refreshed.body.refresh_token).toBeTruthy();
    // A client without declared grant types still gets no other grant (RFC 7591 §2's default).
    const machine = await fetch(`${server.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "client_credentials", client_id: "cli", resource: RESOURCE }),
    });
    expect(machine.status).toBe(400);
    expect(((await machine.json()) as { error: string }).error).toBe("unauthorized_client");
  });
});

describe("a step-up supersedes the grant it widens", () => {
  /**
   * Login, then a step-up in the same sign-in on the running `server`: checks that only the wider
   * grant is left and the first refresh token is dead; returns the step-up's token response. The
   * step-up is this instance's: a co-hosted resource refused its token for insufficient scope
   * (superseded-grants.ts; a sibling instance's grant is not retired, superseded-instances.test.ts).
   */
  async function stepUpRetiresTheFirstGrant() {
    const agent = new Agent(server!.http.url);
    const first = await logIn(agent, "cli", "notes:read");
    expect(await server!.as.requestStepUp(tokenId(first.access_token!))).toBe(true);
    // Later than the first grant: of two grants created in the same millisecond the id decides
    // which is older (superseded-grants.ts), and the frozen clock would leave that to chance.
    server!.clock.now += 1000;
    const stepUp = await approve(
      agent,
      await startAuthorization(agent, {
        clientId: "cli",
        redirectUri: REDIRECT,
        scope: "notes:read notes:write",
      }),
    );
    const second = await redeem(server!.issuer, "cli", stepUp, REDIRECT);
    expect(second.status).toBe(200);
    const active = await activeGrants("cli");
    expect(active).toHaveLength(1);
    expect(active[0]!.scopes.sort()).toEqual(["notes:read", "notes:write"]);
    const old = await refresh(server!.issuer, "cli", first.refresh_token!);
    expect(old.body.error).toBe("invalid_grant");
    return second;
  }

  it("login → step-up in the same sign-in retires the first grant; its refresh token is dead", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const second = await stepUpRetiresTheFirstGrant();
    // Revoking the one left (a logout) leaves nothing active.
    await fetch(`${server.issuer}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: second.body.refresh_token!, client_id: "cli" }).toString(),
    });
    expect(await activeGrants("cli")).toHaveLength(0);
  });

  it("a store without listSupersedeCandidates (written before it existed) still retires the first grant", async () => {
    server = await startFlowServer({
      clients: [publicClient()],
      wrapStore: (store) => {
        const { listSupersedeCandidates: _left, ...older } = store;
        return older;
      },
    });
    await stepUpRetiresTheFirstGrant();
  });

  it("the redemption retires the first grant in its own transaction: no read or revocation after it, one audit event", async () => {
    const afterCommit: string[] = [];
    const superseded: unknown[] = [];
    server = await startFlowServer({
      clients: [publicClient()],
      extra: {
        onAuditEvent: (event) => {
          if (event.type === "grant_superseded") superseded.push(event.grant_id);
        },
      },
      wrapStore: (store) => ({
        ...store,
        async listSupersedeCandidates(key) {
          afterCommit.push("listSupersedeCandidates");
          return store.listSupersedeCandidates!(key);
        },
        async listGrants(filter) {
          if (filter?.sessionHash !== undefined) afterCommit.push("listGrants");
          return store.listGrants(filter);
        },
        async revokeGrant(grantId, now) {
          afterCommit.push("revokeGrant");
          return store.revokeGrant(grantId, now);
        },
      }),
    });
    await stepUpRetiresTheFirstGrant();
    expect(afterCommit).toEqual([]);
    const retired = (await server.store.listGrants({ clientId: "cli" })).filter(
      (g) => g.revokedAt !== undefined,
    );
    expect(retired).toHaveLength(1);
    expect(superseded).toEqual([retired[0]!.grantId]);
  });

  it("a store that ignores the decision, or whose decision throws, still retires the first grant after the commit", async () => {
    for (const decision of ["ignored", "throws"] as const) {
      server = await startFlowServer({
        clients: [publicClient()],
        wrapStore: (store) => ({
          ...store,
          async redeemAuthorizationCode(codeHash, now, check, tokens) {
            if (decision === "ignored") return store.redeemAuthorizationCode(codeHash, now, check, tokens);
            return store.redeemAuthorizationCode(codeHash, now, check, tokens, () => {
              throw new Error("decision failed");
            });
          },
        }),
      });
      await stepUpRetiresTheFirstGrant();
      await server.close();
      server = undefined;
    }
  });

  it("another sign-in (another device or browser) keeps its own grant", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const laptop = await logIn(new Agent(server.http.url), "cli", "notes:read");
    await logIn(new Agent(server.http.url), "cli", "notes:read notes:write");
    expect(await activeGrants("cli")).toHaveLength(2);
    expect((await refresh(server.issuer, "cli", laptop.refresh_token!)).status).toBe(200);
  });

  it("retired after the commit (a store that does not retire in the redemption): two step-ups of one sign-in finishing together retire the marked grant, and neither retires the other", async () => {
    // Each retirement reads the session's grants only once both new grants exist, as when two
    // token requests of one browser sign-in are redeemed at the same moment.
    let counting = false;
    let created = 0;
    let bothCreated: () => void = () => {};
    const both = new Promise<void>((resolve) => {
      bothCreated = resolve;
    });
    server = await startFlowServer({
      clients: [publicClient()],
      wrapStore: (store) => ({
        ...store,
        async createGrantWithAccessToken(grant, accessToken) {
          await store.createGrantWithAccessToken(grant, accessToken);
          if (counting && ++created === 2) bothCreated();
        },
        async redeemAuthorizationCode(codeHash, now, check, tokens) {
          const result = await store.redeemAuthorizationCode(codeHash, now, check, tokens);
          if (counting && result.status === "issued" && ++created === 2) bothCreated();
          return result;
        },
        async listGrants(filter) {
          if (counting) await both;
          return store.listGrants(filter);
        },
      }),
    });
    const agent = new Agent(server.http.url);
    const first = await logIn(agent, "cli", "notes:read");
    expect(await server.as.requestStepUp(tokenId(first.access_token!))).toBe(true);
    server.clock.now += 1000;
    counting = true;
    const codes = [];
    for (let i = 0; i < 2; i++) {
      const request = await startAuthorization(agent, {
        clientId: "cli",
        redirectUri: REDIRECT,
        scope: "notes:read notes:write",
      });
      codes.push(await approve(agent, request));
    }
    const answers = await Promise.all(codes.map((code) => redeem(server!.issuer, "cli", code, REDIRECT)));
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    // The marked grant is gone; the two new ones (equal scopes, unmarked) both stay.
    const active = await activeGrants("cli");
    expect(active.map((g) => [...g.scopes].sort())).toEqual([
      ["notes:read", "notes:write"],
      ["notes:read", "notes:write"],
    ]);
    expect((await refresh(server.issuer, "cli", first.refresh_token!)).body.error).toBe("invalid_grant");
  });

  it("retired after the commit: step-ups of one sign-in finishing together revoke the superseded grant once", async () => {
    // Four step-up redemptions whose retirements all read the session's grants once the four
    // exist: each retires the marked grant. Revocations already on their way are joined, not sent
    // again.
    const flows = 4;
    let counting = false;
    let created = 0;
    let allCreated: () => void = () => {};
    const all = new Promise<void>((resolve) => {
      allCreated = resolve;
    });
    const revoked: string[] = [];
    const superseded: unknown[] = [];
    server = await startFlowServer({
      clients: [publicClient()],
      extra: {
        onAuditEvent: (event) => {
          if (event.type === "grant_superseded") superseded.push(event.grant_id);
        },
      },
      wrapStore: (store) => ({
        ...store,
        async redeemAuthorizationCode(codeHash, now, check, tokens) {
          const result = await store.redeemAuthorizationCode(codeHash, now, check, tokens);
          if (counting && result.status === "issued" && ++created === flows) allCreated();
          return result;
        },
        async listGrants(filter) {
          if (counting) await all;
          return store.listGrants(filter);
        },
        async revokeGrant(grantId, now) {
          revoked.push(grantId);
          // Still on its way when the other retirements get to the same grant.
          await new Promise((resolve) => setTimeout(resolve, 50));
          return store.revokeGrant(grantId, now);
        },
      }),
    });
    const agent = new Agent(server.http.url);
    const first = await logIn(agent, "cli", "notes:read");
    expect(await server.as.requestStepUp(tokenId(first.access_token!))).toBe(true);
    const [marked] = await activeGrants("cli");
    server.clock.now += 1000;
    counting = true;
    const codes = [];
    for (let i = 0; i < flows; i++) {
      const request = await startAuthorization(agent, {
        clientId: "cli",
        redirectUri: REDIRECT,
        scope: "notes:read notes:write",
      });
      codes.push(await approve(agent, request));
    }
    const answers = await Promise.all(codes.map((code) => redeem(server!.issuer, "cli", code, REDIRECT)));
    expect(answers.map((a) => a.status)).toEqual(Array(flows).fill(200));
    expect(await activeGrants("cli")).toHaveLength(flows);
    expect(revoked).toEqual([marked!.grantId]);
    // One audit event for the grant retired, from whichever retirement revoked it.
    expect(superseded).toEqual([marked!.grantId]);
  });

  it("a narrower grant in the same sign-in does not supersede a wider one", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const agent = new Agent(server.http.url);
    await logIn(agent, "cli", "notes:read notes:write");
    const narrower = await approve(
      agent,
      await startAuthorization(agent, { clientId: "cli", redirectUri: REDIRECT, scope: "notes:read" }),
    );
    expect((await redeem(server.issuer, "cli", narrower, REDIRECT)).status).toBe(200);
    expect(await activeGrants("cli")).toHaveLength(2);
  });
});

describe("the step-up refusal for a co-hosted resource (MCP SDK v1 interop)", () => {
  it("right after the gate refused a token for insufficient scope, its grant's refresh answers invalid_grant and nothing is revoked", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    const body = await logIn(new Agent(server.http.url), "cli", "notes:read");
    expect(await server.as.requestStepUp(tokenId(body.access_token!))).toBe(true);
    const refused = await refresh(server.issuer, "cli", body.refresh_token!);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe("invalid_grant");
    expect(await activeGrants("cli")).toHaveLength(1);
    // After the window the same refresh token works: the rule never costs more than one consent.
    server.clock.now += STEP_UP_REFRESH_WINDOW_MS;
    const later = await refresh(server.issuer, "cli", body.refresh_token!);
    expect(later.status).toBe(200);
    // A refresh token issued after the refusal is not touched by it.
    server.clock.now += 1000;
    expect((await refresh(server.issuer, "cli", later.body.refresh_token!)).status).toBe(200);
  });

  it("a refresh sent before the mark's write finished still sees it (the gate does not await its hook)", async () => {
    server = await startFlowServer({
      clients: [publicClient()],
      wrapStore: (store) => ({
        ...store,
        async requestStepUp(jti, now) {
          await new Promise((resolve) => setTimeout(resolve, 300));
          return store.requestStepUp(jti, now);
        },
      }),
    });
    const body = await logIn(new Agent(server.http.url), "cli", "notes:read");
    void server.as.requestStepUp(tokenId(body.access_token!));
    const refused = await refresh(server.issuer, "cli", body.refresh_token!);
    expect(refused.body.error).toBe("invalid_grant");
  });

  it("unknown token ids and revoked grants are not marked", async () => {
    server = await startFlowServer({ clients: [publicClient()] });
    expect(await server.as.requestStepUp("no-such-jti")).toBe(false);
    expect(await server.as.requestStepUp(undefined)).toBe(false);
    const body = await logIn(new Agent(server.http.url), "cli", "notes:read");
    const [grant] = await activeGrants("cli");
    await server.store.revokeGrant(grant!.grantId, server.clock.now);
    expect(await server.as.requestStepUp(tokenId(body.access_token!))).toBe(false);
  });
});
