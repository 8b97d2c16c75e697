import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  client,
  ISSUER,
  makeServer,
  postToken,
  RESOURCE,
  RS_CLIENT,
  RS_SECRET,
  type TestServer,
} from "../helpers.js";

const CC = { grant_type: "client_credentials", resource: RESOURCE };

describe("client_secret_basic (RFC 6749 §2.3.1)", () => {
  it("authenticates with the right secret", async () => {
    const t = await makeServer();
    expect((await postToken(t, CC, basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET))).status).toBe(200);
  });

  it("form-decodes id and secret inside Basic (special characters)", async () => {
    const t = await makeServer();
    const secret = "p@ss:w+rd %/é";
    await t.store.upsertClient(
      client({
        clientId: "id with:colon",
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(secret),
      }),
    );
    expect((await postToken(t, CC, basic("id with:colon", secret))).status).toBe(200);
  });

  it("a wrong secret is invalid_client 401 with a Basic challenge", async () => {
    const t = await makeServer();
    const r = await postToken(t, CC, basic(CONFIDENTIAL_CLIENT, "wrong"));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
    expect(r.headers.get("www-authenticate")).toBe(`Basic realm="${ISSUER}"`);
    expect(r.headers.get("cache-control")).toBe("no-store");
  });

  it.each([
    ["no credentials", "Basic"],
    ["not base64", "Basic !!!!"],
    ["no colon", `Basic ${Buffer.from("justid").toString("base64")}`],
    ["empty id", `Basic ${Buffer.from(":secret").toString("base64")}`],
    ["empty secret", `Basic ${Buffer.from("id:").toString("base64")}`],
    ["bad percent-encoding", `Basic ${Buffer.from("id%zz:secret").toString("base64")}`],
    ["trailing junk", `Basic ${Buffer.from("a:b").toString("base64")} junk`],
  ])("malformed Basic (%s) is invalid_client 401 with WWW-Authenticate, never a 500", async (_n, header) => {
    const t = await makeServer();
    const r = await postToken(t, CC, { authorization: header });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
    expect(r.headers.get("www-authenticate")).toMatch(/^Basic realm=/);
  });

  it("an unknown client is invalid_client", async () => {
    const t = await makeServer();
    const r = await postToken(t, CC, basic("nobody", "x"));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
  });

  it("an expired secret is invalid_client", async () => {
    const t = await makeServer();
    await t.store.upsertClient(
      client({
        clientId: "expiring",
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url("pw"),
        clientSecretExpiresAt: Math.floor(t.clock.now / 1000) + 10,
      }),
    );
    expect((await postToken(t, CC, basic("expiring", "pw"))).status).toBe(200);
    t.clock.advance(11);
    const r = await postToken(t, CC, basic("expiring", "pw"));
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
  });

  it("an expired (never used) registration is invalid_client", async () => {
    const t = await makeServer();
    await t.store.upsertClient(
      client({
        clientId: "gh_stale",
        source: "dynamic",
        grantTypes: ["client_credentials"],
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url("pw"),
        expiresAt: t.clock.now + 1000,
      }),
    );
    t.clock.advance(2);
    expect((await postToken(t, CC, basic("gh_stale", "pw"))).body.error).toBe("invalid_client");
  });

  it("client_id in the body must agree with the Basic header", async () => {
    const t = await makeServer();
    const r = await postToken(
      t,
      { ...CC, client_id: "someone-else" },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(r.body.error).toBe("invalid_request");
  });
});

describe("client_secret_post, method binding and several methods", () => {
  it("authenticates with client_secret in the body", async () => {
    const t = await makeServer();
    expect((await postToken(t, { ...CC, client_id: RS_CLIENT, client_secret: RS_SECRET })).status).toBe(200);
  });

  it("two methods at once are invalid_request (RFC 6749 §2.3)", async () => {
    const t = await makeServer();
    const r = await postToken(
      t,
      { ...CC, client_id: CONFIDENTIAL_CLIENT, client_secret: CONFIDENTIAL_SECRET },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_request");
  });

  it("the method must be the registered one (post for a basic client is refused, and vice versa)", async () => {
    const t = await makeServer();
    const post = await postToken(t, {
      ...CC,
      client_id: CONFIDENTIAL_CLIENT,
      client_secret: CONFIDENTIAL_SECRET,
    });
    expect(post.status).toBe(401);
    const viaBasic = await postToken(t, CC, basic(RS_CLIENT, RS_SECRET));
    expect(viaBasic.status).toBe(401);
    expect(viaBasic.body.error).toBe("invalid_client");
  });

  it("a confidential client cannot fall back to none", async () => {
    const t = await makeServer();
    const r = await postToken(t, { ...CC, client_id: CONFIDENTIAL_CLIENT });
    expect(r.status).toBe(401);
  });

  it("no client identification at all is invalid_client", async () => {
    const t = await makeServer();
    const r = await postToken(t, CC);
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
  });

  it("a wrong secret leaks nothing into logs", async () => {
    const t = await makeServer();
    await postToken(t, { ...CC, client_id: RS_CLIENT, client_secret: "guess-123" });
    expect(JSON.stringify(t.log.lines)).not.toContain("guess-123");
  });
});

async function jwtClient(t: TestServer) {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" };
  await t.store.upsertClient(
    client({
      clientId: "jwt-client",
      grantTypes: ["client_credentials"],
      tokenEndpointAuthMethod: "private_key_jwt",
      jwks: { keys: [jwk] },
    }),
  );
  const assertion = (claims: Record<string, unknown> = {}, lifetime = 60) => {
    const now = Math.floor(t.clock.now / 1000);
    return new SignJWT({ jti: randomToken(), ...claims })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setIssuer((claims.iss as string) ?? "jwt-client")
      .setSubject((claims.sub as string) ?? "jwt-client")
      .setAudience((claims.aud as string) ?? `${ISSUER}/token`)
      .setIssuedAt(now)
      .setExpirationTime(now + lifetime)
      .sign(privateKey);
  };
  return { assertion };
}

const TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

describe("private_key_jwt (RFC 7523)", () => {
  it("accepts a signed assertion with aud = token endpoint or issuer", async () => {
    const t = await makeServer();
    const { assertion } = await jwtClient(t);
    for (const aud of [`${ISSUER}/token`, ISSUER]) {
      const r = await postToken(t, {
        ...CC,
        client_assertion_type: TYPE,
        client_assertion: await assertion({ aud }),
      });
      expect(r.status, aud).toBe(200);
    }
  });

  it("a replayed assertion (same jti) is invalid_client", async () => {
    const t = await makeServer();
    const { assertion } = await jwtClient(t);
    const a = await assertion();
    expect((await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: a })).status).toBe(
      200,
    );
    const again = await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: a });
    expect(again.status).toBe(401);
    expect(again.body.error).toBe("invalid_client");
  });

  it.each([
    ["wrong audience", { aud: "https://elsewhere.example/token" }, 60],
    ["iss differing from sub", { iss: "someone" }, 60],
    ["a lifetime that is too long", {}, 3600],
  ])("refuses an assertion with %s", async (_n, claims, lifetime) => {
    const t = await makeServer();
    const { assertion } = await jwtClient(t);
    const r = await postToken(t, {
      ...CC,
      client_assertion_type: TYPE,
      client_assertion: await assertion(claims, lifetime),
    });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe("invalid_client");
  });

  it("refuses an expired assertion, a foreign key and a wrong assertion type", async () => {
    const t = await makeServer();
    const { assertion } = await jwtClient(t);
    const a = await assertion();
    t.clock.advance(200);
    expect((await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: a })).status).toBe(
      401,
    );
    const other = await jwtClient(await makeServer());
    const foreign = await other.assertion();
    expect(
      (await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: foreign })).status,
    ).toBe(401);
    const typed = await postToken(t, {
      ...CC,
      client_assertion_type: "urn:other",
      client_assertion: await assertion(),
    });
    expect(typed.status).toBe(401);
    const garbage = await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: "not.a.jwt" });
    expect(garbage.status).toBe(401);
  });

  it("an assertion for a secret-based client is refused (method binding)", async () => {
    const t = await makeServer();
    const { assertion } = await jwtClient(t);
    const a = await assertion({ iss: CONFIDENTIAL_CLIENT, sub: CONFIDENTIAL_CLIENT });
    const r = await postToken(t, { ...CC, client_assertion_type: TYPE, client_assertion: a });
    expect(r.status).toBe(401);
  });
});
