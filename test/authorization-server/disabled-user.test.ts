/**
 * Issue 26: a disabled user gets nothing. Over real HTTP on loopback against the memory store:
 * a code issued before the disabling (sealed, which leaves no row the disabling could find, and
 * stored) is refused at /token with its grant revoked; a device approval not yet redeemed is denied,
 * and a poll that commits between the account's change and the end of its access gets nothing; an
 * existing grant's refresh is refused; the login page says "disabled" only after the right password
 * (a wrong one reads as for an unknown user: no enumeration); a session left behind signs nobody in.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../src/authorization-server/core/audit.js";
import { changeAccount } from "../../src/authorization-server/core/user-accounts.js";
import { hiddenFields, PASSWORD } from "./pages/harness.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  RESOURCE,
  redeem,
  refresh,
  signIn,
  startFlowServer,
  tokenRequest,
  USERNAME,
} from "./support/flow-server.js";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const REDIRECT = "http://127.0.0.1/callback";
const USER_ID = "u1";

let server: FlowServer | undefined;
let audit: AuditEvent[];

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(sealed: boolean): Promise<FlowServer> {
  audit = [];
  server = await startFlowServer({
    clients: [
      publicClient({ clientId: "cli", redirectUris: [REDIRECT] }),
      publicClient({
        clientId: "tv",
        redirectUris: [],
        responseTypes: [],
        grantTypes: [DEVICE_GRANT, "refresh_token"],
      }),
    ],
    extra: {
      ...(sealed ? { keyEncryptionKeys: [randomBytes(32).toString("base64url")] } : {}),
      onAuditEvent: (event) => {
        audit.push(event);
      },
    },
  });
  return server;
}

async function codeFor(s: FlowServer, agent = new Agent(s.issuer)) {
  return approve(
    agent,
    await signIn(agent, { clientId: "cli", redirectUri: REDIRECT, scope: "notes:read offline_access" }),
  );
}

async function loginAttempt(s: FlowServer, password: string): Promise<{ status: number; html: string }> {
  const agent = new Agent(s.issuer);
  const start = await agent.get("/account");
  const html = await start.text();
  const link = /href="([^"]*\/login[^"]*)"/.exec(html)?.[1] ?? "/login";
  const page = await agent.get(link.replaceAll("&amp;", "&"));
  const done = await agent.post("/login", {
    ...hiddenFields(await page.text()),
    username: USERNAME,
    password,
  });
  return { status: done.status, html: await done.text() };
}

describe("a disabled user gets no grant", () => {
  it.each([
    ["sealed", true],
    ["stored", false],
  ])(
    "a %s code issued before the disabling is refused at /token and its grant revoked",
    async (_kind, sealed) => {
      const s = await start(sealed);
      const code = await codeFor(s);
      expect((await changeAccount(s.store, USER_ID, "disable", Date.now())).status).toBe("changed");
      const redeemed = await redeem(s.issuer, "cli", code, REDIRECT);
      expect(redeemed).toEqual({ status: 400, body: expect.objectContaining({ error: "invalid_grant" }) });
      expect(redeemed.body.access_token).toBeUndefined();
      const grants = await s.store.listGrants({ userId: USER_ID });
      expect(grants.length).toBeGreaterThan(0);
      expect(grants.every((g) => g.revokedAt !== undefined)).toBe(true);
      expect(audit.filter((e) => e.type === "grant_issued")).toEqual([]);
    },
  );

  it("an existing grant's refresh is refused once the user is disabled", async () => {
    const s = await start(false);
    const code = await codeFor(s);
    const tokens = await redeem(s.issuer, "cli", code, REDIRECT);
    expect(tokens.status).toBe(200);
    const result = await changeAccount(s.store, USER_ID, "disable", Date.now());
    expect(result).toMatchObject({ status: "changed", ended: { grants: 1, sessions: 1 } });
    const refreshed = await refresh(s.issuer, "cli", tokens.body.refresh_token!);
    expect(refreshed).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });

  it("a device approval not yet redeemed is denied; a poll committed between the change and the end of access gets nothing", async () => {
    const s = await start(false);
    const agent = new Agent(s.issuer);
    await codeFor(s, agent); // signs the browser in
    const approveDevice = async () => {
      const started = await fetch(`${s.issuer}/device_authorization`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: "tv", resource: RESOURCE, scope: "notes:read" }).toString(),
      });
      const { device_code, user_code } = (await started.json()) as { device_code: string; user_code: string };
      const entry = await agent.get("/device");
      const confirm = await agent.post("/device", { ...hiddenFields(await entry.text()), user_code });
      const decided = await agent.post("/device", {
        ...hiddenFields(await confirm.text()),
        decision: "approve",
      });
      expect(decided.status).toBe(200);
      return device_code;
    };
    const poll = (device_code: string) =>
      tokenRequest(s.issuer, { grant_type: DEVICE_GRANT, device_code, client_id: "tv" });

    // The race: the account is changed, the poll commits its grant before endUserAccess ran.
    const raced = await approveDevice();
    await s.store.changeUser(USER_ID, "disable", Date.now());
    expect(await poll(raced)).toMatchObject({ status: 400, body: { error: "access_denied" } });
    const tvGrants = await s.store.listGrants({ clientId: "tv" });
    expect(tvGrants).toHaveLength(1);
    expect(tvGrants[0]!.revokedAt).toBeDefined();

    await s.store.changeUser(USER_ID, "enable", Date.now());
    const waiting = await approveDevice();
    await changeAccount(s.store, USER_ID, "disable", Date.now());
    expect(await poll(waiting)).toMatchObject({ status: 400, body: { error: "access_denied" } });
    expect(await s.store.listGrants({ clientId: "tv", active: true })).toEqual([]);
  });
});

describe("a disabled user cannot sign in", () => {
  it("the login page says 'disabled' only after the right password; a wrong one reads as for anyone", async () => {
    const s = await start(false);
    await changeAccount(s.store, USER_ID, "disable", Date.now());
    const wrong = await loginAttempt(s, "not the password at all");
    expect(wrong.status).toBe(400);
    expect(wrong.html).toContain("Incorrect username or password.");
    expect(wrong.html).not.toMatch(/disabled/i);
    const right = await loginAttempt(s, PASSWORD);
    expect(right.status).toBe(403);
    expect(right.html).toContain("This account is disabled.");
    expect(audit).toContainEqual(
      expect.objectContaining({ type: "login_failed", user_id: USER_ID, reason: "account_disabled" }),
    );
    expect(audit.some((e) => e.type === "login_succeeded")).toBe(false);
    await changeAccount(s.store, USER_ID, "enable", Date.now());
    expect((await loginAttempt(s, PASSWORD)).status).toBe(303);
  });

  it("a session left behind by a sign-in that raced the disabling signs nobody in", async () => {
    const s = await start(false);
    const agent = new Agent(s.issuer);
    await codeFor(s, agent);
    expect(await (await agent.get("/account")).text()).toContain(USERNAME);
    // The change alone (the session row is still there, as when a sign-in commits after the end of access).
    await s.store.changeUser(USER_ID, "disable", Date.now());
    const page = await (await agent.get("/account")).text();
    expect(page).not.toContain(`data-testid="username"`);
  });
});
