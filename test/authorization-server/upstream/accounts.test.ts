/**
 * Upstream identities to local accounts: by (provider, subject) only, never by e-mail; created
 * only where the operator allows it; an account an operator linked beforehand is the one signed
 * in; an account created from an upstream identity has no password that could ever verify. And
 * Microsoft Entra's multi-tenant issuer, checked against the token's `tid`.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { NO_PASSWORD } from "../../../src/authorization-server/upstream/accounts.js";
import { Agent, hiddenFields } from "../pages/harness.js";
import {
  type Gatehouse,
  type GithubLike,
  pressProviderButton,
  type ScriptedOidc,
  scriptedProviderOptions,
  startGatehouse,
  startGithubLike,
  startScriptedOidc,
  UPSTREAM_CLIENT_ID,
  UPSTREAM_CLIENT_SECRET,
  visitProvider,
} from "./support.js";

const SHARED_EMAIL = "ada@example.com";

let idp: ScriptedOidc;
let github: GithubLike;
let gatehouse: Gatehouse;

beforeAll(async () => {
  idp = await startScriptedOidc();
  github = await startGithubLike();
  // A GitHub user whose verified address is the same as the OpenID Connect user's.
  github.users.set("ada-gh", {
    id: 1001,
    login: "ada-gh",
    emails: [{ email: SHARED_EMAIL, primary: true, verified: true }],
    orgs: [],
  });
  gatehouse = await startGatehouse(() => ({
    providers: [
      scriptedProviderOptions(idp, { createAccounts: true }),
      github.providerOptions({ createAccounts: true }),
      github.providerOptions({ id: "github-invite", displayName: "GitHub (invited)", createAccounts: false }),
    ],
  }));
});
afterAll(async () => {
  await gatehouse?.close();
  await idp?.close();
  await github?.close();
});

/** Signs in at the scripted provider as `sub` (with the shared e-mail); returns the agent and the answer. */
async function signInAtIdp(sub: string): Promise<{ agent: Agent; status: number; text: string }> {
  idp.claims = (c) => ({ ...c, sub, email: SHARED_EMAIL, email_verified: true });
  const agent = new Agent(gatehouse.url);
  const back = await visitProvider(await pressProviderButton(agent, "idp"));
  const done = await agent.get(back.location!);
  return { agent, status: done.status, text: await done.text() };
}

/** Signs in at the GitHub-style provider as `login`, through provider entry `providerId`. */
async function signInAtGithub(login: string, providerId = "github") {
  const agent = new Agent(gatehouse.url);
  const form = await visitProvider(await pressProviderButton(agent, providerId));
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
  const done = await agent.get(decided.location!);
  return { agent, status: done.status, text: await done.text() };
}

async function sessionUser(agent: Agent, store = gatehouse.store): Promise<string | undefined> {
  const cookie = agent.cookies.get("gatehouse_session");
  if (cookie === undefined) return undefined;
  const session = await store.getSession(createHash("sha256").update(cookie).digest("base64url"), Date.now());
  return session?.userId;
}

describe("accounts are found by provider and subject, never by e-mail", () => {
  it("the same verified e-mail at another provider is another account", async () => {
    const first = await signInAtIdp("subject-ada");
    expect(first.status).toBe(303);
    const ada = await sessionUser(first.agent);
    const viaGithub = await signInAtGithub("ada-gh");
    expect(viaGithub.status).toBe(303);
    const other = await sessionUser(viaGithub.agent);
    expect(ada).toBeDefined();
    expect(other).toBeDefined();
    expect(other).not.toBe(ada);
    expect((await gatehouse.store.getUpstreamIdentity("github", "1001"))?.userId).toBe(other);
  });

  it("the same e-mail under another subject at the same provider is another account", async () => {
    const one = await sessionUser((await signInAtIdp("subject-one")).agent);
    const two = await sessionUser((await signInAtIdp("subject-two")).agent);
    expect(one).not.toBe(two);
    // And the same subject again is the same account.
    expect(await sessionUser((await signInAtIdp("subject-one")).agent)).toBe(one);
  });

  it("without createAccounts, a matching e-mail of a linked account does not let anyone in", async () => {
    github.users.set("claims-ada", {
      id: 2002,
      login: "claims-ada",
      emails: [{ email: SHARED_EMAIL, primary: true, verified: true }],
      orgs: [],
    });
    const users = (await gatehouse.store.listUsers()).length;
    const refused = await signInAtGithub("claims-ada", "github-invite");
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("No account here");
    expect(await sessionUser(refused.agent)).toBeUndefined();
    expect((await gatehouse.store.listUsers()).length).toBe(users);
  });

  it("an identity an operator linked to an existing account signs in as that account", async () => {
    const now = Date.now();
    await gatehouse.store.createUser({
      id: "local-grace",
      username: "grace",
      passwordHash: await hashPassword("a long local password"),
      isAdmin: false,
      createdAt: now,
    });
    await gatehouse.store.linkUpstreamIdentity({
      providerId: "github-invite",
      subject: "3003",
      userId: "local-grace",
      emailVerified: false,
      createdAt: now,
      lastSignInAt: now,
    });
    github.users.set("grace-gh", { id: 3003, login: "grace-gh", emails: [], orgs: [] });
    const signedIn = await signInAtGithub("grace-gh", "github-invite");
    expect(signedIn.status).toBe(303);
    expect(await sessionUser(signedIn.agent)).toBe("local-grace");
  });

  it("an identity linked to a disabled account signs nobody in: the 'Account disabled' page, no session", async () => {
    const now = Date.now();
    await gatehouse.store.createUser({
      id: "local-heidi",
      username: "heidi",
      passwordHash: await hashPassword("a long local password"),
      isAdmin: false,
      createdAt: now,
    });
    await gatehouse.store.linkUpstreamIdentity({
      providerId: "github-invite",
      subject: "3004",
      userId: "local-heidi",
      emailVerified: false,
      createdAt: now,
      lastSignInAt: now,
    });
    expect((await gatehouse.store.changeUser("local-heidi", "disable", now)).status).toBe("changed");
    github.users.set("heidi-gh", { id: 3004, login: "heidi-gh", emails: [], orgs: [] });
    const refused = await signInAtGithub("heidi-gh", "github-invite");
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("Account disabled");
    expect(await sessionUser(refused.agent)).toBeUndefined();
  });
});

describe("accounts created from an upstream identity have no password", () => {
  it("no password signs in to such an account, not even the stored marker itself", async () => {
    await signInAtIdp("subject-nopass");
    const identity = await gatehouse.store.getUpstreamIdentity("idp", "subject-nopass");
    const user = await gatehouse.store.getUser(identity!.userId);
    expect(user?.passwordHash).toBe(NO_PASSWORD);
    for (const password of [NO_PASSWORD, "", "x", "!"]) {
      const agent = new Agent(gatehouse.url);
      const login = await agent.get("/login");
      const answer = await agent.post("/login", {
        ...hiddenFields(await login.text()),
        username: user!.username,
        password,
      });
      expect(answer.status).toBe(400);
      expect(await sessionUser(agent)).toBeUndefined();
    }
  });
});

describe("Microsoft Entra multi-tenant (`organizations`): iss checked against the token's tid", () => {
  const TENANT = "9b2e0c4e-1f1a-4f7e-9d1e-2c3b4a5d6e7f";
  const OTHER_TENANT = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
  let entra: ScriptedOidc;
  let server: Gatehouse;

  beforeAll(async () => {
    entra = await startScriptedOidc({ metadataIssuer: (base) => `${base}/{tenantid}/v2.0` });
    server = await startGatehouse(() => ({
      providers: [
        {
          id: "entra",
          preset: "microsoft",
          // A national cloud names its issuer; here, the test provider on loopback.
          issuer: `${entra.issuer}/organizations/v2.0`,
          clientId: UPSTREAM_CLIENT_ID,
          clientSecret: UPSTREAM_CLIENT_SECRET,
          createAccounts: true,
          admission: { entraTenants: [TENANT] },
        },
      ],
    }));
  });
  afterAll(async () => {
    await server?.close();
    await entra?.close();
  });

  async function signIn(claims: (base: string) => Record<string, unknown>) {
    entra.claims = (c) => ({ ...c, ...claims(entra.issuer) });
    const agent = new Agent(server.url);
    const back = await visitProvider(await pressProviderButton(agent, "entra"));
    const done = await agent.get(back.location!);
    return { status: done.status, text: await done.text() };
  }

  it("a token of an admitted tenant, with that tenant's issuer, signs in", async () => {
    const done = await signIn((base) => ({ tid: TENANT, iss: `${base}/${TENANT}/v2.0` }));
    expect(done.status).toBe(303);
  });

  it("a token whose iss names another tenant than its tid is refused", async () => {
    const done = await signIn((base) => ({ tid: TENANT, iss: `${base}/${OTHER_TENANT}/v2.0` }));
    expect(done.status).toBe(400);
    expect(done.text).toContain("not issued for this server");
  });

  it("a token with the template itself, or a tid that is not a GUID, is refused", async () => {
    expect((await signIn((base) => ({ tid: TENANT, iss: `${base}/{tenantid}/v2.0` }))).status).toBe(400);
    expect((await signIn((base) => ({ tid: "../evil", iss: `${base}/../evil/v2.0` }))).status).toBe(400);
  });

  it("a consistent token of a tenant that is not admitted is refused by the tenant rule", async () => {
    const done = await signIn((base) => ({ tid: OTHER_TENANT, iss: `${base}/${OTHER_TENANT}/v2.0` }));
    expect(done.status).toBe(403);
    expect(done.text).toContain("Not allowed to sign in here");
  });
});

describe("localPasswords: false", () => {
  it("the login page has no password form, and a password POST is refused even for a real password", async () => {
    const server = await startGatehouse(() => ({
      providers: [scriptedProviderOptions(idp)],
      localPasswords: false,
    }));
    try {
      await server.store.createUser({
        id: "local-henry",
        username: "henry",
        passwordHash: await hashPassword("henry's long password"),
        isAdmin: false,
        createdAt: Date.now(),
      });
      const agent = new Agent(server.url);
      const login = await agent.get("/login");
      const html = await login.text();
      expect(html).toContain("Continue with idp");
      expect(html).not.toContain('name="password"');
      const answer = await agent.post("/login", {
        ...hiddenFields(html),
        username: "henry",
        password: "henry's long password",
      });
      expect(answer.status).toBe(400);
      expect(await answer.text()).toContain("Sign-in with a password is turned off here.");
      expect(agent.cookies.has("gatehouse_session")).toBe(false);
      expect(await sessionUser(agent, server.store)).toBeUndefined();
    } finally {
      await server.close();
    }
  });
});

describe("Google Workspace: the hosted domain rule reads the ID token's hd", () => {
  it("admits a token whose hd is the Workspace domain, and refuses one without hd or with another", async () => {
    const server = await startGatehouse(() => ({
      providers: [
        scriptedProviderOptions(idp, {
          id: "google",
          preset: "google",
          createAccounts: true,
          admission: { googleHostedDomains: ["acme.com"] },
        }),
      ],
    }));
    try {
      const statuses: number[] = [];
      for (const hd of ["ACME.com", undefined, "other.com"]) {
        idp.claims = (c) => ({ ...c, sub: `g-${hd}`, ...(hd === undefined ? {} : { hd }) });
        const agent = new Agent(server.url);
        const back = await visitProvider(await pressProviderButton(agent, "google"));
        statuses.push((await agent.get(back.location!)).status);
      }
      expect(statuses).toEqual([303, 403, 403]);
    } finally {
      idp.claims = (c) => c;
      await server.close();
    }
  });
});
