/**
 * `dpop_jkt` at the authorization endpoint (RFC 9449 §10), on a real server on loopback: the code
 * answered silently from an earlier consent is bound to the thumbprint, and only a proof of that
 * key redeems it. A malformed value goes back to the client as `invalid_request`; so, for now, does
 * a request that needs the login or consent page (the pending interaction cannot store it).
 */
import { afterEach, describe, expect, it } from "vitest";
import { proof, proofKey } from "./dpop-support.js";
import { pkcePair } from "./pages/harness.js";
import {
  Agent,
  approve,
  type FlowServer,
  publicClient,
  RESOURCE,
  signIn,
  startFlowServer,
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

  it("a malformed dpop_jkt, and one on a request that needs a page, go back as invalid_request", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const agent = new Agent(server.issuer);
    const malformed = await authorize(agent, { dpop_jkt: "not a thumbprint" });
    expect(malformed.location.origin + malformed.location.pathname).toBe(REDIRECT_URI);
    expect(malformed.location.searchParams.get("error")).toBe("invalid_request");
    expect(malformed.location.searchParams.get("state")).toBe("s1");

    const key = await proofKey();
    const needsLogin = await authorize(agent, { dpop_jkt: key.jkt });
    expect(needsLogin.location.searchParams.get("error")).toBe("invalid_request");
    expect(needsLogin.location.searchParams.has("code")).toBe(false);
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
