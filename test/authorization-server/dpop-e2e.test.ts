/**
 * DPoP end to end: Gatehouse's client (AuthClient, `dpop: "auto"`) ↔ Gatehouse's authorization
 * server on loopback (real /authorize, login, consent, /token) ↔ Gatehouse's gate with DPoP
 * required, which checks the way RFC 9449 §7.1 says: the token's signature against the server's
 * keys, then the proof (signature, htm, htu, iat, jti, `ath`) made with the key of `cnf.jkt`.
 *
 * The server requires nonces (§8), so the first token request is answered `use_dpop_nonce` and the
 * client retries with the nonce; after the nonce ages out, the refresh goes through the same
 * round trip. The refresh token is bound to the client's key (§5): it works with that key only.
 *
 * The resource (`https://notes.example/mcp`) is outside this machine: the client's fetch routes its
 * origin to the gate in process; everything else is real HTTP to the real server.
 */
import { calculateJwkThumbprint } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { AuthClient, MemoryTokenStore } from "../../src/client/index.js";
import { createResourceServer, jwtVerifier } from "../../src/resource-server/index.js";
import { sha256Base64url } from "../../src/shared/crypto.js";
import { Browser, consentingUserAgent } from "../support/flow.js";
import { proof, proofKey } from "./dpop-support.js";
import { PASSWORD } from "./pages/harness.js";
import { type FlowServer, publicClient, RESOURCE, startFlowServer, USERNAME } from "./support/flow-server.js";

const REDIRECT_URI = "http://127.0.0.1/callback";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** What the gate did: the key each admitted request proved, and the status of each refusal. */
interface ResourceLog {
  accepted: { jkt: string | undefined }[];
  refused: number[];
}

/**
 * The resource: Gatehouse's own gate with DPoP required (RFC 9449 §7.1, §7.2), verifying the
 * server's JWTs with its published keys and each proof against the token's `cnf.jkt`.
 */
async function dpopResource(issuer: string, log: ResourceLog, policy: "allowed" | "required" = "required") {
  const jwks = (await (await fetch(`${issuer}/jwks.json`)).json()) as { keys: Record<string, unknown>[] };
  const gate = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [issuer],
    scopesSupported: ["notes:read", "notes:write"],
    verifier: jwtVerifier({ issuer, audience: RESOURCE, jwks }),
    dpop: { policy, algorithms: ["ES256"] },
  });
  const reading = gate.requireBearer({ scopes: ["notes:read"] });
  // Writing needs more: a token for notes:read alone is answered 403 insufficient_scope.
  const writing = gate.requireBearer({ scopes: ["notes:write"] });
  return async (request: Request): Promise<Response> => {
    if (gate.handles(request)) return gate.metadataResponse(request);
    const guarded = request.method === "POST" ? writing : reading;
    const response = await guarded(request, async (_request, auth) => {
      log.accepted.push({ jkt: auth.dpopJkt });
      return Response.json({ ok: true });
    });
    if (response.status !== 200) log.refused.push(response.status);
    return response;
  };
}

/** Signs in and approves consent on the real pages, returning the callback URL. */
function userAgent(issuer: string, browser: Browser) {
  return consentingUserAgent(browser, {
    issuer,
    username: USERNAME,
    password: PASSWORD,
    redirectUri: REDIRECT_URI,
  });
}

describe("DPoP end to end: Gatehouse client, authorization server and a cnf.jkt-checking resource", () => {
  it("binds, rotates nonces, refreshes with the same key and refuses another key", async () => {
    server = await startFlowServer({
      clients: [publicClient({ redirectUris: [REDIRECT_URI] })],
      extra: { dpop: { requireNonce: true, nonceLifetimeSeconds: 10 } },
    });
    const issuer = server.issuer;
    const resourceLog: ResourceLog = { accepted: [], refused: [] };
    const resource = await dpopResource(issuer, resourceLog);
    const tokenAnswers: string[] = [];
    const store = new MemoryTokenStore();
    const client = new AuthClient({
      store,
      redirectUri: REDIRECT_URI,
      userAgent: userAgent(issuer, new Browser()),
      preregisteredClients: { [issuer]: { client_id: "cli" } },
      // Refresh before every request: each resource call below goes through /token first.
      refreshSkewSeconds: 3600,
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (new URL(request.url).origin === "https://notes.example") return resource(request);
        const response = await fetch(request);
        if (request.url === `${issuer}/token`) {
          const body = (await response.clone().json()) as { error?: string; token_type?: string };
          tokenAnswers.push(`${response.status} ${body.error ?? body.token_type}`);
        }
        return response;
      },
    });

    const first = await client.fetch(`${RESOURCE}/notes`);
    expect(first.status).toBe(200);
    // §8: the server asked for a nonce, the client retried with it and got a DPoP-bound token.
    expect(tokenAnswers).toEqual(["400 use_dpop_nonce", "200 DPoP"]);
    const [[, tokens] = []] = await store.list("tokens");
    const [[, key] = []] = await store.list("dpop");
    const clientJkt = await calculateJwkThumbprint(key!.public_jwk, "sha256");
    // (oauth4webapi, under the client, stores token_type lowercased.)
    expect(tokens?.token_type.toLowerCase()).toBe("dpop");
    expect(tokens?.dpop_jkt).toBe(clientJkt);
    expect(resourceLog.accepted).toEqual([{ jkt: clientJkt }]);

    // The refresh token is bound to the client's key (§5, public client).
    const refreshToken = tokens!.refresh_token!;
    const grant = await server.store.getRefreshToken(sha256Base64url(refreshToken));
    expect((await server.store.getGrant(grant!.grantId))?.dpopJkt).toBe(clientJkt);

    // Another key cannot use it, even with a current nonce; the token stays good.
    const thief = await proofKey();
    const tokenUrl = `${issuer}/token`;
    const steal = async (nonce?: string) =>
      fetch(tokenUrl, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          dpop: await proof(thief, tokenUrl, server!.clock.now, nonce === undefined ? {} : { nonce }),
        },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: refreshToken,
          client_id: "cli",
        }),
      });
    const asked = await steal();
    expect(asked.status).toBe(400);
    expect(((await asked.json()) as { error: string }).error).toBe("use_dpop_nonce");
    const stolen = await steal(asked.headers.get("dpop-nonce")!);
    expect(stolen.status).toBe(400);
    expect(((await stolen.json()) as { error: string }).error).toBe("invalid_grant");

    // The nonce ages out (two windows of 10 s): the refresh first hears use_dpop_nonce, then works
    // with the same key, and the resource accepts the new token with proofs of that key.
    server.clock.now += 25_000;
    tokenAnswers.length = 0;
    const second = await client.fetch(`${RESOURCE}/notes`);
    expect(second.status).toBe(200);
    expect(tokenAnswers).toEqual(["400 use_dpop_nonce", "200 DPoP"]);
    expect(resourceLog.accepted).toEqual([{ jkt: clientJkt }, { jkt: clientJkt }]);
    const [[, refreshed] = []] = await store.list("tokens");
    expect(refreshed?.refresh_token).not.toBe(refreshToken);
    // The only refusal was the first, token-less request (the 401 that starts the flow).
    expect(resourceLog.refused).toEqual([401]);
  });

  it("steps up when the gate, allowing both schemes, puts insufficient_scope in the DPoP challenge", async () => {
    server = await startFlowServer({ clients: [publicClient({ redirectUris: [REDIRECT_URI] })] });
    const issuer = server.issuer;
    const resourceLog: ResourceLog = { accepted: [], refused: [] };
    // RFC 9449 §7.1: the error goes in the challenge of the scheme the request used (DPoP), and a
    // Bearer challenge without an error follows; the client must read the DPoP one.
    const resource = await dpopResource(issuer, resourceLog, "allowed");
    const scopesAsked: string[] = [];
    const client = new AuthClient({
      store: new MemoryTokenStore(),
      redirectUri: REDIRECT_URI,
      userAgent: async (authorizationUrl) => {
        scopesAsked.push(authorizationUrl.searchParams.get("scope") ?? "");
        return userAgent(issuer, browser)(authorizationUrl);
      },
      preregisteredClients: { [issuer]: { client_id: "cli" } },
      fetch: async (input, init) => {
        const request = new Request(input, init);
        if (new URL(request.url).origin === "https://notes.example") return resource(request);
        return fetch(request);
      },
    });
    const browser = new Browser();
    expect((await client.fetch(`${RESOURCE}/notes`)).status).toBe(200);
    const written = await client.fetch(`${RESOURCE}/notes`, { method: "POST", body: "hello" });
    expect(written.status).toBe(200);
    expect(scopesAsked).toHaveLength(2);
    expect(scopesAsked[1]?.split(" ")).toContain("notes:write");
    // Both admitted requests proved the key; the refusals were the first 401 and the 403 step-up.
    expect(resourceLog.accepted).toHaveLength(2);
    expect(resourceLog.accepted.every((entry) => entry.jkt !== undefined)).toBe(true);
    expect(resourceLog.refused).toEqual([401, 403]);
  });
});
