/**
 * Which served resource a `resource` value names (policy/resources.ts, issue 23 defect 3): one rule
 * at /authorize and at the token endpoint. The spec's "Canonical server URI": scheme and host are
 * case-insensitive and SHOULD be accepted in uppercase; the path (and a trailing slash on it), the
 * query and the rest are compared exactly (RFC 8707 §2: the value identifies the resource; another
 * path may be another resource).
 */
import { describe, expect, it } from "vitest";
import {
  codeRequest,
  ISSUER,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  pkcePair,
  postToken,
  REDIRECT,
  RESOURCE,
  type TestServer,
} from "../helpers.js";

/** GET /authorize for the public client; where it sends the browser (the client, or on to login). */
async function authorize(t: TestServer, resource: string): Promise<URL> {
  const query = new URLSearchParams({
    response_type: "code",
    client_id: PUBLIC_CLIENT,
    redirect_uri: REDIRECT,
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    state: "s",
    resource,
    scope: "notes:read",
  });
  const response = await t.server.fetch(new Request(`${ISSUER}/authorize?${query}`));
  const location = response.headers.get("location");
  expect(location, `status ${response.status}`).not.toBeNull();
  return new URL(location!, ISSUER);
}

const errorAt = (url: URL) => (url.href.startsWith(REDIRECT) ? url.searchParams.get("error") : null);

async function atToken(t: TestServer, resource: string) {
  const { code, verifier } = await issueCode(t);
  return postToken(t, codeRequest(code, verifier, { resource }));
}

const UPPER = "HTTPS://RS.EXAMPLE.TEST/mcp";

describe("one rule for `resource` at /authorize and /token", () => {
  it("uppercase scheme and host name the served resource at both (spec: SHOULD accept)", async () => {
    const t = await makeServer();
    expect(errorAt(await authorize(t, UPPER))).toBeNull();
    const r = await atToken(t, UPPER);
    expect(r.status).toBe(200);
  });

  it.each([
    ["a trailing slash", `${RESOURCE}/`],
    ["an uppercase path", RESOURCE.toUpperCase()],
    ["a fragment", `${RESOURCE}#x`],
    ["an empty query", `${RESOURCE}?`],
  ])("hostile: %s is invalid_target at both, and the code is not spent", async (_name, resource) => {
    const t = await makeServer();
    expect(errorAt(await authorize(t, resource))).toBe("invalid_target");
    const { code, verifier } = await issueCode(t);
    const r = await postToken(t, codeRequest(code, verifier, { resource }));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_target");
    expect(r.body.access_token).toBeUndefined();
    // Bad input loses nothing: the code is still redeemable with the right resource.
    const good = await postToken(t, codeRequest(code, verifier));
    expect(good.status).toBe(200);
  });
});
