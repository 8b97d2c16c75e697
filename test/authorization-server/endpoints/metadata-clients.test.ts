/**
 * What the authorization server metadata (RFC 8414 §2) tells the clients people run:
 *
 * - Claude picks Client ID Metadata Documents only when the metadata has
 *   `client_id_metadata_document_supported: true` AND `none` in
 *   `token_endpoint_auth_methods_supported`: both pinned here;
 * - clients of enterprise-managed authorization use the JWT bearer grant with identity assertions
 *   only when they see `authorization_grant_profiles_supported` naming the ID-JAG profile: present
 *   exactly when the server accepts ID-JAG.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ID_JAG_GRANT_PROFILE } from "../../../src/authorization-server/endpoints/metadata.js";
import { type FlowServer, startFlowServer } from "../support/flow-server.js";

let server: FlowServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function metadata(extra: Parameters<typeof startFlowServer>[0] = {}): Promise<Record<string, unknown>> {
  server = await startFlowServer(extra);
  const response = await fetch(`${server.issuer}/.well-known/oauth-authorization-server`);
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ENTERPRISE = {
  identityProviders: [
    { issuer: "https://idp.example.test", jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y" }] } },
  ],
};

describe("what Claude needs to pick Client ID Metadata Documents", () => {
  it("client_id_metadata_document_supported is true and none is a token endpoint auth method, by default", async () => {
    const m = await metadata();
    expect(m.client_id_metadata_document_supported).toBe(true);
    expect(m.token_endpoint_auth_methods_supported).toContain("none");
    // Documents with keys (ChatGPT) authenticate with private_key_jwt; its algorithms are listed.
    expect(m.token_endpoint_auth_methods_supported).toContain("private_key_jwt");
    expect(m.token_endpoint_auth_signing_alg_values_supported).toContain("RS256");
  });

  it("with documents turned off, the field is absent (not false, not a lie)", async () => {
    const m = await metadata({ extra: { clientMetadataDocuments: { enabled: false } } });
    expect(m.client_id_metadata_document_supported).toBeUndefined();
  });
});

describe("authorization_grant_profiles_supported (enterprise-managed authorization)", () => {
  it("names the ID-JAG profile when the server accepts identity assertions", async () => {
    expect(ID_JAG_GRANT_PROFILE).toBe("urn:ietf:params:oauth:grant-profile:id-jag");
    const m = await metadata({ extra: { enterpriseAuthorization: ENTERPRISE } });
    expect(m.authorization_grant_profiles_supported).toEqual([ID_JAG_GRANT_PROFILE]);
    expect(m.grant_types_supported).toContain(JWT_BEARER);
  });

  it("is absent when it does not, also when jwt-bearer is on for workload identity only", async () => {
    expect((await metadata()).authorization_grant_profiles_supported).toBeUndefined();
    await server?.close();
    const m = await metadata({
      extra: {
        workloadIdentity: {
          issuers: [
            {
              issuer: "https://ci.example.test",
              jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y" }] },
              subjects: [{ subject: "repo:x", clientId: "ci" }],
            },
          ],
        },
      },
    });
    expect(m.grant_types_supported).toContain(JWT_BEARER);
    expect(m.authorization_grant_profiles_supported).toBeUndefined();
  });
});
