/**
 * Upstream tokens for resource servers, end to end on loopback: an MCP client's flow through
 * oidc-provider (refresh tokens rotated at every use) or the GitHub-style server, Gatehouse
 * keeping the provider's tokens sealed and bound to the grant, and a resource server's
 * `upstreamTokenClient` fetching them over the authenticated channel to call the provider's API
 * as the user. Then the refreshes (due, single-flight, rotation, a refusal) and the hostile
 * callers: another resource's client, an unlisted or public client, a wrong secret, a revoked
 * grant, an expired or forged subject token, a provider that keeps nothing, and no upstream token
 * in any log line, audit event or error.
 */
import { request as httpsRequest } from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UpstreamTokenError, upstreamTokenClient } from "../../../src/resource-server/index.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { GatehouseTypeError, OAuthError } from "../../../src/shared/errors.js";
import type { Logger } from "../../../src/shared/log.js";
import { generateKeyEncryptionKey } from "../../../src/shared/secret-envelope.js";
import { grantIdOfAccessTokenId } from "../../../src/storage/access-token-id.js";
import { formFor } from "../../support/page-forms.js";
import { testTls } from "../../support/tls.js";
import { Agent, hiddenFields, makeClient } from "../pages/harness.js";
import {
  type Gatehouse,
  type GithubLike,
  type McpClient,
  RESOURCE,
  registerMcpClient,
  type ScriptedOidc,
  scriptedProviderOptions,
  startGatehouse,
  startGithubLike,
  startScriptedOidc,
  visitProvider,
} from "../upstream/support.js";
import { type RefreshingOidcProvider, startRefreshingOidcProvider, walkProvider } from "./tokens-support.js";

const FILES = "https://files.example/mcp";
const NOTES_RS = { clientId: "notes-rs", clientSecret: "notes-rs-secret-0123456789" };
const FILES_RS = { clientId: "files-rs", clientSecret: "files-rs-secret-0123456789" };
const STRANGER = { clientId: "stranger-rs", clientSecret: "stranger-secret-0123456789" };
const HOUR = 3600_000;

let corp: RefreshingOidcProvider;
let github: GithubLike;
let scripted: ScriptedOidc;
let gatehouse: Gatehouse;
let mcp: McpClient;
/** Gatehouse's clock runs this far ahead of the providers' (to make upstream tokens due). */
let skew = 0;
const logged: string[] = [];
const audited: string[] = [];

const logger: Logger = {
  info: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
  warn: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
  error: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
};

const resourceServer = (credentials: { clientId: string; clientSecret: string }) =>
  makeClient({
    clientId: credentials.clientId,
    redirectUris: [],
    responseTypes: [],
    grantTypes: [],
    tokenEndpointAuthMethod: "client_secret_basic",
    clientSecretHash: sha256Base64url(credentials.clientSecret),
  });

beforeAll(async () => {
  github = await startGithubLike();
  github.users.set("octo", {
    id: 583231,
    login: "octo",
    emails: [{ email: "octo@example.com", primary: true, verified: true }],
    orgs: [],
  });
  scripted = await startScriptedOidc();
  gatehouse = await startGatehouse(async (issuer) => {
    corp = await startRefreshingOidcProvider([`${issuer}/upstream/corp/callback`]);
    return {
      providers: [
        {
          id: "corp",
          kind: "oidc",
          issuer: corp.issuer,
          clientId: "gatehouse-at-upstream",
          clientSecret: "upstream-secret-0123456789",
          createAccounts: true,
          keepTokens: {
            resourceServers: [
              { clientId: NOTES_RS.clientId, resource: RESOURCE },
              { clientId: FILES_RS.clientId, resource: FILES },
            ],
          },
        },
        github.providerOptions({
          createAccounts: true,
          keepTokens: { resourceServers: [{ clientId: NOTES_RS.clientId, resource: RESOURCE }] },
        }),
        scriptedProviderOptions(scripted, { id: "partners", createAccounts: true }),
      ],
      extra: {
        now: () => Date.now() + skew,
        keyEncryptionKeys: [generateKeyEncryptionKey()],
        accessTokenTtlSeconds: 86_400,
        logger,
        onAuditEvent: (event) => {
          audited.push(JSON.stringify(event));
        },
        resources: [
          { uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] },
          { uri: FILES, name: "Files", scopes: ["files:read"] },
        ],
        clients: [resourceServer(NOTES_RS), resourceServer(FILES_RS), resourceServer(STRANGER)],
      },
    };
  });
  mcp = await registerMcpClient(gatehouse.url);
});
afterAll(async () => {
  await gatehouse?.close();
  await corp?.close();
  await github?.close();
  await scripted?.close();
});

/** Consent at Gatehouse after the provider sent the browser back; the MCP client redeems the code. */
async function finishFlow(agent: Agent, callback: string) {
  const done = await agent.get(callback);
  expect(done.status).toBe(303);
  const consent = await agent.get(done.headers.get("location")!);
  const approved = await agent.post("/consent", {
    ...hiddenFields(await consent.text()),
    decision: "approve",
  });
  expect(approved.status).toBe(303);
  const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;
  const tokens = await mcp.redeem(code);
  expect(tokens.status).toBe(200);
  return {
    agent,
    accessToken: String(tokens.body.access_token),
    refreshToken: String(tokens.body.refresh_token),
  };
}

async function startFlow(providerId: string): Promise<{ agent: Agent; providerUrl: string }> {
  const agent = new Agent(gatehouse.url);
  const toLogin = await agent.get(mcp.authorizeUrl().replace(gatehouse.url, ""));
  expect(toLogin.status).toBe(303);
  const login = await agent.get(toLogin.headers.get("location")!);
  const started = await agent.post("/login", { ...hiddenFields(await login.text()), upstream: providerId });
  expect(started.status).toBe(303);
  return { agent, providerUrl: started.headers.get("location")! };
}

async function flowThroughCorp(login: string) {
  const { agent, providerUrl } = await startFlow("corp");
  return finishFlow(agent, await walkProvider(providerUrl, login));
}

async function flowThroughGithub(login: string) {
  const { agent, providerUrl } = await startFlow("github");
  const form = await visitProvider(providerUrl);
  const fields = Object.fromEntries(
    [...form.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
      m[1]!,
      m[2]!.replace(/&#38;/g, "&"),
    ]),
  );
  const decided = await visitProvider(`${github.url}/login/oauth/authorize`, {
    ...fields,
    login,
    decision: "authorize",
  });
  return finishFlow(agent, decided.location!);
}

/** The grant behind a Gatehouse access token. */
function grantOf(accessToken: string): string {
  const jti = JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString()).jti;
  return grantIdOfAccessTokenId(jti)!;
}

const notes = () => upstreamTokenClient({ issuer: gatehouse.url, clientAuth: NOTES_RS });

/** A GET to the GitHub-style API with `token`, as a tool would call it. */
function githubApi(path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${github.url}${path}`,
      { ca: testTls().ca, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** The OAuth error a refused call threw (or a failure of the test when it did not throw one). */
async function refusal(call: Promise<unknown>): Promise<{ code: string; status: number }> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof OAuthError)) throw new Error(`expected an OAuthError, got ${String(error)}`);
  return { code: error.code, status: error.status };
}

describe("a resource server calls GitHub as the user", () => {
  it("the tool's upstream token opens GitHub's /user as that user; the MCP client's token never reaches GitHub", async () => {
    const flow = await flowThroughGithub("octo");
    const request = new Request(`${RESOURCE}/tools`, {
      headers: { authorization: `Bearer ${flow.accessToken}` },
    });
    const upstream = await notes().token(request, "github");
    expect(upstream.tokenType).toBe("Bearer");
    expect(upstream.accessToken).toMatch(/^gho_/);
    expect(upstream.scopes).toEqual(["read:user", "user:email"]);
    const user = await githubApi("/user", upstream.accessToken);
    expect(user.status).toBe(200);
    expect(JSON.parse(user.body).login).toBe("octo");
    // No request GitHub ever received carried Gatehouse's access token.
    expect(github.requests.some((r) => (r.authorization ?? "").includes(flow.accessToken))).toBe(false);
    // At rest: an envelope, not the token.
    const kept = await gatehouse.store.getUpstreamTokens(await grantOf(flow.accessToken), "github");
    expect(kept?.sealed).not.toContain(upstream.accessToken);
    expect(JSON.parse(kept!.sealed)).toMatchObject({ enc: "A256GCM" });
  });

  it("GitHub's token has no expiry and no refresh token: handed out as kept, never refreshed", async () => {
    const flow = await flowThroughGithub("octo");
    const requests = github.requests.length;
    skew = 20 * HOUR;
    try {
      const again = await notes().token(flow.accessToken, "github");
      expect((await githubApi("/user", again.accessToken)).status).toBe(200);
      expect(github.requests.slice(requests).map((r) => r.path)).toEqual(["/user"]);
    } finally {
      skew = 0;
    }
  });
});

describe("refresh of upstream tokens (oidc-provider, rotated refresh tokens)", () => {
  it("a fresh token is handed out as kept; a due one is refreshed once for concurrent callers, rotation kept", async () => {
    const flow = await flowThroughCorp("ada");
    const first = await notes().token(flow.accessToken, "corp");
    const second = await notes().token(flow.accessToken, "corp");
    expect(second.accessToken).toBe(first.accessToken);
    expect(first.expiresIn).toBeGreaterThan(3000);
    const before = corp.tokenRequests.length;

    skew = 2 * HOUR;
    try {
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => notes().token(flow.accessToken, "corp")),
      );
      expect(corp.tokenRequests.slice(before)).toEqual(["refresh_token"]);
      expect(new Set(answers.map((a) => a.accessToken)).size).toBe(1);
      expect(answers[0]!.accessToken).not.toBe(first.accessToken);

      // Due again: only the rotated refresh token works at oidc-provider, so this succeeding
      // shows the new one was stored.
      skew = 4 * HOUR;
      const third = await notes().token(flow.accessToken, "corp");
      expect(corp.tokenRequests.slice(before)).toEqual(["refresh_token", "refresh_token"]);
      expect(third.accessToken).not.toBe(answers[0]!.accessToken);
    } finally {
      skew = 0;
    }
  });

  it("a provider's invalid_grant drops the kept tokens: re-authentication needed, and stays so", async () => {
    const flow = await flowThroughCorp("bea");
    const grantId = await grantOf(flow.accessToken);
    await notes().token(flow.accessToken, "corp");
    skew = 2 * HOUR;
    corp.refuseRefresh = true;
    try {
      const error = await notes()
        .token(flow.accessToken, "corp")
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UpstreamTokenError);
      expect((error as UpstreamTokenError).code).toBe("ERR_UPSTREAM_REAUTHENTICATE");
      expect(await gatehouse.store.getUpstreamTokens(grantId, "corp")).toBeUndefined();
      corp.refuseRefresh = false;
      const still = await notes()
        .token(flow.accessToken, "corp")
        .catch((e: unknown) => e);
      expect((still as UpstreamTokenError).code).toBe("ERR_UPSTREAM_REAUTHENTICATE");
    } finally {
      corp.refuseRefresh = false;
      skew = 0;
    }
  });
});

describe("the grant's end ends the upstream tokens", () => {
  it("revoking the grant (the MCP client's revocation) deletes them; the subject token is then refused", async () => {
    const flow = await flowThroughCorp("cai");
    const grantId = await grantOf(flow.accessToken);
    await notes().token(flow.accessToken, "corp");
    const revoked = await fetch(`${gatehouse.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: mcp.clientId, token: flow.refreshToken }),
    });
    expect(revoked.status).toBe(200);
    expect(await gatehouse.store.getUpstreamTokens(grantId, "corp")).toBeUndefined();
    expect(await refusal(notes().token(flow.accessToken, "corp"))).toEqual({
      code: "invalid_request",
      status: 400,
    });
  });

  it("a second flow in the same session supersedes the first grant, whose tokens go; the new grant keeps its own", async () => {
    const first = await flowThroughCorp("dan");
    const firstGrant = await grantOf(first.accessToken);
    // The same instance steps up (superseded-grants.ts): a co-hosted resource refused its token for
    // insufficient scope, and the same browser session approves the wider scope (no new sign-in at
    // the provider).
    const jti = JSON.parse(Buffer.from(first.accessToken.split(".")[1]!, "base64url").toString()).jti;
    expect(await gatehouse.server.requestStepUp(jti)).toBe(true);
    const wider = mcp.authorizeUrl("again").replace("scope=notes%3Aread", "scope=notes%3Aread+notes%3Awrite");
    const toConsent = await first.agent.get(wider.replace(gatehouse.url, ""));
    expect(toConsent.status).toBe(303);
    const consent = await first.agent.get(toConsent.headers.get("location")!);
    const approved = await first.agent.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;
    const second = await mcp.redeem(code);
    expect(second.status).toBe(200);
    expect(await gatehouse.store.getUpstreamTokens(firstGrant, "corp")).toBeUndefined();
    const upstream = await notes().token(String(second.body.access_token), "corp");
    expect(upstream.accessToken).not.toBe("");
  });

  it("signing out revokes the session's grants, and with them their upstream tokens and the session's", async () => {
    const flow = await flowThroughCorp("eli");
    const grantId = await grantOf(flow.accessToken);
    expect((await notes().token(flow.accessToken, "corp")).accessToken).not.toBe("");
    const account = await flow.agent.get("/account");
    // The sign-out form by its purpose: the page's first form is a consent's Withdraw form.
    const signedOut = await flow.agent.post("/logout", formFor(await account.text(), "logout").fields);
    expect(signedOut.status).toBe(303);
    expect(await gatehouse.store.getUpstreamTokens(grantId, "corp")).toBeUndefined();
    expect(await refusal(notes().token(flow.accessToken, "corp"))).toEqual({
      code: "invalid_request",
      status: 400,
    });
  });
});

describe("hostile callers", () => {
  let flow: { accessToken: string };
  beforeAll(async () => {
    flow = await flowThroughCorp("fay");
  });

  it("another resource's client, listed for the provider, gets nothing for a token sent to Notes", async () => {
    const files = upstreamTokenClient({ issuer: gatehouse.url, clientAuth: FILES_RS });
    expect(await refusal(files.token(flow.accessToken, "corp"))).toEqual({
      code: "invalid_request",
      status: 400,
    });
  });

  it("a confidential client no provider lists, a provider that keeps nothing, an unknown provider: unauthorized_client", async () => {
    const stranger = upstreamTokenClient({ issuer: gatehouse.url, clientAuth: STRANGER });
    expect(await refusal(stranger.token(flow.accessToken, "corp"))).toEqual({
      code: "unauthorized_client",
      status: 400,
    });
    expect(await refusal(notes().token(flow.accessToken, "partners"))).toEqual({
      code: "unauthorized_client",
      status: 400,
    });
    expect(await refusal(notes().token(flow.accessToken, "nowhere"))).toEqual({
      code: "unauthorized_client",
      status: 400,
    });
  });

  it("a wrong secret, or the public MCP client itself: invalid_client", async () => {
    const wrong = upstreamTokenClient({
      issuer: gatehouse.url,
      clientAuth: { clientId: NOTES_RS.clientId, clientSecret: "not-the-secret-0123456789" },
    });
    expect(await refusal(wrong.token(flow.accessToken, "corp"))).toEqual({
      code: "invalid_client",
      status: 401,
    });
    const asPublic = await fetch(`${gatehouse.url}/upstream/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        client_id: mcp.clientId,
        subject_token: flow.accessToken,
        provider: "corp",
      }),
    });
    expect(asPublic.status).toBe(401);
    expect(((await asPublic.json()) as { error: string }).error).toBe("invalid_client");
  });

  it("a forged, altered, oversized or expired subject token is refused", async () => {
    const [header, payload, signature] = flow.accessToken.split(".");
    const claims = JSON.parse(Buffer.from(payload!, "base64url").toString());
    const widened = Buffer.from(JSON.stringify({ ...claims, sub: "someone-else" })).toString("base64url");
    for (const forged of [
      `${header}.${widened}.${signature}`,
      `${header}.${payload}.${"A".repeat(signature!.length)}`,
      "not-a-jwt",
      "a".repeat(20_000),
    ]) {
      expect(await refusal(notes().token(forged, "corp"))).toEqual({ code: "invalid_request", status: 400 });
    }
    skew = 25 * HOUR;
    try {
      expect(await refusal(notes().token(flow.accessToken, "corp"))).toEqual({
        code: "invalid_request",
        status: 400,
      });
    } finally {
      skew = 0;
    }
  });

  it("a request without a token is a usage error, before anything is sent", async () => {
    await expect(notes().token(new Request(RESOURCE), "corp")).rejects.toBeInstanceOf(GatehouseTypeError);
  });

  it("no upstream access or refresh token, nor the subject token, in any log line or audit event", async () => {
    const upstream = await notes().token(flow.accessToken, "corp");
    const everything = [...logged, ...audited].join("\n");
    expect(everything).not.toContain(upstream.accessToken);
    expect(everything).not.toContain(flow.accessToken);
    expect(audited.some((line) => line.includes('"upstream_token_issued"'))).toBe(true);
    for (const token of github.requests
      .map((r) => r.authorization ?? "")
      .filter((a) => a.startsWith("Bearer "))) {
      expect(everything).not.toContain(token.slice("Bearer ".length));
    }
  });
});

describe("start-up", () => {
  it("keepTokens without keyEncryptionKeys, or for a resource not served, refuses to start", async () => {
    const attempt = (extra: Record<string, unknown>, resource = RESOURCE) =>
      startGatehouse(() => ({
        providers: [
          github.providerOptions({
            keepTokens: { resourceServers: [{ clientId: NOTES_RS.clientId, resource }] },
          }),
        ],
        extra,
      })).then(
        async (g) => {
          await g.close();
          return "started";
        },
        (e: Error) => e.message,
      );
    expect(await attempt({})).toMatch(/keepTokens needs keyEncryptionKeys/);
    expect(
      await attempt({ keyEncryptionKeys: [generateKeyEncryptionKey()] }, "https://elsewhere.example/mcp"),
    ).toMatch(/not a served resource/);
    expect(await attempt({ keyEncryptionKeys: [generateKeyEncryptionKey()] })).toBe("started");
  });
});
