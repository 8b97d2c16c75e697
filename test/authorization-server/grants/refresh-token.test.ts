import { describe, expect, it } from "vitest";
import { grantIdOfAccessTokenId } from "../../../src/storage/access-token-id.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  codeTokens,
  decodePayload,
  makeServer,
  OTHER_RESOURCE,
  PUBLIC_CLIENT,
  postToken,
  RESOURCE,
  REVISIONS,
  type TestServer,
} from "../helpers.js";

function refresh(t: TestServer, token: string, extra: Record<string, string> = {}) {
  return postToken(t, {
    grant_type: "refresh_token",
    refresh_token: token,
    client_id: PUBLIC_CLIENT,
    ...extra,
  });
}

describe.each(REVISIONS)("refresh_token grant (revision %s)", (revision) => {
  it("rotates the refresh token on every use (public clients MUST rotate)", async () => {
    const t = await makeServer({ revision });
    const first = await codeTokens(t);
    const r = await refresh(t, first.refresh_token as string);
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.body.refresh_token).toEqual(expect.any(String));
    expect(r.body.refresh_token).not.toBe(first.refresh_token);
    expect(r.body.scope).toBe("notes:read offline_access");
    const claims = decodePayload(r.body.access_token as string);
    expect(claims).toMatchObject({
      aud: RESOURCE,
      sub: "user-1",
      client_id: PUBLIC_CLIENT,
      scope: "notes:read",
    });
    // The new token works in turn.
    const again = await refresh(t, r.body.refresh_token as string);
    expect(again.status).toBe(200);
  });

  it("presenting a rotated token revokes the whole grant, its newest tokens included", async () => {
    const t = await makeServer({ revision });
    const first = await codeTokens(t);
    const second = await refresh(t, first.refresh_token as string);
    // The client moved on (its successor used), so the rotated token is reuse even inside the
    // refresh race window (refresh-race.test.ts).
    const third = await refresh(t, second.body.refresh_token as string);
    const reuse = await refresh(t, first.refresh_token as string);
    expect(reuse.status).toBe(400);
    expect(reuse.body.error).toBe("invalid_grant");
    const victim = await refresh(t, third.body.refresh_token as string);
    expect(victim.body.error).toBe("invalid_grant");
    const jti = decodePayload(second.body.access_token as string).jti as string;
    expect((await t.store.getGrant(grantIdOfAccessTokenId(jti)!))?.revokedAt).toBeDefined();
    expect(t.log.lines.some((l) => l.event === "refresh_token_reused")).toBe(true);
  });
});

describe("refresh token rules (SECURITY.md Refresh tokens)", () => {
  it("a refresh token works only for the client it was issued to", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const stolen = await postToken(
      t,
      { grant_type: "refresh_token", refresh_token: first.refresh_token as string },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(stolen.body.error).toBe("invalid_grant");
    // Refused without harm: the rightful client can still use it.
    expect((await refresh(t, first.refresh_token as string)).status).toBe(200);
  });

  it("a wider scope is invalid_scope and leaves the old token intact", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const wider = await refresh(t, first.refresh_token as string, { scope: "notes:read notes:write" });
    expect(wider.body.error).toBe("invalid_scope");
    const ok = await refresh(t, first.refresh_token as string);
    expect(ok.status).toBe(200);
  });

  it("a narrower scope is allowed, also through the scope hierarchy", async () => {
    const t = await makeServer();
    const first = await codeTokens(t, { scopes: ["notes:admin", "offline_access"] });
    const narrow = await refresh(t, first.refresh_token as string, { scope: "notes:read" });
    expect(narrow.status).toBe(200);
    expect(narrow.body.scope).toBe("notes:read");
    expect(decodePayload(narrow.body.access_token as string).scope).toBe("notes:read");
    // Narrowed tokens are never widened again.
    const back = await refresh(t, narrow.body.refresh_token as string, { scope: "notes:admin" });
    expect(back.body.error).toBe("invalid_scope");
  });

  it("a scope with invalid characters is invalid_scope", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const r = await refresh(t, first.refresh_token as string, { scope: 'notes:read "x"' });
    expect(r.body.error).toBe("invalid_scope");
  });

  it("another resource at refresh is an error and leaves the old token intact", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const other = await refresh(t, first.refresh_token as string, { resource: OTHER_RESOURCE });
    expect(other.body.error).toBe("invalid_target");
    const same = await refresh(t, first.refresh_token as string, { resource: RESOURCE });
    expect(same.status).toBe(200);
  });

  it("the idle lifetime ends an unused refresh token", async () => {
    const t = await makeServer({ refreshTokens: { idleTtlSeconds: 3600, absoluteTtlSeconds: 7200 } });
    const first = await codeTokens(t);
    t.clock.advance(3601);
    expect((await refresh(t, first.refresh_token as string)).body.error).toBe("invalid_grant");
  });

  it("the absolute lifetime ends the grant however often it is refreshed", async () => {
    const t = await makeServer({ refreshTokens: { idleTtlSeconds: 3600, absoluteTtlSeconds: 7200 } });
    let token = (await codeTokens(t)).refresh_token as string;
    for (let i = 0; i < 3; i++) {
      t.clock.advance(3000);
      const r = await refresh(t, token);
      if (i < 2) {
        expect(r.status).toBe(200);
        token = r.body.refresh_token as string;
      } else {
        expect(r.body.error).toBe("invalid_grant");
      }
    }
  });

  it("concurrent refreshes of one token: exactly one succeeds", async () => {
    // Strict reuse detection (no race window): refresh-race.test.ts has the default's answer.
    const t = await makeServer({ refreshTokens: { reuseGraceSeconds: 0 } });
    const first = await codeTokens(t);
    const results = await Promise.all(
      Array.from({ length: 6 }, () => refresh(t, first.refresh_token as string)),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
  });

  it("with a reuse grace window, a just-rotated token does not revoke the grant", async () => {
    const t = await makeServer({ refreshTokens: { reuseGraceSeconds: 10 } });
    const first = await codeTokens(t);
    const second = await refresh(t, first.refresh_token as string);
    t.clock.advance(2);
    await refresh(t, first.refresh_token as string);
    expect((await refresh(t, second.body.refresh_token as string)).status).toBe(200);
  });

  it("refresh_token grant is unsupported when refresh is disabled", async () => {
    const t = await makeServer({ refreshTokens: { enabled: false } });
    const r = await refresh(t, "whatever");
    expect(r.body.error).toBe("unsupported_grant_type");
  });

  it("an unknown refresh token is invalid_grant; a missing one invalid_request", async () => {
    const t = await makeServer();
    expect((await refresh(t, "unknown")).body.error).toBe("invalid_grant");
    const r = await postToken(t, { grant_type: "refresh_token", client_id: PUBLIC_CLIENT });
    expect(r.body.error).toBe("invalid_request");
  });
});

describe("client_credentials grant", () => {
  it("issues an access token without a refresh token, sub = client_id", async () => {
    const t = await makeServer();
    const r = await postToken(
      t,
      { grant_type: "client_credentials", resource: RESOURCE, scope: "notes:read" },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(r.status).toBe(200);
    expect(r.body.refresh_token).toBeUndefined();
    expect(r.body.scope).toBe("notes:read");
    expect(decodePayload(r.body.access_token as string)).toMatchObject({
      sub: CONFIDENTIAL_CLIENT,
      client_id: CONFIDENTIAL_CLIENT,
      aud: RESOURCE,
    });
  });

  it("defaults to the resource's scopes the client may use", async () => {
    const t = await makeServer();
    const { client } = await import("../helpers.js");
    const { sha256Base64url } = await import("../../../src/shared/crypto.js");
    await t.store.upsertClient(
      client({
        clientId: "limited",
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_post",
        clientSecretHash: sha256Base64url("pw"),
        scope: "notes:read other:read",
      }),
    );
    const creds = { client_id: "limited", client_secret: "pw" };
    const r = await postToken(t, { grant_type: "client_credentials", resource: RESOURCE, ...creds });
    expect(r.body.scope).toBe("notes:read");
    const wide = await postToken(t, {
      grant_type: "client_credentials",
      resource: RESOURCE,
      scope: "notes:write",
      ...creds,
    });
    expect(wide.body.error).toBe("invalid_scope");
  });

  it("requires a resource, refuses offline_access and scopes of another resource", async () => {
    const t = await makeServer();
    const auth = basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET);
    expect((await postToken(t, { grant_type: "client_credentials" }, auth)).body.error).toBe(
      "invalid_request",
    );
    for (const scope of ["offline_access", "other:read", "unknown"]) {
      const r = await postToken(t, { grant_type: "client_credentials", resource: RESOURCE, scope }, auth);
      expect(r.body.error, scope).toBe("invalid_scope");
    }
  });

  it("public clients cannot use client_credentials", async () => {
    const t = await makeServer();
    const { client } = await import("../helpers.js");
    await t.store.upsertClient(client({ clientId: "pub-cc", grantTypes: ["client_credentials"] }));
    const r = await postToken(t, {
      grant_type: "client_credentials",
      resource: RESOURCE,
      client_id: "pub-cc",
    });
    expect(r.body.error).toBe("unauthorized_client");
  });

  it("a client without the grant type is unauthorized_client", async () => {
    const t = await makeServer();
    const r = await postToken(t, {
      grant_type: "client_credentials",
      resource: RESOURCE,
      client_id: PUBLIC_CLIENT,
    });
    expect(r.body.error).toBe("unauthorized_client");
  });
});
