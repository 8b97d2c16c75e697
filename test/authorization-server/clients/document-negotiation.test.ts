/**
 * What the server keeps of a Client ID Metadata Document as vendors publish them: grant and
 * response types are negotiated (unknown or unsupported values dropped, the code flow required, a
 * grant the chosen authentication cannot use not granted), one token endpoint authentication method
 * is chosen from `token_endpoint_auth_methods_supported` (absent: the single field), lists are
 * bounded, keys are public and asymmetric. The documents below carry the vendors' published values
 * with the hosts moved to an example domain.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  publicJwkProblem,
  validateClientMetadataDocument,
} from "../../../src/authorization-server/clients/metadata-document.js";
import { OAuthError } from "../../../src/shared/errors.js";

const URL_ID = "https://vendor.example/oauth/client-metadata.json";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const DEVICE = "urn:ietf:params:oauth:grant-type:device_code";
const RSA_PUBLIC = { kty: "RSA", n: "sXch", e: "AQAB", kid: "k1", alg: "RS256", use: "sig" };

function doc(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: URL_ID,
    client_name: "Vendor",
    redirect_uris: ["https://vendor.example/callback"],
    ...overrides,
  };
}

function refusal(json: unknown): OAuthError {
  try {
    validateClientMetadataDocument(URL_ID, json);
  } catch (e) {
    expect(e).toBeInstanceOf(OAuthError);
    return e as OAuthError;
  }
  throw new Error("expected the document to be refused");
}

describe("grant and response types are negotiated, not fatal", () => {
  it("claude.ai's connector: jwt-bearer with none is dropped, the code flow and refresh kept", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        grant_types: ["authorization_code", "refresh_token", JWT_BEARER],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      }),
    );
    expect(record.tokenEndpointAuthMethod).toBe("none");
    expect(record.grantTypes).toEqual(["authorization_code", "refresh_token"]);
    expect(record.metadata.grant_types).toEqual(["authorization_code", "refresh_token"]);
  });

  it("a document that can authenticate with a key keeps jwt-bearer", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        grant_types: ["authorization_code", JWT_BEARER, "refresh_token"],
        token_endpoint_auth_method: "private_key_jwt",
        jwks_uri: "https://vendor.example/jwks.json",
      }),
    );
    expect(record.grantTypes).toEqual(["authorization_code", JWT_BEARER, "refresh_token"]);
  });

  it("unknown and unsupported grants are dropped, duplicates once, the device grant kept", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        grant_types: [
          "authorization_code",
          "implicit",
          "password",
          "client_credentials",
          "urn:ietf:params:oauth:grant-type:token-exchange",
          "urn:example:a-grant-from-the-future",
          DEVICE,
          "authorization_code",
        ],
        response_types: ["code", "token", "id_token", "code id_token"],
      }),
    );
    expect(record.grantTypes).toEqual(["authorization_code", DEVICE]);
    expect(record.responseTypes).toEqual(["code"]);
  });

  it("the code flow must be there: authorization_code when grant_types is present, code in response_types", () => {
    for (const bad of [
      doc({ grant_types: ["refresh_token", JWT_BEARER] }),
      doc({ grant_types: ["client_credentials"] }),
      doc({ grant_types: [] }),
      doc({ response_types: ["token", "id_token"] }),
      doc({ response_types: [] }),
      doc({ grant_types: "authorization_code" }),
      doc({ grant_types: ["authorization_code", 7] }),
    ]) {
      expect(refusal(bad).code).toBe("invalid_client");
    }
  });

  it("hostile: lists stay bounded (10,000 grant types, 21 response types, overlong entries are refused)", () => {
    const many = (n: number) => [
      "authorization_code",
      ...Array.from({ length: n - 1 }, (_, i) => `urn:x:${i}`),
    ];
    expect(refusal(doc({ grant_types: many(10_000) })).description).toMatch(
      /^client metadata document: grant_types/,
    );
    expect(refusal(doc({ grant_types: many(21) })).code).toBe("invalid_client");
    expect(validateClientMetadataDocument(URL_ID, doc({ grant_types: many(20) })).grantTypes).toEqual([
      "authorization_code",
    ]);
    expect(refusal(doc({ response_types: Array.from({ length: 21 }, () => "code") })).code).toBe(
      "invalid_client",
    );
    expect(refusal(doc({ grant_types: ["authorization_code", "x".repeat(201)] })).code).toBe(
      "invalid_client",
    );
    expect(
      refusal(doc({ token_endpoint_auth_methods_supported: Array.from({ length: 10_000 }, () => "none") }))
        .code,
    ).toBe("invalid_client");
  });
});

describe("property: whatever a document lists, the stored client holds only what it can use", () => {
  it("grant types ⊆ {code, refresh, device} plus jwt-bearer only with private_key_jwt; response types are [code]", () => {
    const grant = fc.oneof(
      fc.constantFrom(
        "authorization_code",
        "refresh_token",
        DEVICE,
        JWT_BEARER,
        "client_credentials",
        "implicit",
        "password",
        "urn:ietf:params:oauth:grant-type:token-exchange",
      ),
      fc.string({ minLength: 1, maxLength: 40 }),
    );
    const method = fc.constantFrom(
      "none",
      "private_key_jwt",
      "tls_client_auth",
      "self_signed_tls_client_auth",
    );
    fc.assert(
      fc.property(
        fc.array(grant, { maxLength: 19 }),
        fc.option(fc.array(method, { minLength: 1, maxLength: 4 }), { nil: undefined }),
        fc.boolean(),
        (grants, methods, keyed) => {
          const json = doc({
            grant_types: ["authorization_code", ...grants],
            response_types: ["code", "token"],
            ...(methods ? { token_endpoint_auth_methods_supported: methods } : {}),
            ...(keyed ? { jwks_uri: "https://vendor.example/jwks.json" } : {}),
          });
          let record: ReturnType<typeof validateClientMetadataDocument>;
          try {
            record = validateClientMetadataDocument(URL_ID, json);
          } catch (e) {
            // Refused only when no method both sides support is offered.
            expect(e).toBeInstanceOf(OAuthError);
            expect(methods?.includes("none")).not.toBe(true);
            return;
          }
          const allowed = new Set(["authorization_code", "refresh_token", DEVICE]);
          if (record.tokenEndpointAuthMethod === "private_key_jwt") allowed.add(JWT_BEARER);
          expect(record.grantTypes.every((g) => allowed.has(g))).toBe(true);
          expect(record.grantTypes[0]).toBe("authorization_code");
          expect(new Set(record.grantTypes).size).toBe(record.grantTypes.length);
          expect(record.responseTypes).toEqual(["code"]);
          // private_key_jwt only with keys, and then whenever it was offered.
          const offered = methods ?? ["none"];
          expect(record.tokenEndpointAuthMethod === "private_key_jwt").toBe(
            keyed && offered.includes("private_key_jwt"),
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("one token endpoint authentication method, chosen from what the document offers", () => {
  it("ChatGPT: private_key_jwt with RS256 keys at jwks_uri, none also offered → private_key_jwt", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "private_key_jwt",
        token_endpoint_auth_methods_supported: ["none", "private_key_jwt"],
        token_endpoint_auth_signing_alg: "RS256",
        jwks_uri: "https://vendor.example/.well-known/jwks.json",
      }),
    );
    expect(record.tokenEndpointAuthMethod).toBe("private_key_jwt");
    expect(record.jwksUri).toBe("https://vendor.example/.well-known/jwks.json");
    expect(record.metadata.token_endpoint_auth_signing_alg).toBe("RS256");
    expect(record.metadata.token_endpoint_auth_method).toBe("private_key_jwt");
  });

  it("the list is the field to read; absent, the single field (absent: none)", () => {
    const method = (o: Record<string, unknown>) =>
      validateClientMetadataDocument(URL_ID, doc(o)).tokenEndpointAuthMethod;
    expect(method({})).toBe("none");
    expect(method({ token_endpoint_auth_methods_supported: ["private_key_jwt", "none"] })).toBe("none");
    expect(method({ token_endpoint_auth_methods_supported: ["tls_client_auth", "none"] })).toBe("none");
    // Shared-secret entries in the list are never chosen (the document holds no secret).
    expect(method({ token_endpoint_auth_methods_supported: ["client_secret_basic", "none"] })).toBe("none");
    expect(
      method({
        token_endpoint_auth_method: "private_key_jwt",
        token_endpoint_auth_methods_supported: ["none"],
        jwks_uri: "https://vendor.example/jwks.json",
      }),
    ).toBe("none");
    expect(
      method({
        token_endpoint_auth_methods_supported: ["none", "private_key_jwt"],
        jwks: { keys: [RSA_PUBLIC] },
      }),
    ).toBe("private_key_jwt");
  });

  it("an algorithm this server does not accept makes private_key_jwt unusable, not the document", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        token_endpoint_auth_methods_supported: ["private_key_jwt", "none"],
        token_endpoint_auth_signing_alg: "HS256",
        jwks_uri: "https://vendor.example/jwks.json",
      }),
    );
    expect(record.tokenEndpointAuthMethod).toBe("none");
    expect(record.metadata.token_endpoint_auth_signing_alg).toBeUndefined();
    expect(
      refusal(
        doc({
          token_endpoint_auth_method: "private_key_jwt",
          token_endpoint_auth_signing_alg: "HS256",
          jwks_uri: "https://vendor.example/jwks.json",
        }),
      ).description,
    ).toBe("client metadata document: token_endpoint_auth_signing_alg is not one this server accepts");
  });

  it("no method both sides support is refused; the single field may not name a shared secret", () => {
    expect(refusal(doc({ token_endpoint_auth_methods_supported: ["tls_client_auth"] })).description).toBe(
      "client metadata document: token_endpoint_auth_method must be none or private_key_jwt",
    );
    expect(refusal(doc({ token_endpoint_auth_methods_supported: ["private_key_jwt"] })).description).toBe(
      "client metadata document: private_key_jwt needs jwks or jwks_uri",
    );
    expect(
      refusal(
        doc({
          token_endpoint_auth_method: "client_secret_post",
          token_endpoint_auth_methods_supported: ["none", "client_secret_post"],
        }),
      ).description,
    ).toContain("no shared secrets");
  });
});

describe("keys a document names are public and asymmetric", () => {
  it("hostile: inline jwks with a symmetric key, or a private member of any key type, is refused", () => {
    for (const key of [
      { kty: "oct", k: "c2VjcmV0" },
      { ...RSA_PUBLIC, d: "x" },
      { ...RSA_PUBLIC, p: "x" },
      { ...RSA_PUBLIC, qi: "x" },
      { kty: "EC", crv: "P-256", x: "x", y: "y", d: "x" },
      { kty: "OKP", crv: "Ed25519", x: "x", d: "x" },
      { kty: "unknown" },
      { n: "x", e: "AQAB" },
    ]) {
      const e = refusal(
        doc({ token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [RSA_PUBLIC, key] } }),
      );
      expect(e.code, JSON.stringify(key)).toBe("invalid_client");
      expect(e.description).toMatch(/^client metadata document: jwks\.keys\.1: /);
    }
    expect(publicJwkProblem({ kty: "oct", k: "c2VjcmV0" })).toBe("symmetric keys (kty oct) are not accepted");
    expect(publicJwkProblem(RSA_PUBLIC)).toBeUndefined();
  });
});
