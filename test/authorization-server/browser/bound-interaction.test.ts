/**
 * One binding cookie per interaction (browser/bound-interaction.ts), over real HTTP with `__Host-`
 * cookies: what a forged, doubled, unprefixed or stale binding gets, how many interactions one
 * browser may hold before the oldest are dropped, and that an interaction parked by an earlier
 * version (bound to the browser-wide cookie) still continues in its browser only.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BROWSER_INTERACTIONS } from "../../../src/authorization-server/browser/bound-interaction.js";
import { csrfToken, INTERACTION_TTL_MS } from "../../../src/authorization-server/browser/interaction.js";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import {
  Agent,
  authorizeUrl,
  type Harness,
  hiddenFields,
  PASSWORD,
  pkcePair,
  RESOURCE,
  startHarness,
} from "../pages/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ secureCookies: true });
});
afterAll(async () => {
  await h?.close();
});

const NAME = "__Host-gatehouse_interaction_";

/** `/authorize` in `agent`: the interaction id and the raw value of its binding cookie. */
async function start(
  agent: Agent,
  params: Record<string, string> = {},
): Promise<{ id: string; value: string }> {
  const response = await agent.get(authorizeUrl(h.url, { client_id: await h.newClient(), ...params }));
  expect(response.status).toBe(303);
  const id = new URL(response.headers.get("location")!, h.url).searchParams.get("interaction")!;
  return { id, value: agent.cookies.get(`${NAME}${id}`)! };
}

/** GET `path` with exactly this Cookie header (no agent), redirects not followed. */
function withCookies(path: string, cookie: string): Promise<Response> {
  return fetch(`${h.url}${path}`, { headers: { cookie }, redirect: "manual" });
}

async function signIn(agent: Agent, id: string): Promise<Response> {
  const page = await agent.get(`/login?interaction=${id}`);
  expect(page.status).toBe(200);
  const user = await h.newUser();
  return agent.post("/login", {
    ...hiddenFields(await page.text()),
    username: user.username,
    password: PASSWORD,
  });
}

describe("a forged or misplaced binding", () => {
  it("another secret, a malformed value, another interaction's value, the name twice or without __Host-: 403, the interaction intact", async () => {
    const victim = new Agent(h.url);
    const mine = await start(victim);
    const other = await start(victim);
    const secret = mine.value.split(".")[0]!;
    const forged = [
      `${NAME}${mine.id}=${randomToken(32)}.${Date.now().toString(36)}`,
      `${NAME}${mine.id}=${secret}`, // no creation time: not our format
      `${NAME}${mine.id}=${secret}.${Date.now().toString(36)}x!`,
      `${NAME}${mine.id}=${other.value}`,
      `${NAME}${mine.id}=${mine.value}; ${NAME}${mine.id}=${randomToken(32)}.1`,
      // What a sibling subdomain could plant: the same name without the prefix it cannot set.
      `gatehouse_interaction_${mine.id}=${mine.value}`,
      `${NAME}${other.id}=${mine.value}`,
    ];
    for (const cookie of forged) {
      const response = await withCookies(`/login?interaction=${mine.id}`, cookie);
      expect({ cookie, status: response.status }).toEqual({ cookie, status: 403 });
      expect(await response.text()).toContain("Wrong browser");
    }
    // The browser that started it still continues, to the client with a code.
    const login = await signIn(victim, mine.id);
    expect(login.headers.get("location")).toBe(`/consent?interaction=${mine.id}`);
    const consent = await victim.get(`/consent?interaction=${mine.id}`);
    const decided = await victim.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    expect(decided.status).toBe(303);
    expect(new URL(decided.headers.get("location")!).searchParams.get("code")).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("stale: the answer deletes the cookie, and the old links with the old cookie answer 400, never a redirect", async () => {
    const agent = new Agent(h.url);
    const { id, value } = await start(agent);
    await signIn(agent, id);
    const consent = await agent.get(`/consent?interaction=${id}`);
    const decided = await agent.post("/consent", { ...hiddenFields(await consent.text()), decision: "deny" });
    expect(decided.status).toBe(303);
    expect(decided.headers.getSetCookie()).toContain(
      `${NAME}${id}=; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=0`,
    );
    expect(agent.cookies.has(`${NAME}${id}`)).toBe(false);
    const session = `__Host-gatehouse_session=${agent.cookies.get("__Host-gatehouse_session")}`;
    for (const path of [`/login?interaction=${id}`, `/consent?interaction=${id}`]) {
      const replay = await withCookies(path, `${NAME}${id}=${value}; ${session}`);
      expect(replay.status).toBe(400);
      expect(replay.headers.get("location")).toBeNull();
    }
  });
});

describe("many interactions in one browser", () => {
  it("at most MAX_BROWSER_INTERACTIONS bindings: the oldest are dropped, the newest still continue", async () => {
    const agent = new Agent(h.url);
    const started: string[] = [];
    for (let i = 0; i < MAX_BROWSER_INTERACTIONS + 5; i++) {
      started.push((await start(agent)).id);
      const held = [...agent.cookies.keys()].filter((name) => name.startsWith(NAME));
      expect(held.length).toBeLessThanOrEqual(MAX_BROWSER_INTERACTIONS);
    }
    const dropped = started.slice(0, 5);
    const kept = started.slice(5);
    for (const id of dropped) expect((await agent.get(`/login?interaction=${id}`)).status).toBe(403);
    for (const id of kept) expect((await agent.get(`/login?interaction=${id}`)).status).toBe(200);
    // Dropped, not broken: the newest of them completes its sign-in.
    expect((await signIn(agent, kept.at(-1)!)).headers.get("location")).toBe(
      `/consent?interaction=${kept.at(-1)}`,
    );
  });

  it("a request carrying 150 planted bindings is answered 303 with the excess deleted, never a 500", async () => {
    const planted = Array.from(
      { length: 150 },
      (_, i) =>
        `${NAME}${randomToken(16)}=${i % 3 === 0 ? "garbage" : `${randomToken(32)}.${(1000 + i).toString(36)}`}`,
    );
    const url = new URL(authorizeUrl(h.url, { client_id: await h.newClient() }));
    const response = await withCookies(`${url.pathname}${url.search}`, planted.join("; "));
    expect(response.status).toBe(303);
    const set = response.headers.getSetCookie();
    const deleted = set.filter((line) => line.endsWith("Max-Age=0"));
    const added = set.filter((line) => line.endsWith(`Max-Age=${INTERACTION_TTL_MS / 1000}`));
    expect(added).toHaveLength(1);
    // Left with the newest MAX - 1 planted ones and the new one; the unreadable ones went first.
    expect(deleted).toHaveLength(150 - (MAX_BROWSER_INTERACTIONS - 1));
    const deletedNames = new Set(deleted.map((line) => line.slice(0, line.indexOf("="))));
    for (const [i, cookie] of planted.entries()) {
      if (i % 3 === 0) expect(deletedNames.has(cookie.slice(0, cookie.indexOf("=")))).toBe(true);
    }
  });
});

describe("an interaction parked by an earlier version", () => {
  it("bound to the browser-wide binding cookie, it continues in that browser and no other", async () => {
    const legacy = randomToken(32);
    const id = randomToken(16);
    const now = Date.now();
    await h.store.createInteraction({
      id,
      browserBindingHash: sha256Base64url(legacy),
      clientId: await h.newClient(),
      redirectUri: "https://app.example/cb",
      redirectUriSent: true,
      scopes: ["notes:read"],
      resource: RESOURCE,
      codeChallenge: pkcePair().challenge,
      codeChallengeMethod: "S256",
      csrfHash: sha256Base64url(csrfToken(legacy, `interaction:${id}`)),
      createdAt: now,
      expiresAt: now + INTERACTION_TTL_MS,
    });
    const mine = await withCookies(`/login?interaction=${id}`, `__Host-gatehouse_binding=${legacy}`);
    expect(mine.status).toBe(200);
    expect(hiddenFields(await mine.text()).csrf).toBe(csrfToken(legacy, `interaction:${id}`));
    const stranger = await withCookies(
      `/login?interaction=${id}`,
      `__Host-gatehouse_binding=${randomToken(32)}`,
    );
    expect(stranger.status).toBe(403);
  });
});
