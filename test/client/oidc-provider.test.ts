/**
 * Interoperability: our client against oidc-provider 9 (a third-party authorization server), with
 * discovery through protected resource metadata, dynamic registration, PKCE, resource indicators
 * and refresh-token rotation, the provider keeping its default refresh policy (OpenID Connect Core
 * §11). See test/support/oidc-provider.ts for the setup and its deviations.
 */
import { afterEach, describe, expect, it } from "vitest";
import { AuthClient, MemoryTokenStore } from "../../src/client/index.js";
import {
  interactiveUserAgent,
  type OidcProviderFixture,
  startOidcProvider,
} from "../support/oidc-provider.js";

const REDIRECT = "http://127.0.0.1:9/callback";
let op: OidcProviderFixture | undefined;
afterEach(async () => {
  await op?.close();
  op = undefined;
});

describe("client against oidc-provider", () => {
  it("logs in (registration, login, consent, PKCE, resource) and the resource accepts the JWT with aud = resource", async () => {
    op = await startOidcProvider();
    const store = new MemoryTokenStore();
    const events: string[] = [];
    const client = new AuthClient({
      store,
      redirectUri: REDIRECT,
      userAgent: interactiveUserAgent(REDIRECT),
      onEvent: (e) => events.push(e.type),
    });
    const response = await client.fetch(op.resourceUrl);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true, sub: "alice" });
    expect(op.accepted).toHaveLength(1);
    expect(op.accepted[0]!.aud).toBe(op.resourceUrl);
    expect(events).toEqual(["discovered", "authorization_started", "registered", "authorized"]);
    const registration = await store.get("client", op.issuer);
    expect(registration?.source).toBe("dynamic");
    const tokens = (await store.list("tokens"))[0]?.[1];
    expect(tokens?.resource).toBe(op.resourceUrl);
    expect(tokens?.refresh_token).toBeTruthy();
    expect(tokens?.scope?.split(" ")).toContain("read");
  });

  it("OpenID Connect Core §11: the provider's metadata declares OpenID Connect, so offline_access goes with prompt=consent; its default policy issues a refresh token, which is used", async () => {
    op = await startOidcProvider({ accessTokenTtl: 30 });
    const store = new MemoryTokenStore();
    const events: string[] = [];
    const authorizationUrls: URL[] = [];
    const signIn = interactiveUserAgent(REDIRECT);
    const client = new AuthClient({
      store,
      redirectUri: REDIRECT,
      userAgent: (url) => {
        authorizationUrls.push(url);
        return signIn(url);
      },
      refreshSkewSeconds: 60,
      onEvent: (e) => events.push(e.type),
    });
    const first = await client.fetch(op.resourceUrl);
    expect(first.status).toBe(200);
    await first.body?.cancel();
    // oidc-provider serves one document at both well-known paths; the spec's order reads the
    // RFC 8414 one, which declares OpenID Connect (id_token_signing_alg_values_supported).
    const server = await store.get("server", op.issuer);
    expect(server?.discovered_via).toBe("oauth-authorization-server");
    expect(server?.metadata).toHaveProperty("id_token_signing_alg_values_supported");
    const request = authorizationUrls[0]!.searchParams;
    expect(request.get("scope")?.split(" ")).toContain("offline_access");
    expect(request.get("prompt")).toBe("consent");
    const issued = (await store.list("tokens"))[0]![1];
    // The default policy (offline_access granted, which needs prompt=consent) issued one.
    expect(issued.refresh_token).toBeTruthy();

    // The access token expires inside the skew, so this call refreshes first, with no new login.
    const second = await client.fetch(op.resourceUrl);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    expect(authorizationUrls).toHaveLength(1);
    expect(events.filter((e) => e === "refreshed")).toHaveLength(1);
    const renewed = (await store.list("tokens"))[0]![1];
    expect(renewed.access_token).not.toBe(issued.access_token);
    expect(op.accepted).toHaveLength(2);
    expect(op.accepted[1]!.aud).toBe(op.resourceUrl);
  });

  it("refreshes with the rotated refresh token (resource kept), and the old refresh token is dead", async () => {
    // Tokens live 30 s and the client refreshes 60 s ahead, so the second call refreshes first.
    op = await startOidcProvider({ accessTokenTtl: 30 });
    const store = new MemoryTokenStore();
    const events: string[] = [];
    const client = new AuthClient({
      store,
      redirectUri: REDIRECT,
      userAgent: interactiveUserAgent(REDIRECT),
      refreshSkewSeconds: 60,
      onEvent: (e) => events.push(e.type),
    });
    const first = await client.fetch(op.resourceUrl);
    expect(first.status).toBe(200);
    await first.body?.cancel();
    const before = (await store.list("tokens"))[0]![1];

    const second = await client.fetch(op.resourceUrl);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    const after = (await store.list("tokens"))[0]![1];
    expect(events.filter((e) => e === "refreshed")).toHaveLength(1);
    expect(events.filter((e) => e === "authorized")).toHaveLength(1);
    expect(after.access_token).not.toBe(before.access_token);
    expect(after.refresh_token).toBeTruthy();
    expect(after.refresh_token).not.toBe(before.refresh_token);
    // The refreshed access token is still for our resource.
    expect(op.accepted).toHaveLength(2);
    expect(op.accepted[1]!.aud).toBe(op.resourceUrl);
    expect(op.accepted[1]!.jti).not.toBe(op.accepted[0]!.jti);

    // Rotation: the first refresh token was consumed.
    const replay = await op.redeemRefreshToken(before.refresh_token!, before.client_id);
    expect(replay.status).toBe(400);
    expect(replay.body).toMatchObject({ error: "invalid_grant" });
  });

  it("RFC 9449: against oidc-provider's DPoP (with its token-endpoint nonce), tokens are bound to our key, used with proofs, and refreshed with the same key", async () => {
    op = await startOidcProvider({ accessTokenTtl: 30, dpop: { requireNonce: true } });
    const store = new MemoryTokenStore();
    const events: string[] = [];
    const tokenStatuses: number[] = [];
    const client = new AuthClient({
      store,
      // Watches the token endpoint's answers (the nonce challenge is only visible on the wire).
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        const url = input instanceof Request ? input.url : String(input);
        if (url === `${op!.issuer}/token`) tokenStatuses.push(response.status);
        return response;
      },
      redirectUri: REDIRECT,
      userAgent: interactiveUserAgent(REDIRECT),
      refreshSkewSeconds: 60,
      onEvent: (e) => events.push(e.type),
    });
    const first = await client.fetch(op.resourceUrl, { method: "POST", body: "{}" });
    expect(first.status).toBe(200);
    await first.body?.cancel();
    const tokens = (await store.list("tokens"))[0]![1];
    expect(tokens.token_type.toLowerCase()).toBe("dpop");
    const key = await store.get("dpop", op.issuer);
    expect(key?.client_id).toBe(tokens.client_id);
    expect(op.accepted[0]).toMatchObject({ scheme: "DPoP", jkt: tokens.dpop_jkt });
    // RFC 9449 §8: the first proof had no nonce, the provider answered use_dpop_nonce, one retry.
    expect(tokenStatuses).toEqual([400, 200]);

    const second = await client.fetch(op.resourceUrl);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    expect(events.filter((e) => e === "refreshed")).toHaveLength(1);
    expect(op.accepted).toHaveLength(2);
    expect(op.accepted[1]).toMatchObject({ scheme: "DPoP", jkt: tokens.dpop_jkt });
    // The refresh reused the cached nonce: no second challenge.
    expect(tokenStatuses).toEqual([400, 200, 200]);
  });
});
