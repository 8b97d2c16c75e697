import { createLocalJWKSet, jwtVerify } from "jose";
import { describe, expect, it } from "vitest";
import { contextOf } from "../../../src/authorization-server/context-of.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { grantIdOfAccessTokenId } from "../../../src/storage/access-token-id.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  codeRequest,
  codeTokens,
  decodeHeader,
  decodePayload,
  ISSUER,
  issueCode,
  makeServer,
  OTHER_RESOURCE,
  PUBLIC_CLIENT,
  postToken,
  REDIRECT,
  RESOURCE,
  REVISIONS,
} from "../helpers.js";

describe.each(REVISIONS)("authorization_code grant (revision %s)", (revision) => {
  it("issues an RFC 9068 at+jwt bound to the resource, with a refresh token when offline_access was granted", async () => {
    const t = await makeServer({ revision });
    const { code, verifier } = await issueCode(t);
    const r = await postToken(t, codeRequest(code, verifier));
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.headers.get("pragma")).toBe("no-cache");
    expect(r.body.token_type).toBe("Bearer");
    expect(r.body.expires_in).toBe(300);
    expect(r.body.scope).toBe("notes:read offline_access");
    expect(typeof r.body.refresh_token).toBe("string");
    const at = r.body.access_token as string;
    expect(decodeHeader(at)).toMatchObject({ typ: "at+jwt", alg: "ES256" });
    const jwks = createLocalJWKSet((await contextOf(t.server).keys.publicJwks()) as never);
    const { payload } = await jwtVerify(at, jwks, {
      issuer: ISSUER,
      audience: RESOURCE,
      currentDate: new Date(t.clock.now),
    });
    expect(payload).toMatchObject({ sub: "user-1", client_id: PUBLIC_CLIENT, scope: "notes:read" });
    expect(payload.exp! - payload.iat!).toBe(300);
    expect(typeof payload.jti).toBe("string");
    // Only hashes reach storage.
    const record = await t.store.getRefreshToken(sha256Base64url(r.body.refresh_token as string));
    expect(record?.clientId).toBe(PUBLIC_CLIENT);
    // No row per access token (storage contract version 2): the jti names the grant.
    expect(await t.store.getAccessToken(payload.jti!)).toBeUndefined();
    expect(await t.store.getGrant(grantIdOfAccessTokenId(payload.jti!)!)).toBeDefined();
  });

  it("issues no refresh token when offline_access was not granted (the offline_access rule)", async () => {
    const t = await makeServer({ revision });
    const body = await codeTokens(t, { scopes: ["notes:read"] });
    expect(body.refresh_token).toBeUndefined();
    expect(body.scope).toBe("notes:read");
  });

  it("issues no refresh token when refresh tokens are disabled", async () => {
    const t = await makeServer({ revision, refreshTokens: { enabled: false } });
    const body = await codeTokens(t, { scopes: ["notes:read"], refreshAllowed: true });
    expect(body.refresh_token).toBeUndefined();
    expect(t.server.metadata.grant_types_supported).not.toContain("refresh_token");
  });
});

describe("authorization codes are single use and bound (SECURITY.md Token endpoint)", () => {
  it("a second use of a code fails with invalid_grant and revokes what the first use issued", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const params = codeRequest(code, verifier);
    const first = await postToken(t, params);
    expect(first.status).toBe(200);
    const second = await postToken(t, params);
    expect(second.status).toBe(400);
    expect(second.body.error).toBe("invalid_grant");
    expect(second.headers.get("cache-control")).toBe("no-store");
    // The first redemption's refresh token and access token are dead.
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: first.body.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.body.error).toBe("invalid_grant");
    const jti = decodePayload(first.body.access_token as string).jti as string;
    const grant = await t.store.getGrant(grantIdOfAccessTokenId(jti)!);
    expect(grant?.revokedAt).toBeDefined();
  });

  it("concurrent redemptions of one code: exactly one succeeds", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const params = codeRequest(code, verifier);
    const results = await Promise.all(Array.from({ length: 8 }, () => postToken(t, params)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.body.error === "invalid_grant")).toHaveLength(7);
  });

  it("a wrong PKCE verifier fails and consumes the code", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const wrong = await postToken(t, codeRequest(code, "x".repeat(43)));
    expect(wrong.body.error).toBe("invalid_grant");
    const right = await postToken(t, codeRequest(code, verifier));
    expect(right.body.error).toBe("invalid_grant");
  });

  it.each([
    ["missing", undefined],
    ["too short", "a".repeat(42)],
    ["too long", "a".repeat(129)],
    ["outside the unreserved set", `${"a".repeat(42)}+`],
  ])("a code_verifier that is %s is invalid_request", async (_name, value) => {
    const t = await makeServer();
    const { code } = await issueCode(t);
    const r = await postToken(t, codeRequest(code, value));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_request");
  });

  it("a code issued to another client is invalid_grant", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t, { clientId: CONFIDENTIAL_CLIENT });
    const r = await postToken(t, codeRequest(code, verifier));
    expect(r.body.error).toBe("invalid_grant");
  });

  it("a confidential client redeems its code only with its secret", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t, { clientId: CONFIDENTIAL_CLIENT });
    const params = codeRequest(code, verifier, { client_id: undefined });
    const noAuth = await postToken(t, { ...params, client_id: CONFIDENTIAL_CLIENT });
    expect(noAuth.status).toBe(401);
    const ok = await postToken(t, params, basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET));
    expect(ok.status).toBe(200);
  });

  it.each([
    ["another URI", "https://app.example.test/other"],
    ["a trailing slash", `${REDIRECT}/`],
    ["uppercase host", "https://APP.example.test/callback"],
  ])("redirect_uri differing by %s is invalid_grant (exact string match)", async (_n, redirectUri) => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const r = await postToken(t, codeRequest(code, verifier, { redirect_uri: redirectUri }));
    expect(r.body.error).toBe("invalid_grant");
  });

  it("redirect_uri may be left out only when the authorization request left it out (OAuth 2.1 §4.1.3)", async () => {
    const t = await makeServer();
    const omittedBefore = await issueCode(t, { redirectUriSent: false });
    const r = await postToken(
      t,
      codeRequest(omittedBefore.code, omittedBefore.verifier, { redirect_uri: undefined }),
    );
    expect(r.status).toBe(200);
    // Hostile: the authorization request carried it, so the token request must repeat it, even for a
    // client with a single registered redirect URI.
    const sentBefore = await issueCode(t, { redirectUriSent: true });
    const r2 = await postToken(
      t,
      codeRequest(sentBefore.code, sentBefore.verifier, { redirect_uri: undefined }),
    );
    expect(r2.status).toBe(400);
    expect(r2.body.error).toBe("invalid_grant");
  });

  it("resource is required in the token request (spec: MUST be in both requests)", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const r = await postToken(t, codeRequest(code, verifier, { resource: undefined }));
    expect(r.body.error).toBe("invalid_request");
  });

  it("a resource other than the code's is invalid_target, an unknown or malformed one too", async () => {
    const t = await makeServer();
    for (const resource of [
      OTHER_RESOURCE,
      "https://evil.example/mcp",
      `${RESOURCE}#frag`,
      "not a uri",
      `${RESOURCE}x`,
    ]) {
      const { code, verifier } = await issueCode(t);
      const r = await postToken(t, codeRequest(code, verifier, { resource }));
      expect(r.body.error, resource).toBe("invalid_target");
    }
  });

  it("accepts the resource with uppercase scheme and host (spec: SHOULD accept)", async () => {
    const t = await makeServer();
    const body = await codeTokens(t, { resource: RESOURCE }).then(async () => {
      const { code, verifier } = await issueCode(t);
      return postToken(t, codeRequest(code, verifier, { resource: "HTTPS://RS.EXAMPLE.TEST/mcp" }));
    });
    expect(body.status).toBe(200);
    expect(decodePayload(body.body.access_token as string).aud).toBe(RESOURCE);
  });

  it("an expired code (past its 60 s lifetime) is invalid_grant", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    t.clock.advance(61);
    const r = await postToken(t, codeRequest(code, verifier));
    expect(r.body.error).toBe("invalid_grant");
  });

  it("an unknown code is invalid_grant", async () => {
    const t = await makeServer();
    const r = await postToken(t, codeRequest("nope", "a".repeat(43)));
    expect(r.body.error).toBe("invalid_grant");
  });

  it("a client not registered for the grant type is unauthorized_client", async () => {
    const t = await makeServer();
    const { client } = await import("../helpers.js");
    await t.store.upsertClient(client({ clientId: "cc-only-public", grantTypes: ["refresh_token"] }));
    const { code, verifier } = await issueCode(t, { clientId: "cc-only-public" });
    const r = await postToken(t, codeRequest(code, verifier, { client_id: "cc-only-public" }));
    expect(r.body.error).toBe("unauthorized_client");
  });

  it("first successful use lifts a dynamic registration's expiry (markClientUsed)", async () => {
    const t = await makeServer();
    const { client } = await import("../helpers.js");
    await t.store.createClient(
      client({ clientId: "gh_dynamic", source: "dynamic", expiresAt: t.clock.now + 3_600_000 }),
    );
    await codeTokens(t, { clientId: "gh_dynamic" });
    const after = await t.store.getClient("gh_dynamic");
    expect(after?.expiresAt).toBeUndefined();
    expect(after?.lastUsedAt).toBe(t.clock.now);
  });
});
