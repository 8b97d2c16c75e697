/**
 * What scopes a request may get (policy/scopes.ts), asked alike by /authorize and by the grants
 * without a user: which clients a registered `scope` limits (pre-registered ones: issue 23 defect 2),
 * and the scope hierarchy counting in the ceiling everywhere.
 */
import { describe, expect, it } from "vitest";
import { randomToken, sha256Base64url } from "../../../src/shared/crypto.js";
import {
  client,
  ISSUER,
  makeServer,
  pkcePair,
  postToken,
  REDIRECT,
  RESOURCE,
  type TestServer,
} from "../helpers.js";

const SECRET = "writer-secret-value-long-enough";

/** A pre-registered confidential client whose operator set `scope: "notes:write"` (implies notes:read). */
const writer = client({
  clientId: "writer",
  scope: "notes:write",
  tokenEndpointAuthMethod: "client_secret_post",
  clientSecretHash: sha256Base64url(SECRET),
  grantTypes: ["authorization_code", "client_credentials"],
});

/** GET /authorize; an accepted request goes on to the login page, a refused one back to the client. */
async function authorize(t: TestServer, clientId: string, scope: string): Promise<URL> {
  const query = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    state: "s",
    resource: RESOURCE,
    scope,
  });
  const response = await t.server.fetch(new Request(`${ISSUER}/authorize?${query}`));
  const location = response.headers.get("location");
  expect(location, `status ${response.status}`).not.toBeNull();
  return new URL(location!, ISSUER);
}

const refused = (url: URL) => url.href.startsWith(REDIRECT) && url.searchParams.get("error");

describe("the registered-scope ceiling counts the scope hierarchy at /authorize and client_credentials alike", () => {
  it("a pre-registered client with notes:write gets notes:read at both, and notes:admin at neither", async () => {
    const t = await makeServer({ clients: [writer] });
    expect(refused(await authorize(t, "writer", "notes:read"))).toBe(false);
    expect(refused(await authorize(t, "writer", "notes:admin"))).toBe("invalid_scope");

    const read = await postToken(t, {
      grant_type: "client_credentials",
      resource: RESOURCE,
      scope: "notes:read",
      client_id: "writer",
      client_secret: SECRET,
    });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.scope).toBe("notes:read");
    const admin = await postToken(t, {
      grant_type: "client_credentials",
      resource: RESOURCE,
      scope: "notes:admin",
      client_id: "writer",
      client_secret: SECRET,
    });
    expect(admin.status).toBe(400);
    expect(admin.body.error).toBe("invalid_scope");
    expect(admin.body.access_token).toBeUndefined();
  });
});

describe("a self-registered client is held to the same ceiling at /authorize and client_credentials", () => {
  it("its own registered scope limits neither; the operator's initial access token limits client_credentials", async () => {
    const token = randomToken();
    const t = await makeServer({
      dynamicRegistration: {
        initialAccessTokens: [{ sha256: sha256Base64url(token), scopes: ["notes:read", "notes:write"] }],
      },
    });
    const registered = await t.server.fetch(
      new Request(`${ISSUER}/register`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["client_credentials"],
          scope: "notes:read",
        }),
      }),
      { clientAddress: "203.0.113.9" },
    );
    expect(registered.status).toBe(201);
    const { client_id, client_secret } = (await registered.json()) as Record<string, string>;
    const ask = (scope: string) =>
      postToken(t, {
        grant_type: "client_credentials",
        resource: RESOURCE,
        scope,
        client_id: client_id!,
        client_secret: client_secret!,
      });
    // As at /authorize (reauthorization.test.ts: a dynamic client's registered scope is no ceiling).
    const write = await ask("notes:write");
    expect(write.status, JSON.stringify(write.body)).toBe(200);
    expect(write.body.scope).toBe("notes:write");
    // The operator's allowance still bounds it.
    const admin = await ask("notes:admin");
    expect(admin.status).toBe(400);
    expect(admin.body.error).toBe("invalid_scope");
  });
});
