/**
 * `dpop_jkt` at the authorization endpoint (RFC 9449 §10), on a real server on loopback: the code is
 * bound to the thumbprint whether it is answered silently from an earlier consent or after the login
 * and consent pages (the pending interaction keeps the thumbprint), and only a proof of that key
 * redeems it. A malformed value goes back to the client as `invalid_request`.
 */
import { decodeJwt } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { type ProofKey, proof, proofKey } from "./dpop-support.js";
import { hiddenFields, PASSWORD, pkcePair } from "./pages/harness.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  RESOURCE,
  signIn,
  startFlowServer,
  USERNAME,
} from "./support/flow-server.js";

const REDIRECT_URI = "https://app.example/callback";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** GET /authorize with `extra` parameters; the 303's target. */
async function authorize(agent: Agent, extra: Record<string, string>) {
  const { verifier, challenge } = pkcePair();
  const query = new URLSearchParams({
    response_type: "code",
    client_id: "cli",
    redirect_uri: REDIRECT_URI,
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: "notes:read",
    state: "s1",
    ...extra,
  });
  const response = await agent.get(`/authorize?${query}`);
  expect(response.status).toBe(303);
  return { location: new URL(response.headers.get("location")!, agent.base), verifier };
}

describe("dpop_jkt binds the authorization code (RFC 9449 §10)", () => {
  it("a silently issued code is redeemed only with a proof of the named key", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const issuer = server.issuer;
    const agent = new Agent(issuer);
    // An earlier consent, so the next requests are answered without a page.
    await approve(
      agent,
      await signIn(agent, { clientId: "cli", redirectUri: REDIRECT_URI, scope: "notes:read" }),
    );

    const key = await proofKey();
    const other = await proofKey();
    const redeem = async (grant: { location: URL; verifier: string }, dpop: string | undefined) => {
      const response = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          ...(dpop === undefined ? {} : { dpop }),
        },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code: grant.location.searchParams.get("code")!,
          code_verifier: grant.verifier,
          client_id: "cli",
          redirect_uri: REDIRECT_URI,
          resource: RESOURCE,
        }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    const stolen = await authorize(agent, { dpop_jkt: key.jkt });
    expect(stolen.location.searchParams.has("code")).toBe(true);
    expect(await redeem(stolen, await proof(other, `${issuer}/token`, server.clock.now))).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    const bare = await authorize(agent, { dpop_jkt: key.jkt });
    expect((await redeem(bare, undefined)).body.error).toBe("invalid_grant");

    const good = await authorize(agent, { dpop_jkt: key.jkt });
    const tokens = await redeem(good, await proof(key, `${issuer}/token`, server.clock.now));
    expect(tokens.status).toBe(200);
    expect(tokens.body.token_type).toBe("DPoP");

    // Without dpop_jkt the silent code is not bound: any proof (or none) redeems it.
    const unbound = await authorize(agent, {});
    expect((await redeem(unbound, undefined)).body.token_type).toBe("Bearer");
  });

  it("a malformed dpop_jkt goes back as invalid_request, before any page", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const agent = new Agent(server.issuer);
    for (const value of ["not a thumbprint", "A".repeat(42), "A".repeat(44), `${"A".repeat(42)}=`]) {
      const malformed = await authorize(agent, { dpop_jkt: value });
      expect(malformed.location.origin + malformed.location.pathname).toBe(REDIRECT_URI);
      expect(malformed.location.searchParams.get("error"), value).toBe("invalid_request");
      expect(malformed.location.searchParams.get("state")).toBe("s1");
      expect(malformed.location.searchParams.has("code")).toBe(false);
    }
  });

  it("ignores dpop_jkt as an unknown parameter when DPoP is off", async () => {
    server = await startFlowServer({
      clients: [publicClient({ redirectUris: [REDIRECT_URI] })],
      extra: { dpop: { enabled: false } },
    });
    const agent = new Agent(server.issuer);
    const outcome = await authorize(agent, { dpop_jkt: "not a thumbprint" });
    // On to the login page: the value was not looked at.
    expect(outcome.location.pathname).toBe("/login");
  });
});

/** POSTs the authorization code `grant` to the token endpoint, with a proof of `key` when given. */
async function redeemCode(
  issuer: string,
  grant: { code: string; verifier: string },
  key: ProofKey | undefined,
  now: number,
) {
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(key === undefined ? {} : { dpop: await proof(key, `${issuer}/token`, now) }),
    },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: grant.code,
      code_verifier: grant.verifier,
      client_id: "cli",
      redirect_uri: REDIRECT_URI,
      resource: RESOURCE,
    }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * /authorize with `dpop_jkt` from a browser that is not signed in: the login page (answered), then
 * the consent page when the user has not consented yet (answered with Allow), or straight to the
 * code when an earlier consent covers the request. Each step is checked to be the page it should be.
 */
async function throughThePages(
  agent: Agent,
  jkt: string,
  expectConsentPage: boolean,
): Promise<{ code: string; verifier: string }> {
  const start = await authorize(agent, { dpop_jkt: jkt });
  expect(start.location.pathname).toBe("/login");
  const loginPage = await agent.get(`${start.location.pathname}${start.location.search}`);
  expect(loginPage.status).toBe(200);
  const loggedIn = await agent.post("/login", {
    ...hiddenFields(await loginPage.text()),
    username: USERNAME,
    password: PASSWORD,
  });
  expect(loggedIn.status).toBe(303);
  const next = new URL(loggedIn.headers.get("location")!, agent.base);
  expect(next.pathname).toBe("/consent");
  const consent = await agent.get(`${next.pathname}${next.search}`);
  let location: URL;
  if (expectConsentPage) {
    expect(consent.status).toBe(200);
    const decided = await agent.post("/consent", {
      ...hiddenFields(await consent.text()),
      decision: "approve",
    });
    expect(decided.status).toBe(303);
    location = new URL(decided.headers.get("location")!);
  } else {
    // An earlier consent covers the request: the consent step answers at once with the code.
    expect(consent.status).toBe(303);
    location = new URL(consent.headers.get("location")!);
  }
  expect(location.origin + location.pathname).toBe(REDIRECT_URI);
  expect(location.searchParams.get("state")).toBe("s1");
  const code = location.searchParams.get("code");
  if (!code) throw new Error(`no code: ${location.search}`);
  return { code, verifier: start.verifier };
}

describe("dpop_jkt across the login and consent pages (RFC 9449 §10)", () => {
  it("a code issued after login and consent is bound: the named key redeems it (cnf.jkt), another key gets invalid_grant", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const { issuer, clock } = server;
    const key = await proofKey();
    const other = await proofKey();

    // A fresh browser: login page, then consent page.
    const good = await throughThePages(new Agent(issuer), key.jkt, true);
    const tokens = await redeemCode(issuer, good, key, clock.now);
    expect(tokens.status).toBe(200);
    expect(tokens.body.token_type).toBe("DPoP");
    expect(decodeJwt(String(tokens.body.access_token)).cnf).toEqual({ jkt: key.jkt });

    // Another browser, the user now has consented: login page, then the code at once.
    const stolen = await throughThePages(new Agent(issuer), key.jkt, false);
    expect(await redeemCode(issuer, stolen, other, clock.now)).toMatchObject({
      status: 400,
      body: { error: "invalid_grant" },
    });
    // The refused attempt spent the code: the right key cannot use it afterwards either.
    expect((await redeemCode(issuer, stolen, key, clock.now)).body.error).toBe("invalid_grant");

    // Without a proof, a bound code is refused too.
    const bare = await throughThePages(new Agent(issuer), key.jkt, false);
    const refused = await redeemCode(issuer, bare, undefined, clock.now);
    expect(refused).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(refused.body.access_token).toBeUndefined();
  });

  /**
   * A signed-in user who allowed notes:read before, asked for notes:write too with `dpop_jkt`: no
   * login page, only the consent page (answered with Allow). Returns the code it leads to.
   */
  async function consentPageOnly(jkt: string): Promise<{ code: string; verifier: string }> {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const agent = new Agent(server.issuer);
    await approve(
      agent,
      await signIn(agent, { clientId: "cli", redirectUri: REDIRECT_URI, scope: "notes:read" }),
    );
    const start = await authorize(agent, { dpop_jkt: jkt, scope: "notes:read notes:write" });
    expect(start.location.pathname).toBe("/consent");
    const page = await agent.get(`${start.location.pathname}${start.location.search}`);
    expect(page.status).toBe(200);
    const decided = await agent.post("/consent", { ...hiddenFields(await page.text()), decision: "approve" });
    expect(decided.status).toBe(303);
    const code = new URL(decided.headers.get("location")!).searchParams.get("code");
    if (!code) throw new Error("no code");
    return { code, verifier: start.verifier };
  }

  it("a signed-in user shown only the consent page: the named key redeems the code (cnf.jkt)", async () => {
    const key = await proofKey();
    const grant = await consentPageOnly(key.jkt);
    const tokens = await redeemCode(server!.issuer, grant, key, server!.clock.now);
    expect(tokens.status).toBe(200);
    expect(tokens.body.scope).toBe("notes:read notes:write");
    expect(decodeJwt(String(tokens.body.access_token)).cnf).toEqual({ jkt: key.jkt });
  });

  it("a signed-in user shown only the consent page: another key's proof gets invalid_grant", async () => {
    const key = await proofKey();
    const grant = await consentPageOnly(key.jkt);
    const refused = await redeemCode(server!.issuer, grant, await proofKey(), server!.clock.now);
    expect(refused).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(refused.body.access_token).toBeUndefined();
  });

  it("a request without dpop_jkt through the same pages stays unbound", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const agent = new Agent(server.issuer);
    const grant = await approve(
      agent,
      await signIn(agent, { clientId: "cli", redirectUri: REDIRECT_URI, scope: "notes:read" }),
    );
    const tokens = await redeemCode(server.issuer, grant, undefined, server.clock.now);
    expect(tokens.status).toBe(200);
    expect(tokens.body.token_type).toBe("Bearer");
    expect(decodeJwt(String(tokens.body.access_token)).cnf).toBeUndefined();
  });
});
