/**
 * The device authorization grant (RFC 8628) on a real server on loopback: the device authorization
 * endpoint, the verification page driven like a browser would (cookies, CSRF fields), and the
 * token endpoint's answers while a device polls. Hostile cases first-class: wrong client, unknown,
 * expired and replayed codes, polling too fast, guessing user codes, odd bodies.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { validateClientMetadataDocument } from "../../../src/authorization-server/clients/metadata-document.js";
import { resolveOptions } from "../../../src/authorization-server/config/resolve-options.js";
import { SORTABLE_ID } from "../../../src/authorization-server/core/ids.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import {
  DEVICE_CODE_ATTEMPTS_PER_ADDRESS,
  DEVICE_CODE_ATTEMPTS_PER_SESSION,
  DEVICE_CODE_WINDOW_MS,
} from "../../../src/authorization-server/pages/device.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { proof, proofKey } from "../dpop-support.js";
import { Agent, hiddenFields, PASSWORD } from "../pages/harness.js";
import {
  type FlowServer,
  publicClient,
  RESOURCE,
  startFlowServer,
  USERNAME,
} from "../support/flow-server.js";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const DEVICE_CLIENT = "tv-app";
const SECRET_CLIENT = "kiosk";
const SECRET = "kiosk-secret-that-is-long-enough";

interface DeviceAnswer {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

let server: FlowServer;

beforeEach(async () => {
  server = await startFlowServer({
    clients: [
      publicClient({
        clientId: DEVICE_CLIENT,
        clientName: "Living-room TV",
        grantTypes: ["authorization_code", "refresh_token", DEVICE_GRANT],
      }),
      publicClient({ clientId: "other-device", grantTypes: [DEVICE_GRANT] }),
      publicClient({ clientId: "code-only" }),
      publicClient({
        clientId: SECRET_CLIENT,
        grantTypes: [DEVICE_GRANT],
        tokenEndpointAuthMethod: "client_secret_post",
        clientSecretHash: sha256Base64url(SECRET),
      }),
    ],
  });
});

afterEach(async () => {
  await server.close();
});

function post(path: string, params: Record<string, string>, headers: Record<string, string> = {}) {
  return fetch(`${server.issuer}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(params).toString(),
  });
}

async function startDevice(params: Record<string, string> = {}): Promise<DeviceAnswer> {
  const response = await post("/device_authorization", {
    client_id: DEVICE_CLIENT,
    resource: RESOURCE,
    scope: "notes:read",
    ...params,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get("cache-control")).toBe("no-store");
  return (await response.json()) as DeviceAnswer;
}

async function poll(deviceCode: string, clientId = DEVICE_CLIENT) {
  const response = await post("/token", {
    grant_type: DEVICE_GRANT,
    device_code: deviceCode,
    client_id: clientId,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Signs `agent` in through the device page's redirect to the login page; returns where it lands. */
async function signInThroughDevicePage(agent: Agent, path = "/device", username = USERNAME): Promise<string> {
  const start = await agent.get(path);
  expect(start.status).toBe(303);
  const login = start.headers.get("location")!;
  expect(login.startsWith("/login?")).toBe(true);
  const fields = hiddenFields(await (await agent.get(login)).text());
  const done = await agent.post("/login", { ...fields, username, password: PASSWORD });
  expect(done.status).toBe(303);
  return done.headers.get("location")!;
}

/** A signed-in agent's code entry: the confirmation page (or whatever the page answered). */
async function enterCode(agent: Agent, userCode: string): Promise<Response> {
  const entry = await agent.get("/device");
  expect(entry.status).toBe(200);
  return agent.post("/device", { ...hiddenFields(await entry.text()), user_code: userCode });
}

async function answer(agent: Agent, userCode: string, decision: "approve" | "deny"): Promise<Response> {
  const confirm = await enterCode(agent, userCode);
  expect(confirm.status).toBe(200);
  return agent.post("/device", { ...hiddenFields(await confirm.text()), decision });
}

async function signedInAgent(username = USERNAME): Promise<Agent> {
  const agent = new Agent(server.issuer);
  expect(await signInThroughDevicePage(agent, "/device", username)).toBe("/device");
  return agent;
}

function claims(accessToken: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString("utf8"));
}

describe("device authorization endpoint (RFC 8628 §3.1, §3.2)", () => {
  it("answers codes, the verification URIs, expires_in 600 and interval 5; stores only hashes", async () => {
    const answer = await startDevice();
    expect(answer.device_code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(answer.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(answer.verification_uri).toBe(`${server.issuer}/device`);
    expect(answer.verification_uri_complete).toBe(`${server.issuer}/device?user_code=${answer.user_code}`);
    expect(answer.expires_in).toBe(600);
    expect(answer.interval).toBe(5);
    const normalized = answer.user_code.replace("-", "");
    const record = await server.store.getDeviceAuthorizationByUserCode(
      sha256Base64url(normalized),
      server.clock.now,
    );
    expect(record?.deviceCodeHash).toBe(sha256Base64url(answer.device_code));
    expect(JSON.stringify(record)).not.toContain(answer.device_code);
    expect(JSON.stringify(record)).not.toContain(normalized);
  });

  it("is in the metadata with the grant type", async () => {
    const metadata = (await (
      await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)
    ).json()) as {
      device_authorization_endpoint: string;
      grant_types_supported: string[];
    };
    expect(metadata.device_authorization_endpoint).toBe(`${server.issuer}/device_authorization`);
    expect(metadata.grant_types_supported).toContain(DEVICE_GRANT);
  });

  it("refuses a client that did not register the device grant (unauthorized_client)", async () => {
    const response = await post("/device_authorization", { client_id: "code-only", resource: RESOURCE });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: "unauthorized_client" });
  });

  it("authenticates confidential clients as the token endpoint does", async () => {
    const wrong = await post("/device_authorization", {
      client_id: SECRET_CLIENT,
      client_secret: "wrong-secret",
      resource: RESOURCE,
    });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ error: "invalid_client" });
    const none = await post("/device_authorization", { client_id: SECRET_CLIENT, resource: RESOURCE });
    expect(none.status).toBe(401);
    const right = await post("/device_authorization", {
      client_id: SECRET_CLIENT,
      client_secret: SECRET,
      resource: RESOURCE,
    });
    expect(right.status).toBe(200);
    const unknown = await post("/device_authorization", { client_id: "nobody", resource: RESOURCE });
    expect(unknown.status).toBe(401);
  });

  it("judges resource and scope as /authorize does", async () => {
    const cases: [Record<string, string>, string][] = [
      [{ resource: "" }, "invalid_target"],
      [{ resource: "https://elsewhere.example/mcp" }, "invalid_target"],
      [{ resource: `${RESOURCE}#frag` }, "invalid_target"],
      [{ scope: "notes:delete" }, "invalid_scope"],
      [{ scope: 'bad"scope' }, "invalid_scope"],
    ];
    for (const [params, error] of cases) {
      const body: Record<string, string> = { client_id: DEVICE_CLIENT, resource: RESOURCE, ...params };
      const response = await post("/device_authorization", body);
      expect(response.status, JSON.stringify(params)).toBe(400);
      expect(await response.json()).toMatchObject({ error });
    }
    // Omitted scope: the resource's scopes, as at /authorize.
    const answer = await startDevice({ scope: "" });
    const record = await server.store.getDeviceAuthorizationByUserCode(
      sha256Base64url(answer.user_code.replace("-", "")),
      server.clock.now,
    );
    expect(record?.scopes).toEqual(["notes:read", "notes:write"]);
  });

  it("refuses odd bodies and methods with OAuth errors, never a 500", async () => {
    const json = await fetch(`${server.issuer}/device_authorization`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_id: DEVICE_CLIENT, resource: RESOURCE }),
    });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({ error: "invalid_request" });
    const big = await post("/device_authorization", {
      client_id: DEVICE_CLIENT,
      resource: RESOURCE,
      pad: "x".repeat(70_000),
    });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: "invalid_request" });
    const repeated = await fetch(`${server.issuer}/device_authorization`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `client_id=${DEVICE_CLIENT}&resource=${encodeURIComponent(RESOURCE)}&scope=notes:read&scope=notes:write`,
    });
    expect(repeated.status).toBe(400);
    const get = await fetch(`${server.issuer}/device_authorization`);
    expect(get.status).toBe(405);
  });

  it("a Client ID Metadata Document may declare the grant beside authorization_code", () => {
    const url = "https://cli.example/client.json";
    const document = (grant_types: string[]) => ({
      client_id: url,
      client_name: "CLI",
      redirect_uris: ["http://127.0.0.1/callback"],
      grant_types,
    });
    const client = validateClientMetadataDocument(
      url,
      document(["authorization_code", "refresh_token", DEVICE_GRANT]),
    );
    expect(client.grantTypes).toContain(DEVICE_GRANT);
    expect(() => validateClientMetadataDocument(url, document([DEVICE_GRANT]))).toThrow(/authorization_code/);
  });

  it("accepts the grant type at dynamic registration, without redirect URIs", async () => {
    const clientId = await server.register({
      client_name: "Headless CLI",
      grant_types: [DEVICE_GRANT, "refresh_token"],
      token_endpoint_auth_method: "none",
    });
    const response = await post("/device_authorization", { client_id: clientId, resource: RESOURCE });
    expect(response.status).toBe(200);
  });
});

describe("token endpoint, device_code grant (RFC 8628 §3.4, §3.5)", () => {
  it("pending until approved, then the code flow's tokens; a second redemption is invalid_grant", async () => {
    const device = await startDevice({ scope: "notes:read" });
    expect(await poll(device.device_code)).toMatchObject({
      status: 400,
      body: { error: "authorization_pending" },
    });

    const agent = await signedInAgent();
    const done = await answer(agent, device.user_code, "approve");
    expect(done.status).toBe(200);
    expect(await done.text()).toContain("Device connected");

    server.clock.now += 5_000;
    const issued = await poll(device.device_code);
    expect(issued.status).toBe(200);
    expect(issued.body).toMatchObject({ token_type: "Bearer", scope: "notes:read", expires_in: 300 });
    expect(typeof issued.body.refresh_token).toBe("string");
    expect(claims(issued.body.access_token as string)).toMatchObject({
      sub: "u1",
      client_id: DEVICE_CLIENT,
      aud: RESOURCE,
      scope: "notes:read",
      iss: server.issuer,
    });
    // The refresh token works like the code flow's (rotation).
    const refreshed = await post("/token", {
      grant_type: "refresh_token",
      refresh_token: issued.body.refresh_token as string,
      client_id: DEVICE_CLIENT,
    });
    expect(refreshed.status).toBe(200);

    server.clock.now += 5_000;
    expect(await poll(device.device_code)).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });

  it("a poll with a DPoP proof gets tokens bound to its key, as the code flow does (RFC 9449 §5)", async () => {
    const key = await proofKey();
    const device = await startDevice();
    const agent = await signedInAgent();
    expect((await answer(agent, device.user_code, "approve")).status).toBe(200);
    server.clock.now += 5_000;
    const response = await post(
      "/token",
      { grant_type: DEVICE_GRANT, device_code: device.device_code, client_id: DEVICE_CLIENT },
      { dpop: await proof(key, `${server.issuer}/token`, server.clock.now) },
    );
    const body = (await response.json()) as Record<string, unknown>;
    expect(response.status).toBe(200);
    expect(body.token_type).toBe("DPoP");
    expect(claims(body.access_token as string)).toMatchObject({ cnf: { jkt: key.jkt } });
    // A public client's refresh token is bound too: without a proof it does not refresh.
    const unbound = await post("/token", {
      grant_type: "refresh_token",
      refresh_token: body.refresh_token as string,
      client_id: DEVICE_CLIENT,
    });
    expect(await unbound.json()).toMatchObject({ error: "invalid_dpop_proof" });
  });

  it("slow_down to a device that polls faster than its interval, which then grows by 5 seconds", async () => {
    const device = await startDevice();
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
    server.clock.now += 1_000;
    expect((await poll(device.device_code)).body.error).toBe("slow_down");
    // The interval is now 10 s: 6 s later is still too soon.
    server.clock.now += 6_000;
    expect((await poll(device.device_code)).body.error).toBe("slow_down");
    server.clock.now += 16_000;
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
  });

  it("access_denied after the user denies; expired_token after expires_in; invalid_grant for unknown codes", async () => {
    const denied = await startDevice();
    const agent = await signedInAgent();
    const page = await answer(agent, denied.user_code, "deny");
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("Request denied");
    expect(await poll(denied.device_code)).toMatchObject({ status: 400, body: { error: "access_denied" } });

    const expiring = await startDevice();
    server.clock.now += 601_000;
    expect(await poll(expiring.device_code)).toMatchObject({ status: 400, body: { error: "expired_token" } });
    // Nor can its user code be entered any more.
    const late = await enterCode(agent, expiring.user_code);
    expect(late.status).toBe(400);
    expect(await late.text()).toContain("That code is not valid");

    expect((await poll("A".repeat(43))).body.error).toBe("invalid_grant");
    expect((await poll("not-a-device-code")).body.error).toBe("invalid_grant");
    const missing = await post("/token", { grant_type: DEVICE_GRANT, client_id: DEVICE_CLIENT });
    expect(await missing.json()).toMatchObject({ error: "invalid_request" });
  });

  it("binds the device code to its client: another client gets invalid_grant and nothing is issued", async () => {
    const device = await startDevice();
    const agent = await signedInAgent();
    expect((await answer(agent, device.user_code, "approve")).status).toBe(200);
    const stolen = await poll(device.device_code, "other-device");
    expect(stolen).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(stolen.body.access_token).toBeUndefined();
    // To another client the code does not exist (storage rules.ts): its poll spends nothing, and the
    // device it was issued to still gets its tokens.
    expect((await poll(device.device_code)).body.access_token).toEqual(expect.any(String));
  });

  it("another client polling a pending device code gets invalid_grant and neither slows the device down nor learns its state", async () => {
    const device = await startDevice();
    for (let i = 0; i < 3; i++) {
      expect(await poll(device.device_code, "other-device")).toMatchObject({
        status: 400,
        body: { error: "invalid_grant" },
      });
    }
    // The device's own first poll is not "too soon" after the other client's.
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
    const agent = await signedInAgent();
    expect((await answer(agent, device.user_code, "deny")).status).toBe(200);
    expect((await poll(device.device_code, "other-device")).body.error).toBe("invalid_grant");
    server.clock.now += device.interval * 1000;
    expect((await poll(device.device_code)).body.error).toBe("access_denied");
  });

  it("refuses the grant to a client that did not register it (unauthorized_client)", async () => {
    const device = await startDevice();
    const response = await poll(device.device_code, "code-only");
    expect(response).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
  });
});

describe("verification page (RFC 8628 §3.3, §5.1, §5.4)", () => {
  it("sends a visitor to sign in and back, keeping a well-formed code from verification_uri_complete", async () => {
    const device = await startDevice();
    const agent = new Agent(server.issuer);
    const back = await signInThroughDevicePage(agent, `/device?user_code=${device.user_code}`);
    expect(back).toBe(`/device?user_code=${device.user_code}`);
    const page = await agent.get(back);
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain(`value="${device.user_code}"`);
    // A prefilled code is never an approval (§5.4): the device is still waiting.
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
  });

  it("never lets the login page return anywhere but the device page with a real code", async () => {
    const agent = new Agent(server.issuer);
    const start = await agent.get("/device?user_code=https://evil.example/");
    expect(start.headers.get("location")).toBe(`/login?return=${encodeURIComponent("/device")}`);
    for (const target of [
      "/device?user_code=AAAA-AAAA",
      "/device?user_code=BCDF-GHJK&x=1",
      "//evil.example/device",
    ]) {
      const login = await agent.get(`/login?return=${encodeURIComponent(target)}`);
      expect(await login.text()).not.toContain('name="return"');
    }
  });

  it("accepts the code in any case, with or without the dash, and shows who asks for what", async () => {
    const device = await startDevice({ scope: "notes:read notes:write" });
    const agent = await signedInAgent();
    const confirm = await enterCode(agent, ` ${device.user_code.replace("-", " ").toLowerCase()} `);
    expect(confirm.status).toBe(200);
    const html = await confirm.text();
    expect(html).toContain("Living-room TV");
    expect(html).toContain(device.user_code);
    expect(html).toContain('data-scope="notes:read"');
    expect(html).toContain('data-scope="notes:write"');
    expect(html).toContain('data-testid="device-warning"');
  });

  it("answers a wrong code with the entry form and a clear error", async () => {
    await startDevice();
    const agent = await signedInAgent();
    const wrong = await enterCode(agent, "BBBB-BBBB");
    expect(wrong.status).toBe(400);
    const html = await wrong.text();
    expect(html).toContain("That code is not valid");
    expect(html).toContain('name="user_code"');
    const malformed = await enterCode(agent, "AEIO-0123");
    expect(malformed.status).toBe(400);
    expect(await malformed.text()).toContain("A code has 8 letters");
  });

  it("limits code entries per sign-in (429, Retry-After)", async () => {
    const device = await startDevice();
    const agent = await signedInAgent();
    const entry = hiddenFields(await (await agent.get("/device")).text());
    const statuses: number[] = [];
    for (let i = 0; i < DEVICE_CODE_ATTEMPTS_PER_SESSION + 1; i++) {
      statuses.push((await agent.post("/device", { ...entry, user_code: "BBBB-BBBB" })).status);
    }
    expect(statuses.slice(0, DEVICE_CODE_ATTEMPTS_PER_SESSION).every((s) => s === 400)).toBe(true);
    // Over the limit even the right code is refused: a guesser cannot tell a hit from a miss.
    const limited = await agent.post("/device", { ...entry, user_code: device.user_code });
    expect(statuses.at(-1)).toBe(429);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await limited.text()).not.toContain("Living-room TV");
  });

  it("the per-sign-in limit holds across a window boundary: never more than the limit in any window", async () => {
    const agent = await signedInAgent();
    const entry = hiddenFields(await (await agent.get("/device")).text());
    const W = DEVICE_CODE_WINDOW_MS;
    const boundary = Math.ceil(server.clock.now / W) * W + W;
    const enter = async (at: number) => {
      server.clock.now = at;
      return (await agent.post("/device", { ...entry, user_code: "BBBB-BBBB" })).status;
    };
    const admitted: number[] = [];
    // The whole budget just before a window boundary...
    for (let i = 0; i < DEVICE_CODE_ATTEMPTS_PER_SESSION; i++) {
      if ((await enter(boundary - 1_000)) === 400) admitted.push(boundary - 1_000);
    }
    expect(admitted).toHaveLength(DEVICE_CODE_ATTEMPTS_PER_SESSION);
    // ...then half a window later, still inside five minutes of those: nothing more passes.
    for (let i = 0; i < DEVICE_CODE_ATTEMPTS_PER_SESSION; i++) {
      if ((await enter(boundary + W / 2)) === 400) admitted.push(boundary + W / 2);
    }
    expect(admitted).toHaveLength(DEVICE_CODE_ATTEMPTS_PER_SESSION);
    // Refused entries count too; a full window after the last of them (and a minute for the
    // counting's granularity), entries pass again.
    expect(await enter(boundary + W / 2 + W + 60_000)).toBe(400);
  });

  it("limits code entries per address, across sign-ins", async () => {
    await startDevice();
    const perUser = DEVICE_CODE_ATTEMPTS_PER_SESSION - 1;
    const users = Math.ceil((DEVICE_CODE_ATTEMPTS_PER_ADDRESS + 1) / perUser);
    const statuses: number[] = [];
    for (let u = 0; u < users; u++) {
      const username = `guesser${u}`;
      await server.store.createUser({
        id: `g${u}`,
        username,
        passwordHash: await hashPassword(PASSWORD),
        isAdmin: false,
        createdAt: server.clock.now,
      });
      const agent = await signedInAgent(username);
      const entry = hiddenFields(await (await agent.get("/device")).text());
      for (let i = 0; i < perUser; i++) {
        statuses.push((await agent.post("/device", { ...entry, user_code: "CCCC-CCCC" })).status);
      }
    }
    expect(statuses.slice(0, DEVICE_CODE_ATTEMPTS_PER_ADDRESS).every((s) => s === 400)).toBe(true);
    expect(statuses.slice(DEVICE_CODE_ATTEMPTS_PER_ADDRESS).every((s) => s === 429)).toBe(true);
  });

  it("refuses a POST without the CSRF token, and a cross-site POST, changing nothing", async () => {
    const device = await startDevice();
    const agent = await signedInAgent();
    const confirm = await enterCode(agent, device.user_code);
    const fields = hiddenFields(await confirm.text());
    const noCsrf = await agent.post("/device", { user_code: device.user_code, decision: "approve" });
    expect(noCsrf.status).toBe(403);
    const crossSite = await agent.request("/device", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "cross-site" },
      body: new URLSearchParams({ ...fields, decision: "approve" }).toString(),
    });
    expect(crossSite.status).toBe(403);
    // Another signed-in browser cannot use this one's form either.
    const other = await signedInAgent();
    expect((await other.post("/device", { ...fields, decision: "approve" })).status).toBe(403);
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
  });

  it("refuses odd bodies with an error page, never a 500, and bounds what it reads", async () => {
    const agent = await signedInAgent();
    const json = await agent.request("/device", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ user_code: "BCDF-GHJK" }),
    });
    expect(json.status).toBe(400);
    expect(json.headers.get("content-type")).toContain("text/html");
    const big = await agent.post("/device", { user_code: "B".repeat(20_000) });
    expect(big.status).toBe(413);
    const longQuery = await agent.get(`/device?user_code=${"B".repeat(5_000)}`);
    expect(longQuery.status).toBe(200);
    expect(await longQuery.text()).not.toContain("BBBBBBBBB");
    const put = await agent.request("/device", { method: "PUT" });
    expect(put.status).toBe(405);
  });

  it("an answer counts only for the request the page showed", async () => {
    const device = await startDevice();
    const agent = await signedInAgent();
    const confirm = await enterCode(agent, device.user_code);
    const fields = hiddenFields(await confirm.text());
    expect(fields.request).toMatch(SORTABLE_ID);
    // Another request's id of the same shape and time.
    const another = fields.request!.slice(0, 9) + "A".repeat(22);
    const other = await agent.post("/device", { ...fields, request: another, decision: "approve" });
    expect(other.status).toBe(400);
    expect((await poll(device.device_code)).body.error).toBe("authorization_pending");
  });

  it("answers once: a second decision is refused", async () => {
    const device = await startDevice();
    const agent = await signedInAgent();
    const confirm = await enterCode(agent, device.user_code);
    const fields = hiddenFields(await confirm.text());
    expect((await agent.post("/device", { ...fields, decision: "approve" })).status).toBe(200);
    const again = await agent.post("/device", { ...fields, decision: "deny" });
    expect(again.status).toBe(400);
    expect((await poll(device.device_code)).status).toBe(200);
  });
});

describe("options", () => {
  const issuer = "https://as.example.test";
  it("default to on, 600 s and 5 s; out-of-range values fail at start-up naming the option", () => {
    expect(resolveOptions({ issuer }).deviceAuthorization).toEqual({
      enabled: true,
      ttlSeconds: 600,
      intervalSeconds: 5,
    });
    for (const [bad, name] of [
      [{ ttlSeconds: 59 }, "deviceAuthorization.ttlSeconds"],
      [{ ttlSeconds: 1801 }, "deviceAuthorization.ttlSeconds"],
      [{ intervalSeconds: 0 }, "deviceAuthorization.intervalSeconds"],
      [{ intervalSeconds: 2.5 }, "deviceAuthorization.intervalSeconds"],
      [{ enabled: "no" }, "deviceAuthorization.enabled"],
    ] as const) {
      expect(() => resolveOptions({ issuer, deviceAuthorization: bad as never })).toThrow(name);
    }
  });

  it("a configured lifetime and interval reach the device", async () => {
    const custom = await startFlowServer({
      clients: [publicClient({ clientId: DEVICE_CLIENT, grantTypes: [DEVICE_GRANT] })],
      extra: { deviceAuthorization: { ttlSeconds: 120, intervalSeconds: 10 } },
    });
    try {
      const response = await fetch(`${custom.issuer}/device_authorization`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: DEVICE_CLIENT, resource: RESOURCE }),
      });
      expect(await response.json()).toMatchObject({ expires_in: 120, interval: 10 });
    } finally {
      await custom.close();
    }
  });
});

describe("turned off", () => {
  it("serves no endpoint, no metadata field and no grant type", async () => {
    const off = await startFlowServer({
      clients: [publicClient({ clientId: DEVICE_CLIENT, grantTypes: [DEVICE_GRANT] })],
      extra: { deviceAuthorization: { enabled: false } },
    });
    try {
      const response = await fetch(`${off.issuer}/device_authorization`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `client_id=${DEVICE_CLIENT}&resource=${encodeURIComponent(RESOURCE)}`,
      });
      expect(response.status).toBe(404);
      expect((await fetch(`${off.issuer}/device`)).status).toBe(404);
      const metadata = (await (
        await fetch(`${off.issuer}/.well-known/oauth-authorization-server`)
      ).json()) as Record<string, unknown>;
      expect(metadata.device_authorization_endpoint).toBeUndefined();
      expect(metadata.grant_types_supported).not.toContain(DEVICE_GRANT);
      const token = await fetch(`${off.issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `grant_type=${encodeURIComponent(DEVICE_GRANT)}&device_code=x&client_id=${DEVICE_CLIENT}`,
      });
      expect(await token.json()).toMatchObject({ error: "unsupported_grant_type" });
    } finally {
      await off.close();
    }
  });
});
