/**
 * DPoP (RFC 9449) through `AuthClient` against a DPoP-capable fake (dpop-fixture.ts): proofs at the
 * token endpoint and the resource, nonces, bound refresh, key storage, and the `wantsDPoP` decision.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  clientCredentialsGrant,
  createAuthFetch,
  EncryptedFileTokenStore,
  MemoryTokenStore,
} from "../../../src/client/index.js";
import { wantsDPoP } from "../../../src/client/protocol/dpop.js";
import { followRedirect } from "../fixtures.js";
import { type DPoPFake, type DPoPFakeOptions, startDPoPFake } from "./dpop-fixture.js";

const REDIRECT = "http://127.0.0.1:9/callback";
let fake: DPoPFake | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function setup(options: DPoPFakeOptions = {}) {
  fake = await startDPoPFake(options);
  return fake;
}

describe("DPoP (RFC 9449)", () => {
  it("RFC 9449 §5 and §7.1: advertised ES256 gives a proof at the token endpoint and DPoP scheme + fresh proof with ath on every resource request", async () => {
    const f = await setup();
    const store = new MemoryTokenStore();
    const authFetch = createAuthFetch({ store, redirectUri: REDIRECT, userAgent: followRedirect });
    const first = await authFetch(`${f.resourceUrl}?q=1#frag`, { method: "POST", body: "one" });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ ok: true, method: "POST", body: "one" });
    const second = await authFetch(f.resourceUrl, { method: "GET" });
    expect(second.status).toBe(200);
    await second.body?.cancel();

    // Every proof the servers saw verified (signature, typ, jwk, htm, htu, iat, jti, ath).
    expect(f.proofs.every((p) => p.ok)).toBe(true);
    const tokenProofs = f.proofs.filter((p) => p.where === "token");
    const resourceProofs = f.proofs.filter((p) => p.where === "resource");
    expect(tokenProofs).toHaveLength(1);
    expect(resourceProofs).toHaveLength(2);
    // htu has no query or fragment (RFC 9449 §4.2).
    expect(resourceProofs[0]!.htu).toBe(f.resourceUrl);
    // Fresh jti per request; one key for the registration.
    expect(new Set(resourceProofs.map((p) => p.jti)).size).toBe(2);
    expect(new Set(f.proofs.map((p) => p.jkt)).size).toBe(1);
    expect(f.resourceRequests.filter((r) => r.status === 200).map((r) => r.scheme)).toEqual(["DPoP", "DPoP"]);

    const tokens = (await store.list("tokens"))[0]?.[1];
    expect(tokens!.token_type.toLowerCase()).toBe("dpop");
    expect(tokens!.dpop_jkt).toBe(tokenProofs[0]!.jkt);
    const key = (await store.list("dpop"))[0]?.[1];
    expect(key!.client_id).toBe("dpop-client");
    // The public JWK in proofs carries no private member.
    expect(key!.public_jwk).not.toHaveProperty("d");
  });

  it("RFC 9449 §7.1: a DPoP challenge from the resource alone (no AS metadata) is enough to ask for DPoP", async () => {
    const f = await setup({ advertise: false });
    const response = await createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect })(
      f.resourceUrl,
    );
    expect(response.status).toBe(200);
    expect(f.tokenRequests[0]).toMatchObject({ grant: "authorization_code", dpop: true, status: 200 });
  });

  it("RFC 9449 §8: use_dpop_nonce at the token endpoint is retried once with the server's nonce (the code survives)", async () => {
    const f = await setup({ asNonce: true });
    const response = await createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect })(
      f.resourceUrl,
    );
    expect(response.status).toBe(200);
    expect(f.tokenRequests.map((r) => r.status)).toEqual([400, 200]);
    const tokenProofs = f.proofs.filter((p) => p.where === "token");
    expect(tokenProofs[0]!.nonce).toBeUndefined();
    expect(tokenProofs[1]!.nonce).toMatch(/^as-nonce-/);
  });

  it("RFC 9449 §9: use_dpop_nonce from the resource is retried once, and the nonce is cached for that origin", async () => {
    const f = await setup({ rsNonce: true, asNonce: true });
    const authFetch = createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect });
    const first = await authFetch(f.resourceUrl, { method: "POST", body: "a" });
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ body: "a" });
    const second = await authFetch(f.resourceUrl, { method: "POST", body: "b" });
    expect(second.status).toBe(200);
    await second.body?.cancel();
    // One challenge, then two successes; nonces are per origin (the AS one is not sent to the RS).
    expect(f.resourceRequests.map((r) => r.status)).toEqual([401, 401, 200, 200]);
    const resourceProofs = f.proofs.filter((p) => p.where === "resource");
    expect(resourceProofs[0]!.nonce).toBeUndefined();
    expect(resourceProofs[1]!.nonce).toMatch(/^rs-nonce-/);
    expect(resourceProofs[2]!.nonce).toBe(resourceProofs[1]!.nonce);
  });

  it("RFC 9449 §9: a resource that keeps asking for a new nonce gets one retry, then its 401 is returned (no loop)", async () => {
    const f = await setup({ rsNonceAlwaysNew: true });
    const authFetch = createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect });
    const response = await authFetch(f.resourceUrl);
    expect(response.status).toBe(401);
    expect(response.headers.get("www-authenticate")).toContain("use_dpop_nonce");
    await response.body?.cancel();
    // No token, then the token without a nonce, then once with the nonce: three requests.
    expect(f.resourceRequests.map((r) => [r.scheme, r.status])).toEqual([
      ["", 401],
      ["DPoP", 401],
      ["DPoP", 401],
    ]);
    expect(f.tokenRequests).toHaveLength(1);
  });

  it("RFC 9449 §5: the refresh request is signed with the key the refresh token is bound to", async () => {
    const f = await setup({ expiresIn: 1 });
    const store = new MemoryTokenStore();
    const client = new AuthClient({
      store,
      redirectUri: REDIRECT,
      userAgent: followRedirect,
      refreshSkewSeconds: 30,
    });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    // The token is within the skew at once, so the next request refreshes first.
    const again = await client.fetch(f.resourceUrl);
    expect(again.status).toBe(200);
    await again.body?.cancel();
    expect(f.tokenRequests.map((r) => [r.grant, r.status])).toEqual([
      ["authorization_code", 200],
      ["refresh_token", 200],
    ]);
    expect(new Set(f.proofs.map((p) => p.jkt)).size).toBe(1);
  });

  it("spec 'Token theft' 1: the encrypted file store keeps the DPoP private key encrypted, and a new process reuses key and token", async () => {
    const f = await setup();
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-dpop-"));
    dirs.push(dir);
    const key = new Uint8Array(32).fill(7);
    const first = createAuthFetch({
      store: new EncryptedFileTokenStore({ directory: dir, key }),
      redirectUri: REDIRECT,
      userAgent: followRedirect,
    });
    expect((await first(f.resourceUrl)).status).toBe(200);
    const raw = await readFile(join(dir, "store.enc"), "utf8");
    expect(raw).not.toMatch(/private_jwk|"d"|dpop-client/);

    const store = new EncryptedFileTokenStore({ directory: dir, key });
    const stored = await store.get("dpop", f.asBase);
    expect(stored?.private_jwk.d).toBeTruthy();
    // A second client (a new process) uses the stored token and key: no new authorization.
    const second = createAuthFetch({
      store,
      redirectUri: REDIRECT,
      userAgent: async () => {
        throw new Error("must not authorize again");
      },
    });
    const response = await second(f.resourceUrl);
    expect(response.status).toBe(200);
    await response.body?.cancel();
    expect(f.tokenRequests).toHaveLength(1);
    expect(new Set(f.proofs.map((p) => p.jkt)).size).toBe(1);
  });

  it("a Bearer-only resource gets bearer tokens even when the authorization server offers DPoP ('auto'), and 'never' ignores a DPoP challenge", async () => {
    const bearerOnly = await setup({ dpopChallenge: false });
    // This authorization server only issues bound tokens, so it refuses; what matters is what was sent.
    const auto = await createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect })(
      bearerOnly.resourceUrl,
    ).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(auto?.code).toBe("token_request_failed");
    expect(bearerOnly.tokenRequests).toEqual([{ grant: "authorization_code", dpop: false, status: 400 }]);
    await bearerOnly.close();

    const f = await setup();
    const never = await createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect, dpop: "never" })(
      f.resourceUrl,
    ).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(never?.code).toBe("token_request_failed");
    expect(f.tokenRequests).toEqual([{ grant: "authorization_code", dpop: false, status: 400 }]);
  });

  it("dpop: 'always' binds tokens whenever the authorization server lists ES256", async () => {
    const f = await setup({ dpopChallenge: false });
    const authFetch = createAuthFetch({ redirectUri: REDIRECT, userAgent: followRedirect, dpop: "always" });
    const response = await authFetch(f.resourceUrl);
    expect(response.status).toBe(200);
    await response.body?.cancel();
    expect(f.tokenRequests).toEqual([{ grant: "authorization_code", dpop: true, status: 200 }]);
    expect(f.resourceRequests.at(-1)).toEqual({ scheme: "DPoP", status: 200 });
  });

  it("RFC 9449 §5: a non-interactive grant (client credentials) is DPoP-bound too", async () => {
    const f = await setup();
    const store = new MemoryTokenStore();
    const authFetch = createAuthFetch({
      store,
      grant: clientCredentialsGrant({ clientId: "service", clientSecret: "service-secret" }),
    });
    const response = await authFetch(f.resourceUrl);
    expect(response.status).toBe(200);
    await response.body?.cancel();
    expect(f.tokenRequests).toEqual([{ grant: "client_credentials", dpop: true, status: 200 }]);
    expect(f.resourceRequests.at(-1)).toEqual({ scheme: "DPoP", status: 200 });
    expect((await store.get("dpop", f.asBase))?.client_id).toBe("service");
  });

  it("wantsDPoP: 'auto' needs the resource to offer DPoP and a server that can bind with ES256 (or says nothing)", () => {
    const as = (algs?: string[]) => ({
      issuer: "https://as.example",
      ...(algs && { dpop_signing_alg_values_supported: algs }),
    });
    expect(wantsDPoP("auto", as(["ES256"]), {})).toBe(false);
    expect(wantsDPoP("auto", as(["ES256"]), { offersDPoP: true })).toBe(true);
    expect(wantsDPoP("auto", as(), { offersDPoP: true })).toBe(true);
    expect(wantsDPoP("auto", as(["RS256"]), { offersDPoP: true })).toBe(false);
    expect(wantsDPoP("auto", as(["ES256"]), { boundTokensRequired: true })).toBe(true);
    expect(wantsDPoP("auto", as(["ES256"]), { algorithms: ["ES256"] })).toBe(true);
    expect(wantsDPoP("always", as(["ES256"]), {})).toBe(true);
    expect(wantsDPoP("always", as(), {})).toBe(false);
    expect(wantsDPoP("never", as(["ES256"]), { offersDPoP: true })).toBe(false);
  });
});
