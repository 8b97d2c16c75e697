/**
 * What the pages say, checked over real HTTP: the login page names the server, the consent page's
 * localhost warning names the host it shows, and offline_access is put in words.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent, authorizeUrl, type Harness, reachConsent, startHarness } from "./harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
  await h.addClient({ clientId: "v6", redirectUris: ["http://[::1]/cb"] });
});
afterAll(async () => {
  await h?.close();
});

/** reachConsent as a fresh user for a fresh client (no shared consents or rate-limit counters). */
async function freshConsent(agent: Agent, params: Record<string, string | undefined> = {}) {
  const user = await h.newUser();
  const client_id = params.client_id ?? (await h.newClient());
  return reachConsent(agent, authorizeUrl(h.url, { ...params, client_id }), user);
}

describe("login page", () => {
  it("says which server you are signing in to (the issuer's host), for an authorization and for the account", async () => {
    const issuerHost = new URL(h.url).host;
    const agent = new Agent(h.url);
    const start = await agent.get(authorizeUrl(h.url, {}));
    const forFlow = await (await agent.get(start.headers.get("location")!)).text();
    expect(/data-testid="issuer-host">([^<]*)</.exec(forFlow)?.[1]).toBe(issuerHost);
    const forAccount = await (await new Agent(h.url).get("/login")).text();
    expect(/data-testid="issuer-host">([^<]*)</.exec(forAccount)?.[1]).toBe(issuerHost);
  });
});

describe("consent page", () => {
  it("the localhost warning names the host the page shows, not a generic localhost", async () => {
    await h.addClient({ clientId: "v4-loop", redirectUris: ["http://127.0.0.1/cb"] });
    const warningOf = (html: string) =>
      /data-testid="localhost-warning">([\s\S]*?)<\/p>/.exec(html)?.[1]?.replace(/\s+/g, " ");
    const v4 = await freshConsent(new Agent(h.url), {
      client_id: "v4-loop",
      redirect_uri: "http://127.0.0.1:4321/cb",
    });
    expect(warningOf(v4.html)).toContain("(it returns to <code>127.0.0.1</code>)");
    expect(warningOf(v4.html)).not.toContain("localhost");
    const v6 = await freshConsent(new Agent(h.url), {
      client_id: "v6",
      redirect_uri: "http://[::1]:1234/cb",
    });
    expect(warningOf(v6.html)).toContain("(it returns to <code>[::1]</code>)");
  });

  it("offline_access is put in words (an operator's description wins), the scope name kept beside them", async () => {
    const scopesOf = (html: string) =>
      /data-testid="requested-scopes">([\s\S]*?)<\/ul>/.exec(html)![1]!.replace(/\s+/g, " ");
    const built = await freshConsent(new Agent(h.url), { scope: "notes:read offline_access" });
    expect(scopesOf(built.html)).toContain(
      'data-scope="offline_access">Stay signed in: use this access when you are not using the application <code>offline_access</code></li>',
    );
    const descriptions = h.ctx.options.scopeDescriptions;
    h.ctx.options.scopeDescriptions = { ...descriptions, offline_access: "Keep going overnight" };
    try {
      const own = await freshConsent(new Agent(h.url), { scope: "notes:read offline_access" });
      expect(scopesOf(own.html)).toContain('data-scope="offline_access">Keep going overnight <code>');
    } finally {
      h.ctx.options.scopeDescriptions = descriptions;
    }
  });
});
