/**
 * The authorization endpoint's rules (SECURITY.md "Authorization endpoint"), over real HTTP on
 * loopback with redirects left unfollowed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import {
  Agent,
  authorizeUrl,
  type Harness,
  OTHER_RESOURCE,
  PASSWORD,
  pkcePair,
  REFUSED_DOCUMENT_CLIENT,
  RESOURCE,
  reachConsent,
  startHarness,
} from "../pages/harness.js";

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
  await h.addClient({
    clientId: "two-uris",
    redirectUris: ["https://app.example/one", "https://app.example/two"],
  });
  await h.addClient({ clientId: "loopback", redirectUris: ["http://127.0.0.1/cb", "http://[::1]/cb"] });
  await h.addClient({ clientId: "with-query", redirectUris: ["https://app.example/cb?tenant=a%20b&flag"] });
  await h.addClient({
    clientId: "dyn-1",
    source: "dynamic",
    clientName: "Dynamic Helper",
    redirectUris: ["https://dyn.example/cb"],
  });
  await h.addClient({
    clientId: "https://docs.example/client.json",
    source: "metadata-document",
    clientName: "Doc Client",
    redirectUris: ["https://docs.example/cb"],
  });
  await h.addClient({
    clientId: "no-refresh",
    redirectUris: ["https://app.example/cb"],
    grantTypes: ["authorization_code"],
  });
  await h.addClient({ clientId: "read-only", redirectUris: ["https://app.example/cb"], scope: "notes:read" });
  await h.addClient({
    clientId: "implicit-only",
    redirectUris: ["https://app.example/cb"],
    responseTypes: ["token"],
  });
  await h.addClient({
    clientId: "expired",
    redirectUris: ["https://app.example/cb"],
    source: "dynamic",
    expiresAt: 1,
  });
  // A record that bypassed registration checks: /authorize must still refuse its schemes.
  await h.addClient({
    clientId: "tainted",
    redirectUris: ["javascript:alert(1)//", "https://app.example/cb"],
  });
  await h.addClient({ clientId: "tainted-single", redirectUris: ["JavaScript:alert(1)"] });
});

afterAll(async () => {
  await h?.close();
});

async function expectErrorPage(response: Response, status = 400): Promise<string> {
  expect(response.status).toBe(status);
  expect(response.headers.get("location")).toBeNull();
  expect(response.headers.get("content-type")).toMatch(/^text\/html/);
  expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  expect(response.headers.get("cache-control")).toBe("no-store");
  return response.text();
}

function expectRedirect(response: Response, base: string): URLSearchParams {
  expect(response.status).toBe(303);
  const location = response.headers.get("location")!;
  expect(location.startsWith(`${base}?`) || location.startsWith(`${base}&`)).toBe(true);
  return new URL(location).searchParams;
}

function get(url: string): Promise<Response> {
  return fetch(url, { redirect: "manual" });
}

describe("duplicate parameters", () => {
  for (const name of ["client_id", "redirect_uri", "state", "scope", "code_challenge", "response_type"]) {
    it(`a repeated ${name} gets an error page, not a redirect`, async () => {
      const url = new URL(authorizeUrl(h.url, {}));
      url.searchParams.append(name, url.searchParams.get(name)!);
      const html = await expectErrorPage(await get(url.href));
      expect(html).toContain("repeated");
    });
  }
  it("a second redirect_uri pointing elsewhere can never win", async () => {
    const response = await get(
      authorizeUrl(h.url, { redirect_uri: ["https://app.example/cb", "https://attacker.example/cb"] }),
    );
    await expectErrorPage(response);
  });
});

describe("client and redirect URI (error page, never a redirect)", () => {
  it("missing client_id", async () => {
    await expectErrorPage(await get(authorizeUrl(h.url, { client_id: undefined })));
  });
  it("unknown client", async () => {
    const html = await expectErrorPage(await get(authorizeUrl(h.url, { client_id: "nobody" })));
    expect(html).toContain("invalid_client");
  });
  it("a metadata document the resolver refuses (OAuthError) is a page", async () => {
    const html = await expectErrorPage(
      await get(
        authorizeUrl(h.url, {
          client_id: REFUSED_DOCUMENT_CLIENT,
          redirect_uri: "https://refused.example/cb",
        }),
      ),
    );
    expect(html).toContain("the client metadata document was refused");
  });
  it("an expired dynamic registration", async () => {
    await expectErrorPage(await get(authorizeUrl(h.url, { client_id: "expired" })));
  });
  it("redirect_uri mismatch → page, even when everything else is wrong too", async () => {
    await expectErrorPage(
      await get(
        authorizeUrl(h.url, {
          redirect_uri: "https://attacker.example/cb",
          response_type: "token",
          code_challenge: undefined,
        }),
      ),
    );
  });
  it("response_type is checked only after the redirect URI (bad URI + bad type → page)", async () => {
    await expectErrorPage(
      await get(authorizeUrl(h.url, { redirect_uri: "https://app.example/cb/", response_type: "token" })),
    );
  });
  it("missing redirect_uri with several registered → page", async () => {
    await expectErrorPage(await get(authorizeUrl(h.url, { client_id: "two-uris", redirect_uri: undefined })));
  });
  it("missing redirect_uri with exactly one registered uses it", async () => {
    const response = await get(authorizeUrl(h.url, { redirect_uri: undefined, response_type: "token" }));
    const params = expectRedirect(response, "https://app.example/cb");
    expect(params.get("error")).toBe("unsupported_response_type");
  });
  it("each of several registered URIs works when named exactly", async () => {
    for (const uri of ["https://app.example/one", "https://app.example/two"]) {
      const response = await get(
        authorizeUrl(h.url, { client_id: "two-uris", redirect_uri: uri, response_type: "x" }),
      );
      expect(expectRedirect(response, uri).get("error")).toBe("unsupported_response_type");
    }
  });
  it("a loopback IP literal may change port (RFC 8252 §7.3); the code goes to the requested port", async () => {
    for (const uri of ["http://127.0.0.1:53111/cb", "http://[::1]:8080/cb", "http://127.0.0.1/cb"]) {
      const response = await get(
        authorizeUrl(h.url, { client_id: "loopback", redirect_uri: uri, response_type: "x" }),
      );
      expect(expectRedirect(response, uri).get("error")).toBe("unsupported_response_type");
    }
  });
  it("but not its path, host or scheme", async () => {
    for (const uri of [
      "http://127.0.0.1:53111/cb2",
      "http://127.0.0.2:53111/cb",
      "https://127.0.0.1:53111/cb",
      "http://localhost:53111/cb",
      "http://127.0.0.1:53111/cb?x=1",
    ]) {
      await expectErrorPage(await get(authorizeUrl(h.url, { client_id: "loopback", redirect_uri: uri })));
    }
  });
  it("dangerous schemes are refused even when (wrongly) stored for the client", async () => {
    for (const uri of [
      "javascript:alert(1)//",
      "JAVASCRIPT:alert(1)//",
      " javascript:alert(1)//",
      "\tjavascript:alert(1)//",
      "java\nscript:alert(1)//",
      "\u0000javascript:alert(1)//",
      "data:text/html,hi",
      "vbscript:msgbox(1)",
    ]) {
      await expectErrorPage(await get(authorizeUrl(h.url, { client_id: "tainted", redirect_uri: uri })));
    }
    // The "only one registered" shortcut re-checks the stored value as well.
    await expectErrorPage(
      await get(authorizeUrl(h.url, { client_id: "tainted-single", redirect_uri: undefined })),
    );
  });
});

describe("errors after the redirect URI is validated go back with error, state and iss", () => {
  const cases: [string, Record<string, string | string[] | undefined>, string][] = [
    ["response_type=token", { response_type: "token" }, "unsupported_response_type"],
    ["response_type missing", { response_type: undefined }, "invalid_request"],
    ["client may not use code", { client_id: "implicit-only" }, "unauthorized_client"],
    ["code_challenge missing", { code_challenge: undefined }, "invalid_request"],
    ["method plain", { code_challenge_method: "plain" }, "invalid_request"],
    ["method missing (means plain)", { code_challenge_method: undefined }, "invalid_request"],
    ["method unknown", { code_challenge_method: "S512" }, "invalid_request"],
    ["method lowercase", { code_challenge_method: "s256" }, "invalid_request"],
    ["challenge too short", { code_challenge: "a".repeat(42) }, "invalid_request"],
    ["challenge too long", { code_challenge: "a".repeat(44) }, "invalid_request"],
    ["challenge bad alphabet", { code_challenge: `${"a".repeat(42)}+` }, "invalid_request"],
    ["challenge padded", { code_challenge: `${"a".repeat(42)}=` }, "invalid_request"],
    ["challenge non-canonical last char", { code_challenge: `${"a".repeat(42)}b` }, "invalid_request"],
    ["resource missing", { resource: undefined }, "invalid_target"],
    ["resource with fragment", { resource: `${RESOURCE}#x` }, "invalid_target"],
    ["resource unknown", { resource: "https://other.example/mcp" }, "invalid_target"],
    ["resource differing only by a trailing slash", { resource: `${RESOURCE}/` }, "invalid_target"],
    ["resource differing only by case", { resource: RESOURCE.toUpperCase() }, "invalid_target"],
    ["two resources", { resource: [RESOURCE, OTHER_RESOURCE] }, "invalid_target"],
    ["unknown scope", { scope: "notes:read notes:delete" }, "invalid_scope"],
    ["scope of another resource", { scope: "files:read" }, "invalid_scope"],
    ["scope with a bad character", { scope: 'notes:read "x' }, "invalid_scope"],
    ["scope beyond the client's own", { client_id: "read-only", scope: "notes:write" }, "invalid_scope"],
  ];
  for (const [name, params, error] of cases) {
    it(`${name} → ${error}`, async () => {
      const response = await get(authorizeUrl(h.url, { ...params, state: "s-1" }));
      const q = expectRedirect(response, "https://app.example/cb");
      expect(q.get("error")).toBe(error);
      expect(q.get("state")).toBe("s-1");
      expect(q.get("iss")).toBe(h.url);
      expect(q.get("code")).toBeNull();
      expect(response.headers.get("referrer-policy")).toBe("no-referrer");
    });
  }

  it("state is echoed byte for byte, however long and odd", async () => {
    const state = `${"ä€ 𝄞+/=&?#%20".repeat(40)}${"x".repeat(2000)}`;
    const q = expectRedirect(
      await get(authorizeUrl(h.url, { response_type: "x", state })),
      "https://app.example/cb",
    );
    expect(q.get("state")).toBe(state);
    expect(q.getAll("state")).toHaveLength(1);
  });

  it("no state sent → none returned", async () => {
    const q = expectRedirect(
      await get(authorizeUrl(h.url, { response_type: "x", state: undefined })),
      "https://app.example/cb",
    );
    expect(q.has("state")).toBe(false);
    expect(q.get("iss")).toBe(h.url);
  });

  it("the redirect URI's own query is kept exactly and parameters are appended", async () => {
    const response = await get(
      authorizeUrl(h.url, {
        client_id: "with-query",
        redirect_uri: "https://app.example/cb?tenant=a%20b&flag",
        response_type: "x",
      }),
    );
    expect(response.status).toBe(303);
    expect(
      response.headers.get("location")!.startsWith("https://app.example/cb?tenant=a%20b&flag&error="),
    ).toBe(true);
  });

  it("a good request that is fine except for the scope does not create an interaction", async () => {
    const response = await get(authorizeUrl(h.url, { scope: "nope" }));
    expect(response.status).toBe(303);
    expect(response.headers.getSetCookie()).toHaveLength(0);
  });
});

describe("untrusted clients get no automatic error redirect", () => {
  for (const [clientId, redirect] of [
    ["dyn-1", "https://dyn.example/cb"],
    ["https://docs.example/client.json", "https://docs.example/cb"],
  ] as const) {
    it(`${clientId}: a page naming the client, with a link that returns the error`, async () => {
      const response = await get(
        authorizeUrl(h.url, {
          client_id: clientId,
          redirect_uri: redirect,
          response_type: "token",
          state: "s&<",
        }),
      );
      const html = await expectErrorPage(response);
      expect(html).toContain(clientId === "dyn-1" ? "Dynamic Helper" : "Doc Client");
      expect(html).toContain(new URL(redirect).host);
      const href = /data-testid="return-to-client" href="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, "&");
      const q = new URL(href).searchParams;
      expect(href.startsWith(`${redirect}?`)).toBe(true);
      expect(q.get("error")).toBe("unsupported_response_type");
      expect(q.get("state")).toBe("s&<");
      expect(q.get("iss")).toBe(h.url);
    });
  }
});

describe("a valid request", () => {
  it("parks an interaction bound to the browser and sends it to the login page", async () => {
    const response = await get(authorizeUrl(h.url, {}));
    expect(response.status).toBe(303);
    const location = response.headers.get("location")!;
    expect(location).toMatch(/^\/login\?interaction=[A-Za-z0-9_-]{22}$/);
    const cookies = response.headers.getSetCookie();
    expect(cookies).toHaveLength(1);
    const id = new URL(location, h.url).searchParams.get("interaction")!;
    // A cookie of this interaction's own, living as long as it: the secret, then its creation time.
    expect(cookies[0]).toMatch(
      new RegExp(
        `^gatehouse_interaction_${id}=[A-Za-z0-9_-]{43}\\.[0-9a-z]+; Path=/; HttpOnly; SameSite=Lax; Max-Age=600$`,
      ),
    );
    const stored = await h.store.getInteraction(id, Date.now());
    const binding = cookies[0]!.split(";")[0]!.split("=")[1]!.split(".")[0]!;
    // Only hashes are stored: the binding secret's, and the CSRF token's.
    expect(stored!.browserBindingHash).toBe(sha256Base64url(binding));
    expect(JSON.stringify(stored)).not.toContain(binding);
    expect(stored).toMatchObject({
      clientId: "notes-desktop",
      redirectUri: "https://app.example/cb",
      scopes: ["notes:read"],
      resource: RESOURCE,
      state: "st-123",
      codeChallengeMethod: "S256",
    });
  });

  it("POST with a form body works like GET", async () => {
    const body = new URL(authorizeUrl(h.url, {})).searchParams.toString();
    const response = await fetch(`${h.url}/authorize`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toMatch(/^\/login\?interaction=/);
  });

  it("other methods get 405", async () => {
    const response = await fetch(`${h.url}/authorize`, { method: "PUT", redirect: "manual" });
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("GET, POST");
  });

  it("omitted scope means every scope of the resource the client may use (documented default)", async () => {
    const response = await get(authorizeUrl(h.url, { scope: undefined }));
    const id = new URL(response.headers.get("location")!, h.url).searchParams.get("interaction")!;
    expect((await h.store.getInteraction(id, Date.now()))!.scopes).toEqual([
      "notes:read",
      "notes:write",
      "notes:admin",
    ]);
    const limited = await get(authorizeUrl(h.url, { client_id: "read-only", scope: undefined }));
    const id2 = new URL(limited.headers.get("location")!, h.url).searchParams.get("interaction")!;
    expect((await h.store.getInteraction(id2, Date.now()))!.scopes).toEqual(["notes:read"]);
  });

  it("a signed-in browser goes straight to consent; with consent covering the scopes, the code is issued silently", async () => {
    const agent = new Agent(h.url);
    const { fields } = await reachConsent(agent, authorizeUrl(h.url, { scope: "notes:write" }));
    const approved = await agent.post("/consent", { ...fields, decision: "approve" });
    expect(approved.status).toBe(303);

    const { challenge } = pkcePair();
    // notes:read is implied by the granted notes:write (scope hierarchy).
    const silent = await agent.get(
      authorizeUrl(h.url, { scope: "notes:read", state: "again", code_challenge: challenge }),
    );
    const q = expectRedirect(silent, "https://app.example/cb");
    expect(q.get("state")).toBe("again");
    expect(q.get("iss")).toBe(h.url);
    const code = q.get("code")!;
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const record = await h.store.redeemAuthorizationCode(sha256Base64url(code), Date.now(), () => undefined, {
      accessToken: { jti: "j1", createdAt: Date.now(), expiresAt: Date.now() + 1000 },
      grantExpiresAt: Date.now() + 10_000,
    });
    expect(record.status).toBe("issued");
    if (record.status === "issued") {
      expect(record.code).toMatchObject({
        codeChallenge: challenge,
        scopes: ["notes:read"],
        userId: "u-alice",
        resource: RESOURCE,
      });
    }

    // A wider request (step-up) is not silent: it goes to the consent page.
    const wider = await agent.get(authorizeUrl(h.url, { scope: "notes:admin" }));
    expect(wider.headers.get("location")).toMatch(/^\/consent\?interaction=/);
    // prompt=login forces the login page even with a session.
    const forced = await agent.get(authorizeUrl(h.url, { scope: "notes:read", prompt: "login" }));
    expect(forced.headers.get("location")).toMatch(/^\/login\?interaction=/);
  });

  it("prompt=consent shows the consent page even when a remembered consent covers the request", async () => {
    await h.addClient({ clientId: "prompt-consent", redirectUris: ["https://app.example/cb"] });
    const request = { client_id: "prompt-consent", scope: "notes:read" };
    const agent = new Agent(h.url);
    const { fields } = await reachConsent(agent, authorizeUrl(h.url, request));
    expect((await agent.post("/consent", { ...fields, decision: "approve" })).status).toBe(303);
    // Without prompt the same request is now silent; with prompt=consent the user is asked.
    const silent = await agent.get(authorizeUrl(h.url, request));
    expect(silent.headers.get("location")).toMatch(/^https:\/\/app\.example\/cb\?code=/);
    const asked = await agent.get(authorizeUrl(h.url, { ...request, prompt: "consent" }));
    const consentPath = asked.headers.get("location");
    expect(consentPath).toMatch(/^\/consent\?interaction=/);
    const page = await agent.get(consentPath!);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('name="decision"');
    expect(page.headers.get("location")).toBeNull();
  });

  it("prompt=login shows the login page to a browser signed in before the request", async () => {
    await h.addClient({ clientId: "prompt-login", redirectUris: ["https://app.example/cb"] });
    const request = { client_id: "prompt-login", scope: "notes:read" };
    const agent = new Agent(h.url);
    const { fields } = await reachConsent(agent, authorizeUrl(h.url, request));
    expect((await agent.post("/consent", { ...fields, decision: "approve" })).status).toBe(303);
    const forced = await agent.get(authorizeUrl(h.url, { ...request, prompt: "login" }));
    const loginPath = forced.headers.get("location");
    expect(loginPath).toMatch(/^\/login\?interaction=/);
    const page = await agent.get(loginPath!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('name="password"');
  });

  it("consent is per redirect URI: another registered URI of the same client is not silent", async () => {
    const agent = new Agent(h.url);
    const first = authorizeUrl(h.url, { client_id: "two-uris", redirect_uri: "https://app.example/one" });
    const { fields } = await reachConsent(agent, first);
    expect((await agent.post("/consent", { ...fields, decision: "approve" })).status).toBe(303);
    const again = await agent.get(first);
    expect(again.headers.get("location")!.startsWith("https://app.example/one?code=")).toBe(true);
    const other = await agent.get(
      authorizeUrl(h.url, { client_id: "two-uris", redirect_uri: "https://app.example/two" }),
    );
    expect(other.headers.get("location")).toMatch(/^\/consent\?interaction=/);
  });

  it("consent is per user: bob does not inherit alice's consent", async () => {
    const alice = new Agent(h.url);
    const { fields } = await reachConsent(alice, authorizeUrl(h.url, { client_id: "no-refresh" }));
    expect((await alice.post("/consent", { ...fields, decision: "approve" })).status).toBe(303);
    const bob = new Agent(h.url);
    const { html } = await reachConsent(bob, authorizeUrl(h.url, { client_id: "no-refresh" }), {
      username: "bob",
      password: `${PASSWORD} (bob)`,
    });
    expect(html).toContain("bob");
  });
});
