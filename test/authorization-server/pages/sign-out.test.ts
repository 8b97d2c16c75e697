/**
 * Signing out revokes what was approved in that sign-in (issue 22's Medium finding): the account
 * page's "Sign out" form and the former `POST /logout` end the session AND revoke the grants
 * approved in it (GrantRecord.sessionHash), so their refresh tokens stop rotating at once, with an
 * audit event. Grants approved in another sign-in (another browser) stay; a consent is not a
 * grant, so the remembered consent stays too (withdrawing it is the "Withdraw" button). Forms are
 * picked by purpose (test/support/page-forms.ts), never "the first form on the page".
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/core/audit.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { formFor, reviewQuery } from "../../support/page-forms.js";
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
} from "../support/flow-server.js";
import { hiddenFields } from "./harness.js";

const CLIENT = "cli";
const DEVICE_CLIENT = "tv-app";
const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const REDIRECT = "http://127.0.0.1/callback";

let server: FlowServer;
let audit: AuditEvent[];

beforeEach(async () => {
  audit = [];
  server = await startFlowServer({
    clients: [
      publicClient({ clientId: CLIENT }),
      publicClient({
        clientId: DEVICE_CLIENT,
        redirectUris: [],
        responseTypes: [],
        grantTypes: [DEVICE_GRANT, "refresh_token"],
      }),
    ],
    extra: { onAuditEvent: (event) => void audit.push(event) },
  });
});

afterEach(async () => {
  await server.close();
});

/** A browser of its own signs alice in, approves the client and redeems the code: its grant. */
async function approvedInNewBrowser() {
  const agent = new Agent(server.issuer);
  const grant = await approve(
    agent,
    await signIn(agent, { clientId: CLIENT, redirectUri: REDIRECT, scope: "notes:read offline_access" }),
  );
  const tokens = await redeem(server.issuer, CLIENT, grant, REDIRECT);
  expect(tokens.status).toBe(200);
  const session = agent.cookies.get("gatehouse_session")!;
  const [record] = await server.store.listGrants({ sessionHash: sha256Base64url(session), active: true });
  return { agent, refreshToken: tokens.body.refresh_token!, grantId: record!.grantId };
}

describe.each(["/account", "/logout"])("signing out at %s", (path) => {
  it("revokes the grants approved in that sign-in, leaves other sign-ins' grants and the consent", async () => {
    const here = await approvedInNewBrowser();
    const elsewhere = await approvedInNewBrowser();
    const page = await here.agent.get("/account");
    const { fields, formAction } = formFor(await page.text(), "logout");
    expect(formAction).toBe("/account");

    const out = await here.agent.post(path, fields);
    expect(out.status).toBe(303);
    expect(await (await here.agent.get(out.headers.get("location")!)).text()).toContain("You are signed out");

    expect((await server.store.getGrant(here.grantId))?.revokedAt).toBeDefined();
    expect(await refresh(server.issuer, CLIENT, here.refreshToken)).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    const other = await refresh(server.issuer, CLIENT, elsewhere.refreshToken);
    expect(other.status).toBe(200);
    expect(await server.store.listConsents("u1")).toHaveLength(1);

    expect(audit).toContainEqual(
      expect.objectContaining({ type: "grant_revoked", grant_id: here.grantId, by: "user" }),
    );
    expect(audit).toContainEqual(
      expect.objectContaining({ type: "signed_out", user_id: "u1", grants_revoked: 1 }),
    );
    expect(audit.filter((e) => e.type === "consent_revoked")).toEqual([]);
  });
});

describe("signing out after approving a device", () => {
  it("revokes the device's grant approved on the device page in that sign-in", async () => {
    const { agent } = await approvedInNewBrowser();
    const started = await tokenRequestTo("/device_authorization", {
      client_id: DEVICE_CLIENT,
      resource: RESOURCE,
      scope: "notes:read",
    });
    const { device_code, user_code } = started as { device_code: string; user_code: string };
    // The device page has one form (no action field to pick by).
    const entry = hiddenFields(await (await agent.get("/device")).text());
    const confirm = await agent.post("/device", { ...entry, user_code });
    expect(confirm.status).toBe(200);
    const decided = await agent.post("/device", {
      ...hiddenFields(await confirm.text()),
      decision: "approve",
    });
    expect(decided.status).toBe(200);
    const tokens = await tokenRequestTo("/token", {
      grant_type: DEVICE_GRANT,
      device_code,
      client_id: DEVICE_CLIENT,
    });
    const refreshToken = tokens.refresh_token as string;
    expect(refreshToken).toBeDefined();

    const out = await agent.post(
      "/account",
      formFor(await (await agent.get("/account")).text(), "logout").fields,
    );
    expect(out.status).toBe(303);
    expect(await refresh(server.issuer, DEVICE_CLIENT, refreshToken)).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    expect(audit).toContainEqual(expect.objectContaining({ type: "signed_out", grants_revoked: 2 }));
  });
});

/** A form POST to the server without a browser (the device's side), its JSON answer. */
async function tokenRequestTo(
  path: string,
  params: Record<string, string>,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.issuer}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params).toString(),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

describe("picking forms by purpose", () => {
  it("the account page has one form per purpose; a withdraw form is not the sign-out form", async () => {
    const { agent } = await approvedInNewBrowser();
    const html = await (await agent.get("/account")).text();
    // A withdrawal is reviewed first: its form is on the review, the button on the page is a GET.
    const review = await (
      await agent.get(`/account?${reviewQuery(html, "withdraw", { client_id: CLIENT })}`)
    ).text();
    expect(() => formFor(html, "revoke")).toThrow(/found 0/);
    expect(formFor(review, "revoke").fields.client_id).toBe(CLIENT);
    expect(formFor(html, "logout").fields.client_id).toBeUndefined();
    expect(() => formFor(html, "no-such-purpose")).toThrow(/found 0/);
  });
});
