/**
 * Hostile callbacks of an upstream sign-in, against real providers on loopback HTTPS (a scripted
 * OpenID Connect provider whose ID tokens the test decides, and a GitHub-style OAuth 2 server):
 * `state` missing, unknown, replayed, another provider's or another browser's; the provider's
 * error with markup in it; ID tokens from another issuer or audience, without `azp` among several
 * audiences, expired, with another nonce, signed with the client secret or not at all. Each ends on
 * an error page with no session, and nothing the provider wrote reaches the page as markup.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Agent, hiddenFields } from "../pages/harness.js";
import {
  type Gatehouse,
  type GithubLike,
  HOSTILE_TEXT,
  pressProviderButton,
  registerMcpClient,
  type ScriptedOidc,
  scriptedProviderOptions,
  startGatehouse,
  startGithubLike,
  startScriptedOidc,
  UPSTREAM_CLIENT_ID,
  visitProvider,
} from "./support.js";

let oidc: ScriptedOidc;
let github: GithubLike;
let gatehouse: Gatehouse;

beforeAll(async () => {
  oidc = await startScriptedOidc();
  github = await startGithubLike();
  github.users.set("octo", {
    id: 583231,
    login: "octo",
    emails: [{ email: "octo@example.com", primary: true, verified: true }],
    orgs: [],
  });
  gatehouse = await startGatehouse(() => ({
    providers: [
      scriptedProviderOptions(oidc, { createAccounts: true }),
      github.providerOptions({ createAccounts: true }),
    ],
  }));
});
afterAll(async () => {
  await gatehouse?.close();
  await oidc?.close();
  await github?.close();
});
beforeEach(() => {
  oidc.claims = (c) => c;
  oidc.authorizeAnswer = undefined;
  oidc.authorizeExtra = {};
  oidc.signing = "es256";
});

/** Presses the button and lets the scripted provider answer; returns the callback URL it sent back. */
async function callbackUrl(agent: Agent, providerId = "idp"): Promise<string> {
  const atProvider = await visitProvider(await pressProviderButton(agent, providerId));
  expect(atProvider.status).toBe(302);
  const location = atProvider.location!;
  expect(location.startsWith(gatehouse.callbackUrl(providerId))).toBe(true);
  return location;
}

/** Whether the agent has a Gatehouse session: the account page shows its applications, not "not signed in". */
async function signedIn(agent: Agent): Promise<boolean> {
  const account = await agent.get("/account");
  expect(account.status).toBe(200);
  return !(await account.text()).includes('data-testid="not-signed-in"');
}

async function page(response: Response): Promise<{ status: number; text: string }> {
  return { status: response.status, text: await response.text() };
}

describe("state", () => {
  it("a callback without state, or with an unknown one, is refused before anything is redeemed", async () => {
    const agent = new Agent(gatehouse.url);
    const url = new URL(await callbackUrl(agent));
    const tokenCalls = oidc.requests.filter((r) => r.path === "/token").length;
    const withoutState = new URL(url);
    withoutState.searchParams.delete("state");
    const missing = await page(await agent.get(withoutState.href));
    expect(missing.status).toBe(400);
    expect(missing.text).toContain("This sign-in could not be verified");
    const unknown = new URL(url);
    unknown.searchParams.set("state", "not-a-state-we-issued");
    expect((await agent.get(unknown.href)).status).toBe(400);
    expect(oidc.requests.filter((r) => r.path === "/token").length).toBe(tokenCalls);
    expect(await signedIn(agent)).toBe(false);
  });

  it("a state is used once: the replayed callback is refused", async () => {
    const agent = new Agent(gatehouse.url);
    const url = await callbackUrl(agent);
    expect((await agent.get(url)).status).toBe(303);
    const again = await page(await agent.get(url));
    expect(again.status).toBe(400);
    expect(again.text).toContain("already used");
  });

  it("a callback opened in another browser is refused, and the state is spent", async () => {
    const victim = new Agent(gatehouse.url);
    const url = await callbackUrl(victim);
    const attacker = new Agent(gatehouse.url);
    await attacker.get("/login"); // an attacker has a binding cookie of their own
    const refused = await page(await attacker.get(url));
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("Wrong browser");
    expect(await signedIn(attacker)).toBe(false);
    expect((await victim.get(url)).status).toBe(400);
  });

  it("a state issued for one provider is refused at another provider's callback", async () => {
    const agent = new Agent(gatehouse.url);
    const url = new URL(await callbackUrl(agent, "idp"));
    const elsewhere = new URL(gatehouse.callbackUrl("github"));
    elsewhere.search = url.search;
    expect((await agent.get(elsewhere.href)).status).toBe(400);
  });

  it("a repeated state or code parameter is refused", async () => {
    const agent = new Agent(gatehouse.url);
    const url = await callbackUrl(agent);
    expect((await agent.get(`${url}&state=second`)).status).toBe(400);
    expect(await signedIn(agent)).toBe(false);
  });

  it("a login CSRF cannot start a sign-in: the button needs the page's token", async () => {
    const agent = new Agent(gatehouse.url);
    await agent.get("/login");
    const forged = await agent.post("/login", { upstream: "idp" });
    expect(forged.status).toBe(403);
    expect(oidc.requests.some((r) => r.path === "/authorize" && forged.headers.get("location"))).toBe(false);
  });
});

describe("the provider's error", () => {
  it("access_denied (the user cancelled) shows its page; the hostile description never reaches it", async () => {
    oidc.authorizeAnswer = { error: "access_denied", error_description: HOSTILE_TEXT };
    const agent = new Agent(gatehouse.url);
    const result = await page(await agent.get(await callbackUrl(agent)));
    expect(result.status).toBe(400);
    expect(result.text).toContain("Sign-in cancelled");
    expect(result.text).toContain("<code>access_denied</code>");
    expect(result.text).not.toContain("<script>");
    expect(result.text).not.toContain("window.__xss");
    expect(result.text).not.toContain("onerror");
    expect(await signedIn(agent)).toBe(false);
  });

  it("an error code with markup in it is not shown at all", async () => {
    oidc.authorizeAnswer = { error: HOSTILE_TEXT, error_description: HOSTILE_TEXT };
    const agent = new Agent(gatehouse.url);
    const result = await page(await agent.get(await callbackUrl(agent)));
    expect(result.status).toBe(400);
    expect(result.text).toContain("Sign-in not completed");
    expect(result.text).not.toContain("window.__xss");
    expect(result.text).not.toContain("<code>");
  });

  it("an error response takes no code along: code and error together is still an error", async () => {
    oidc.authorizeAnswer = { error: "server_error", code: "smuggled" };
    const agent = new Agent(gatehouse.url);
    const result = await page(await agent.get(await callbackUrl(agent)));
    expect(result.status).toBe(400);
    expect(result.text).toContain("<code>server_error</code>");
    expect(await signedIn(agent)).toBe(false);
  });
});

describe("the ID token (OpenID Connect Core §3.1.3.7)", () => {
  const cases: [string, (s: ScriptedOidc) => void, string][] = [
    [
      "from another issuer",
      (s) => (s.claims = (c) => ({ ...c, iss: "https://evil.example" })),
      "not issued for this server",
    ],
    [
      "for another audience",
      (s) => (s.claims = (c) => ({ ...c, aud: "someone-else" })),
      "not issued for this server",
    ],
    [
      "for several audiences without azp",
      (s) => (s.claims = (c) => ({ ...c, aud: [UPSTREAM_CLIENT_ID, "someone-else"] })),
      "not issued for this server",
    ],
    [
      "with azp naming another client",
      (s) => (s.claims = (c) => ({ ...c, aud: [UPSTREAM_CLIENT_ID, "x"], azp: "x" })),
      "not issued for this server",
    ],
    [
      "expired",
      (s) =>
        (s.claims = (c) => ({
          ...c,
          iat: Math.floor(Date.now() / 1000) - 900,
          exp: Math.floor(Date.now() / 1000) - 600,
        })),
      "no longer valid",
    ],
    [
      "with another sign-in's nonce",
      (s) => (s.claims = (c) => ({ ...c, nonce: "another-nonce" })),
      "does not belong to this sign-in",
    ],
    ["without a nonce", (s) => (s.claims = ({ nonce: _n, ...c }) => c), "does not belong to this sign-in"],
    [
      "signed with the client secret (HS256)",
      (s) => (s.signing = "hs256-client-secret"),
      "not issued for this server",
    ],
    ["unsigned (alg none)", (s) => (s.signing = "none"), "not issued for this server"],
    [
      "whose claims carry a member named failure",
      (s) => (s.claims = (c) => ({ ...c, failure: "cancelled", nonce: "x" })),
      "does not belong to this sign-in",
    ],
  ];
  for (const [name, script, words] of cases) {
    it(`an ID token ${name} is refused with no session and no account`, async () => {
      script(oidc);
      const users = (await gatehouse.store.listUsers()).length;
      const agent = new Agent(gatehouse.url);
      const result = await page(await agent.get(await callbackUrl(agent)));
      expect(result.status).toBe(400);
      expect(result.text).toContain(words);
      expect(await signedIn(agent)).toBe(false);
      expect((await gatehouse.store.listUsers()).length).toBe(users);
    });
  }

  it("an authorization response whose iss names another issuer is refused (RFC 9207 mix-up)", async () => {
    oidc.authorizeExtra = { iss: "https://other-provider.example" };
    const agent = new Agent(gatehouse.url);
    const tokenCalls = oidc.requests.filter((r) => r.path === "/token").length;
    const result = await page(await agent.get(await callbackUrl(agent)));
    expect(result.status).toBe(400);
    expect(oidc.requests.filter((r) => r.path === "/token").length).toBe(tokenCalls);
    oidc.authorizeExtra = { iss: oidc.issuer };
    const agent2 = new Agent(gatehouse.url);
    expect((await agent2.get(await callbackUrl(agent2))).status).toBe(303);
  });

  it("a good ID token signs in (the control for the cases above)", async () => {
    const agent = new Agent(gatehouse.url);
    const done = await agent.get(await callbackUrl(agent));
    expect(done.status).toBe(303);
    expect(done.headers.get("location")).toBe("/account");
    expect(await signedIn(agent)).toBe(true);
  });

  it("an account sign-in started for the admin page returns there, and nowhere a return parameter names", async () => {
    for (const [requested, expected] of [
      ["/admin", "/admin"],
      ["https://evil.example/", "/account"],
      ["//evil.example/admin", "/account"],
    ] as const) {
      const agent = new Agent(gatehouse.url);
      const back = await visitProvider(
        await pressProviderButton(agent, "idp", `/login?return=${encodeURIComponent(requested)}`),
      );
      const done = await agent.get(back.location!);
      expect(done.status).toBe(303);
      expect(done.headers.get("location")).toBe(expected);
    }
  });

  it("a client's prompt=login is passed on to an OpenID Connect provider, and only then", async () => {
    const client = await registerMcpClient(gatehouse.url);
    const prompts: (string | null)[] = [];
    for (const extra of ["&prompt=login", ""]) {
      const agent = new Agent(gatehouse.url);
      const toLogin = await agent.get(`${client.authorizeUrl()}${extra}`.replace(gatehouse.url, ""));
      expect(toLogin.status).toBe(303);
      const upstream = new URL(await pressProviderButton(agent, "idp", toLogin.headers.get("location")!));
      prompts.push(upstream.searchParams.get("prompt"));
    }
    expect(prompts).toEqual(["login", null]);
  });

  it("nothing Gatehouse sent upstream carries a resource parameter (Entra v2 refuses it)", async () => {
    const sent = [...oidc.requests, ...github.requests].filter(
      (r) => r.path.endsWith("authorize") || r.path.endsWith("token"),
    );
    expect(sent.length).toBeGreaterThan(0);
    for (const request of sent) expect(request.params.has("resource")).toBe(false);
  });
});

describe("an unreachable provider", () => {
  it("a provider that does not answer gives the unreachable page at the button, with no state stored", async () => {
    const down = await startScriptedOidc();
    const issuer = down.issuer;
    await down.close();
    const gh = await startGatehouse(() => ({
      providers: [{ id: "down", kind: "oidc", issuer, clientId: "x", clientSecret: "y" }],
    }));
    try {
      const agent = new Agent(gh.url);
      const login = await agent.get("/login");
      const started = await page(
        await agent.post("/login", { ...hiddenFields(await login.text()), upstream: "down" }),
      );
      expect(started.status).toBe(502);
      expect(started.text).toContain("Sign-in provider unreachable");
    } finally {
      await gh.close();
    }
  });
});

describe("starting sign-ins is rate-limited per address", () => {
  it("the 31st start within five minutes from one address is a 429 with Retry-After", async () => {
    const gh = await startGatehouse(() => ({
      providers: [scriptedProviderOptions(oidc)],
    }));
    try {
      const agent = new Agent(gh.url);
      const fields = hiddenFields(await (await agent.get("/login")).text());
      const statuses: number[] = [];
      for (let i = 0; i < 31; i++)
        statuses.push((await agent.post("/login", { ...fields, upstream: "idp" })).status);
      expect(statuses.slice(0, 30).every((s) => s === 303)).toBe(true);
      const limited = await agent.post("/login", { ...fields, upstream: "idp" });
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(statuses[30]).toBe(429);
    } finally {
      await gh.close();
    }
  });
});
