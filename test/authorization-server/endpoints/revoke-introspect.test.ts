import { describe, expect, it } from "vitest";
import { grantIdOfAccessTokenId } from "../../../src/storage/access-token-id.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  codeTokens,
  decodePayload,
  formRequest,
  ISSUER,
  makeServer,
  PUBLIC_CLIENT,
  postToken,
  RESOURCE,
  RS_CLIENT,
  RS_SECRET,
  type TestServer,
} from "../helpers.js";

async function revoke(t: TestServer, params: Record<string, string>, headers: Record<string, string> = {}) {
  const r = await t.server.fetch(formRequest("/revoke", params, headers));
  return { status: r.status, headers: r.headers, text: await r.text() };
}

async function introspect(
  t: TestServer,
  token: string,
  extra: Record<string, string> = {},
  auth = { client_id: RS_CLIENT, client_secret: RS_SECRET },
) {
  const r = await t.server.fetch(formRequest("/introspect", { token, ...auth, ...extra }));
  return { status: r.status, headers: r.headers, body: (await r.json()) as Record<string, unknown> };
}

describe("revocation, RFC 7009", () => {
  it("revoking a refresh token ends the grant: the refresh token and its access tokens", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const r = await revoke(t, { token: tokens.refresh_token as string, client_id: PUBLIC_CLIENT });
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.body.error).toBe("invalid_grant");
    expect((await introspect(t, tokens.access_token as string)).body).toEqual({ active: false });
  });

  it("revoking an access token ends only that token", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const r = await revoke(t, {
      token: tokens.access_token as string,
      token_type_hint: "access_token",
      client_id: PUBLIC_CLIENT,
    });
    expect(r.status).toBe(200);
    const jti = decodePayload(tokens.access_token as string).jti as string;
    expect((await t.store.getAccessToken(jti))?.revokedAt).toBeDefined();
    expect((await introspect(t, tokens.access_token as string)).body.active).toBe(false);
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.status).toBe(200);
  });

  it("a wrong hint is only a hint", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    await revoke(t, {
      token: tokens.refresh_token as string,
      token_type_hint: "access_token",
      client_id: PUBLIC_CLIENT,
    });
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.body.error).toBe("invalid_grant");
  });

  it("an unknown token is 200; a token of another client is left alone (still 200)", async () => {
    const t = await makeServer();
    expect((await revoke(t, { token: "unknown", client_id: PUBLIC_CLIENT })).status).toBe(200);
    const tokens = await codeTokens(t);
    const other = await revoke(
      t,
      { token: tokens.refresh_token as string },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(other.status).toBe(200);
    const otherAt = await revoke(
      t,
      { token: tokens.access_token as string },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(otherAt.status).toBe(200);
    expect((await introspect(t, tokens.access_token as string)).body.active).toBe(true);
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.status).toBe(200);
  });

  it("requires client authentication and the token parameter", async () => {
    const t = await makeServer();
    const noClient = await t.server.fetch(formRequest("/revoke", { token: "x" }));
    expect(noClient.status).toBe(401);
    const wrong = await revoke(t, { token: "x" }, basic(CONFIDENTIAL_CLIENT, "wrong"));
    expect(wrong.status).toBe(401);
    const missing = await t.server.fetch(formRequest("/revoke", { client_id: PUBLIC_CLIENT }));
    expect(missing.status).toBe(400);
    expect((await missing.json()).error).toBe("invalid_request");
  });
});

describe("introspection, RFC 7662", () => {
  it("describes an active access token", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const r = await introspect(t, tokens.access_token as string);
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.body).toMatchObject({
      active: true,
      scope: "notes:read",
      client_id: PUBLIC_CLIENT,
      sub: "user-1",
      aud: RESOURCE,
      iss: ISSUER,
      token_type: "Bearer",
    });
    expect((r.body.exp as number) - (r.body.iat as number)).toBe(300);
  });

  it("describes an active refresh token, and inactive once rotated", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const r = await introspect(t, tokens.refresh_token as string, { token_type_hint: "refresh_token" });
    expect(r.body).toMatchObject({ active: true, client_id: PUBLIC_CLIENT, token_type: "refresh_token" });
    await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token as string,
      client_id: PUBLIC_CLIENT,
    });
    expect((await introspect(t, tokens.refresh_token as string)).body).toEqual({ active: false });
  });

  it("expired, unknown, foreign and malformed tokens are inactive", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    expect((await introspect(t, "nope")).body).toEqual({ active: false });
    expect((await introspect(t, "a.b.c")).body).toEqual({ active: false });
    const other = await makeServer();
    const foreign = await codeTokens(other);
    expect((await introspect(t, foreign.access_token as string)).body).toEqual({ active: false });
    t.clock.advance(301);
    expect((await introspect(t, tokens.access_token as string)).body).toEqual({ active: false });
  });

  it("a revoked grant makes its access tokens inactive", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const jti = decodePayload(tokens.access_token as string).jti as string;
    // The jti names its grant (storage/access-token-id.ts); no row is written per access token.
    await t.store.revokeGrant(grantIdOfAccessTokenId(jti)!, t.clock.now);
    expect((await introspect(t, tokens.access_token as string)).body).toEqual({ active: false });
  });

  it("requires a configured confidential client: public, self-registered and unauthenticated callers are refused", async () => {
    const t = await makeServer();
    const tokens = await codeTokens(t);
    const anon = await t.server.fetch(formRequest("/introspect", { token: tokens.access_token as string }));
    expect(anon.status).toBe(401);
    const pub = await introspect(t, tokens.access_token as string, {}, { client_id: PUBLIC_CLIENT } as never);
    expect(pub.status).toBe(401);
    expect(pub.body.error).toBe("invalid_client");
    const { client } = await import("../helpers.js");
    const { sha256Base64url } = await import("../../../src/shared/crypto.js");
    await t.store.upsertClient(
      client({
        clientId: "gh_dyn",
        source: "dynamic",
        tokenEndpointAuthMethod: "client_secret_post",
        clientSecretHash: sha256Base64url("pw"),
      }),
    );
    const dyn = await introspect(
      t,
      tokens.access_token as string,
      {},
      { client_id: "gh_dyn", client_secret: "pw" },
    );
    expect(dyn.status).toBe(401);
    const wrong = await introspect(
      t,
      tokens.access_token as string,
      {},
      { client_id: RS_CLIENT, client_secret: "bad" },
    );
    expect(wrong.status).toBe(401);
  });
});
