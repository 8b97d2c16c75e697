/**
 * Per-issuer compatibility settings (protocol/issuer-compat.ts) against loopback authorization
 * servers that behave like Microsoft Entra ID, Amazon Cognito and Google (field-servers.ts): the
 * spec's rule refuses each without its setting; with it the whole flow works (login, a call, a
 * refresh); a setting applies to the issuer it names alone; every use is reported as a
 * `compatibility` event; settings that could widen beyond one issuer are refused up front.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  type AuthEvent,
  AuthorizationFlowError,
  type CreateAuthFetchOptions,
  MemoryTokenStore,
} from "../../src/client/index.js";
import { CLIENT_ID, type FieldServer, OTHER_TENANT, startFieldServer, TENANT } from "./field-servers.js";
import { followRedirect } from "./fixtures.js";

const REDIRECT = "http://127.0.0.1:9/callback";
const servers: FieldServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function start(...args: Parameters<typeof startFieldServer>): Promise<FieldServer> {
  const server = await startFieldServer(...args);
  servers.push(server);
  return server;
}

type CompatEvent = Extract<AuthEvent, { type: "compatibility" }>;

/** A client pre-registered at `fields` (under both names each server goes by), recording events. */
function client(fields: FieldServer[], issuerCompatibility?: CreateAuthFetchOptions["issuerCompatibility"]) {
  const events: CompatEvent[] = [];
  const preregisteredClients = Object.fromEntries(
    fields.flatMap((f) => [
      [f.issuer, { client_id: CLIENT_ID }],
      [f.serverIssuer, { client_id: CLIENT_ID }],
    ]),
  );
  const auth = new AuthClient({
    store: new MemoryTokenStore(),
    redirectUri: REDIRECT,
    userAgent: followRedirect,
    preregisteredClients,
    ...(issuerCompatibility && { issuerCompatibility }),
    onEvent: (event) => {
      if (event.type === "compatibility") events.push(event);
    },
  });
  return { auth, events };
}

async function refusal(promise: Promise<unknown>): Promise<AuthorizationFlowError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthorizationFlowError);
  return error as AuthorizationFlowError;
}

/** Logs in with a call, then forces a refresh with a second call; both must answer 200. */
async function callTwice(auth: AuthClient, field: FieldServer): Promise<void> {
  expect((await auth.fetch(field.resourceUrl)).status).toBe(200);
  field.expireAccessTokens();
  expect((await auth.fetch(field.resourceUrl)).status).toBe(200);
  expect(field.seen.token.map((f) => f.get("grant_type"))).toEqual(["authorization_code", "refresh_token"]);
}

describe("Entra ID-like: templated issuer, no PKCE list, resource refused (AADSTS9010010)", () => {
  const entra = (field: FieldServer) => ({
    [field.issuer]: {
      tenantIssuer: { template: `${field.base}/{tenantid}/v2.0`, tenant: TENANT },
      assumeS256: true,
      resource: "omit" as const,
    },
  });

  it("each rule refuses without its setting: the templated issuer, then the PKCE list, then the resource", async () => {
    const field = await start("entra");
    const none = client([field]);
    expect((await refusal(none.auth.fetch(field.resourceUrl))).code).toBe("issuer_mismatch");
    const templateOnly = client([field], {
      [field.issuer]: { tenantIssuer: { template: `${field.base}/{tenantid}/v2.0`, tenant: TENANT } },
    });
    expect((await refusal(templateOnly.auth.fetch(field.resourceUrl))).code).toBe("pkce_not_supported");
    const noResourceSetting = client([field], {
      [field.issuer]: {
        tenantIssuer: { template: `${field.base}/{tenantid}/v2.0`, tenant: TENANT },
        assumeS256: true,
      },
    });
    const refused = await refusal(noResourceSetting.auth.fetch(field.resourceUrl));
    expect(refused.oauthError?.error).toBe("invalid_target");
    expect(refused.oauthError?.error_description).toContain("AADSTS9010010");
    expect(field.seen.authorize.at(-1)?.get("resource")).toBe(`${field.base}/mcp`);
  });

  it("with the three settings: login, a call and a refresh work, no request carries resource, each use is logged", async () => {
    const field = await start("entra");
    const { auth, events } = client([field], entra(field));
    await callTwice(auth, field);
    expect(field.seen.authorize).toHaveLength(1);
    expect(field.seen.authorize[0]!.has("resource")).toBe(false);
    expect(field.seen.authorize[0]!.get("code_challenge_method")).toBe("S256");
    // The ID token proves the tenant, so openid was asked for.
    expect(field.seen.authorize[0]!.get("scope")?.split(" ")).toContain("openid");
    for (const form of field.seen.token) expect(form.has("resource")).toBe(false);
    const settings = events.map((e) => e.setting);
    expect(settings).toContain("tenant_issuer");
    expect(settings).toContain("assume_s256");
    // One report per request that left resource out: the authorization (and its token request), the refresh.
    expect(events.filter((e) => e.setting === "resource").map((e) => e.detail)).toEqual([
      expect.stringContaining("authorization and token requests: resource parameter omitted"),
      expect.stringContaining("refresh: resource parameter omitted"),
    ]);
    expect(events.some((e) => e.detail.includes(`ID token of tenant ${TENANT} accepted`))).toBe(true);
    for (const e of events) expect(e.issuer).toMatch(new RegExp(`^${field.base}/`));
    // The stored server record lists what was applied (gatehouse status shows it).
    const server = await auth.store.get("server", field.issuer);
    expect(server?.metadata.issuer).toBe(`${field.base}/${TENANT}/v2.0`);
    expect(server?.compatibility).toEqual(expect.arrayContaining(["tenant_issuer", "assume_s256"]));
  });

  it("a pre-registered client named under the configured issuer serves the tenant's issuer too", async () => {
    const field = await start("entra");
    const auth = new AuthClient({
      store: new MemoryTokenStore(),
      redirectUri: REDIRECT,
      userAgent: followRedirect,
      preregisteredClients: { [field.issuer]: { client_id: CLIENT_ID } },
      issuerCompatibility: entra(field),
    });
    await callTwice(auth, field);
    expect(field.seen.authorize[0]!.get("client_id")).toBe(CLIENT_ID);
  });

  it("the device flow too: no resource in the device authorization request or the poll, the tenant checked", async () => {
    const field = await start("entra");
    const prompts: string[] = [];
    const events: CompatEvent[] = [];
    const auth = new AuthClient({
      store: new MemoryTokenStore(),
      deviceAuthorization: { onPrompt: (p) => void prompts.push(p.userCode) },
      preregisteredClients: { [field.issuer]: { client_id: CLIENT_ID } },
      issuerCompatibility: entra(field),
      onEvent: (event) => {
        if (event.type === "compatibility") events.push(event);
      },
    });
    expect((await auth.fetch(field.resourceUrl)).status).toBe(200);
    expect(prompts).toEqual(["ABCD-EFGH"]);
    expect(field.seen.authorize[0]!.has("resource")).toBe(false);
    expect(field.seen.authorize[0]!.get("scope")?.split(" ")).toContain("openid");
    const poll = field.seen.token.find((f) => f.get("grant_type")?.endsWith("device_code"));
    expect(poll?.has("resource")).toBe(false);
    expect(events.map((e) => e.detail)).toEqual(
      expect.arrayContaining([
        expect.stringContaining("device authorization and polling: resource parameter omitted"),
        `ID token of tenant ${TENANT} accepted`,
      ]),
    );
  }, 30_000);

  it("a user of another tenant signing in at the shared endpoint is refused", async () => {
    const field = await start("entra", { userTenant: OTHER_TENANT });
    const { auth } = client([field], entra(field));
    const refused = await refusal(auth.fetch(field.resourceUrl));
    // The ID token's iss is the other tenant's: oauth4webapi refuses it against the pinned
    // tenant's issuer before the tid check is reached (which would refuse it too).
    expect(refused.code).toBe("token_request_failed");
    expect(String((refused.cause as Error | undefined)?.message)).toMatch(/iss/);
    expect(await auth.store.list("tokens")).toEqual([]);
  });

  it("resource rewritten: the configured value is sent instead, and logged", async () => {
    const field = await start("cognito");
    const { auth, events } = client([field], {
      [field.issuer]: { assumeS256: true, resource: { rewrite: "api://notes-app" } },
    });
    expect((await auth.fetch(field.resourceUrl)).status).toBe(200);
    expect(field.seen.authorize[0]!.get("resource")).toBe("api://notes-app");
    expect(field.seen.token[0]!.get("resource")).toBe("api://notes-app");
    expect(events.filter((e) => e.setting === "resource")[0]?.detail).toContain("api://notes-app");
    // The tokens are still stored for the resource its metadata names.
    expect((await auth.store.list("tokens")).map(([, t]) => t.resource)).toEqual([`${field.base}/mcp`]);
  });
});

describe("Cognito-like: PKCE supported but not advertised", () => {
  it("refused without assumeS256 (spec PKCE 1); with it login, a call and a refresh work, resource still sent", async () => {
    const field = await start("cognito");
    expect((await refusal(client([field]).auth.fetch(field.resourceUrl))).code).toBe("pkce_not_supported");
    expect(field.seen.authorize).toHaveLength(0);
    const { auth, events } = client([field], { [field.issuer]: { assumeS256: true } });
    await callTwice(auth, field);
    expect(field.seen.authorize[0]!.get("resource")).toBe(`${field.base}/mcp`);
    for (const form of field.seen.token) expect(form.get("resource")).toBe(`${field.base}/mcp`);
    expect(events).toEqual([
      {
        type: "compatibility",
        issuer: field.issuer,
        setting: "assume_s256",
        detail: "metadata omits code_challenge_methods_supported; proceeding with S256",
      },
    ]);
  });
});

describe("Google-like: the issuer differs by a trailing slash between documents", () => {
  it("refused without the alias (RFC 8414 §3.3); with it login, a call and a refresh work and iss is checked against the alias", async () => {
    const field = await start("google");
    const refused = await refusal(client([field]).auth.fetch(field.resourceUrl));
    expect(refused.code).toBe("issuer_mismatch");
    const { auth, events } = client([field], { [field.issuer]: { issuerAlias: field.serverIssuer } });
    await callTwice(auth, field);
    expect(events.map((e) => e.setting)).toEqual(["issuer_alias"]);
    expect(events[0]!.detail).toContain(field.serverIssuer);
  });
});

describe("a setting applies to the issuer it names alone", () => {
  it("two Cognito-like servers, assumeS256 for one: the other is still refused by the spec's rule", async () => {
    const named = await start("cognito");
    const other = await start("cognito");
    const { auth, events } = client([named, other], { [named.issuer]: { assumeS256: true } });
    expect((await auth.fetch(named.resourceUrl)).status).toBe(200);
    expect((await refusal(auth.fetch(other.resourceUrl))).code).toBe("pkce_not_supported");
    expect(other.seen.authorize).toHaveLength(0);
    expect(events.every((e) => e.issuer === named.issuer)).toBe(true);
  });

  it("resource omitted for one issuer: another issuer's requests still carry it (RFC 8707)", async () => {
    const named = await start("cognito");
    const other = await start("cognito");
    const { auth, events } = client([named, other], {
      [named.issuer]: { assumeS256: true, resource: "omit" },
      [other.issuer]: { assumeS256: true },
    });
    expect((await auth.fetch(named.resourceUrl)).status).toBe(200);
    expect((await auth.fetch(other.resourceUrl)).status).toBe(200);
    expect(named.seen.authorize[0]!.has("resource")).toBe(false);
    expect(named.seen.token[0]!.has("resource")).toBe(false);
    expect(other.seen.authorize[0]!.get("resource")).toBe(`${other.base}/mcp`);
    expect(other.seen.token[0]!.get("resource")).toBe(`${other.base}/mcp`);
    expect(events.filter((e) => e.setting === "resource").map((e) => e.issuer)).toEqual([named.issuer]);
  });

  it("an alias accepts that one string only: another spelling is still an issuer mismatch", async () => {
    const field = await start("google");
    const { auth } = client([field], { [field.issuer]: { issuerAlias: `${field.base}/other` } });
    expect((await refusal(auth.fetch(field.resourceUrl))).code).toBe("issuer_mismatch");
  });

  it("settings that are not one issuer's are refused when the client is built", () => {
    const cases: Array<CreateAuthFetchOptions["issuerCompatibility"]> = [
      { "*": { assumeS256: true } },
      { "": { assumeS256: true } },
      {
        "https://login.example/common": {
          tenantIssuer: { template: "https://login.example/v2.0", tenant: "t" },
        },
      },
      {
        "https://login.example/common": {
          tenantIssuer: { template: "https://login.example/{tenantid}/v2.0", tenant: "../evil" },
        },
      },
      { "https://login.example/": { issuerAlias: "https://login.example/" } },
      { "https://login.example/": { resource: { rewrite: "not a uri" } } },
      { "https://login.example/": { everything: true } as never },
    ];
    for (const issuerCompatibility of cases) {
      expect(() => new AuthClient({ issuerCompatibility })).toThrow(/issuer compatibility/);
    }
  });
});
