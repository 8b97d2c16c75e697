import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  clientIdUrlProblem,
  validateClientMetadataDocument,
} from "../../../src/authorization-server/clients/metadata-document.js";
import { cacheLifetimeSeconds, hostAllowed } from "../../../src/authorization-server/clients/resolver.js";
import { isUrlClientId } from "../../../src/authorization-server/core/client-id.js";
import { OAuthError } from "../../../src/shared/errors.js";

const URL_ID = "https://client.example.com/oauth/client.json";

function doc(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: URL_ID,
    client_name: "Example Client",
    redirect_uris: ["http://127.0.0.1:3000/callback", "https://client.example.com/cb"],
    ...overrides,
  };
}

function refusal(url: string, json: unknown): OAuthError {
  try {
    validateClientMetadataDocument(url, json);
  } catch (e) {
    expect(e).toBeInstanceOf(OAuthError);
    return e as OAuthError;
  }
  throw new Error("expected the document to be refused");
}

describe("validateClientMetadataDocument", () => {
  it("accepts a minimal document and fills the code-flow defaults", () => {
    const record = validateClientMetadataDocument(URL_ID, doc(), 1000);
    expect(record).toMatchObject({
      clientId: URL_ID,
      source: "metadata-document",
      clientName: "Example Client",
      redirectUris: ["http://127.0.0.1:3000/callback", "https://client.example.com/cb"],
      grantTypes: ["authorization_code"],
      responseTypes: ["code"],
      tokenEndpointAuthMethod: "none",
      createdAt: 1000,
    });
    expect(record.clientSecretHash).toBeUndefined();
  });

  it("keeps the optional fields it knows and drops the rest", () => {
    const record = validateClientMetadataDocument(
      URL_ID,
      doc({
        client_uri: "https://client.example.com/",
        logo_uri: "https://cdn.example.com/logo.png",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        scope: "read write",
        software_id: "ignored",
      }),
    );
    expect(record.grantTypes).toEqual(["authorization_code", "refresh_token"]);
    expect(record.logoUri).toBe("https://cdn.example.com/logo.png");
    expect(record.scope).toBe("read write");
    expect(record.metadata.software_id).toBeUndefined();
  });

  it("copies dpop_bound_access_tokens (RFC 9449 §5.2) and refuses a non-boolean", () => {
    expect(
      validateClientMetadataDocument(URL_ID, doc({ dpop_bound_access_tokens: true })).metadata
        .dpop_bound_access_tokens,
    ).toBe(true);
    expect(
      validateClientMetadataDocument(URL_ID, doc({ dpop_bound_access_tokens: false })).metadata
        .dpop_bound_access_tokens,
    ).toBe(false);
    expect(validateClientMetadataDocument(URL_ID, doc()).metadata).not.toHaveProperty(
      "dpop_bound_access_tokens",
    );
    for (const value of ["true", 1, null, {}, [true]]) {
      const e = refusal(URL_ID, doc({ dpop_bound_access_tokens: value }));
      expect(e.code, JSON.stringify(value)).toBe("invalid_client");
      expect(e.description).toMatch(/^client metadata document: dpop_bound_access_tokens: /);
    }
  });

  it("rule: client_id must equal the document URL as a plain string", () => {
    for (const other of [
      `${URL_ID}/`,
      URL_ID.replace("client.example.com", "Client.Example.com"),
      URL_ID.toUpperCase(),
      "https://client.example.com/oauth/other.json",
      "https://client.example.com:443/oauth/client.json",
      "https://client.example.com/oauth/./client.json",
      ` ${URL_ID}`,
    ]) {
      const e = refusal(URL_ID, doc({ client_id: other }));
      expect(e.code, other).toBe("invalid_client");
      expect(e.description).toBe("client metadata document: client_id does not equal the document URL");
    }
    expect(refusal(URL_ID, doc({ client_id: undefined })).code).toBe("invalid_client");
    expect(refusal(URL_ID, doc({ client_id: 42 })).code).toBe("invalid_client");
  });

  it("rule: client_name and a non-empty redirect_uris are required", () => {
    for (const bad of [
      doc({ client_name: undefined }),
      doc({ client_name: "" }),
      doc({ client_name: "   " }),
      doc({ client_name: "x".repeat(201) }),
      doc({ client_name: "Evil\u202Egnp.exe" }),
      doc({ client_name: "line\nbreak" }),
      doc({ redirect_uris: undefined }),
      doc({ redirect_uris: [] }),
      doc({ redirect_uris: "https://client.example.com/cb" }),
      doc({ redirect_uris: Array.from({ length: 21 }, (_, i) => `https://client.example.com/cb${i}`) }),
    ]) {
      expect(refusal(URL_ID, bad).code).toBe("invalid_client");
    }
    for (const notObject of [null, [], "text", 42]) {
      expect(refusal(URL_ID, notObject).description).toBe(
        "client metadata document: document must be a JSON object",
      );
    }
  });

  it("rule: no shared-secret authentication methods and no client secret", () => {
    for (const method of ["client_secret_basic", "client_secret_post", "client_secret_jwt"]) {
      const e = refusal(URL_ID, doc({ token_endpoint_auth_method: method }));
      expect(e.code).toBe("invalid_client");
      expect(e.description).toContain("no shared secrets");
    }
    expect(refusal(URL_ID, doc({ token_endpoint_auth_method: "tls_client_auth" })).code).toBe(
      "invalid_client",
    );
    expect(refusal(URL_ID, doc({ client_secret: "s3cret-value" })).description).toBe(
      "client metadata document: document must not contain client_secret",
    );
  });

  it("private_key_jwt needs exactly one of jwks / jwks_uri, with public keys and an https URI", () => {
    const key = { kty: "EC", crv: "P-256", x: "x", y: "y" };
    expect(
      validateClientMetadataDocument(
        URL_ID,
        doc({ token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [key] } }),
      ).tokenEndpointAuthMethod,
    ).toBe("private_key_jwt");
    expect(
      validateClientMetadataDocument(
        URL_ID,
        doc({
          token_endpoint_auth_method: "private_key_jwt",
          jwks_uri: "https://client.example.com/jwks.json",
        }),
      ).jwksUri,
    ).toBe("https://client.example.com/jwks.json");
    for (const bad of [
      doc({ token_endpoint_auth_method: "private_key_jwt" }),
      doc({
        token_endpoint_auth_method: "private_key_jwt",
        jwks: { keys: [key] },
        jwks_uri: "https://client.example.com/jwks.json",
      }),
      doc({ token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [{ ...key, d: "private" }] } }),
      doc({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: "http://client.example.com/jwks.json" }),
      doc({ token_endpoint_auth_method: "private_key_jwt", jwks_uri: "https://127.1/jwks.json" }),
    ]) {
      expect(refusal(URL_ID, bad).code).toBe("invalid_client");
    }
  });

  it("rule: every redirect URI must be acceptable", () => {
    for (const uri of [
      "javascript:alert(1)",
      " JavaScript:alert(1)",
      "data:text/html,x",
      "http://client.example.com/cb",
      "https://client.example.com/cb#frag",
      "https://user:pw@client.example.com/cb",
      "/relative",
    ]) {
      const e = refusal(URL_ID, doc({ redirect_uris: ["https://client.example.com/ok", uri] }));
      expect(e.code, uri).toBe("invalid_client");
      expect(e.description, uri).toMatch(/^client metadata document: redirect_uris\.1: /);
    }
  });

  it("requires the code flow in grant and response types; logo and client URIs must be https", () => {
    for (const bad of [
      doc({ grant_types: ["client_credentials"] }),
      doc({ grant_types: ["implicit"] }),
      doc({ grant_types: ["refresh_token"] }),
      doc({ grant_types: [] }),
      doc({ response_types: ["token"] }),
      doc({ logo_uri: "http://cdn.example.com/logo.png" }),
      doc({ logo_uri: "javascript:alert(1)" }),
      doc({ client_uri: "https://user@client.example.com/" }),
      doc({ scope: "a  b" }),
    ]) {
      expect(refusal(URL_ID, bad).code).toBe("invalid_client");
    }
  });

  it("property: public descriptions never repeat document content", () => {
    const marker = fc
      .string({ minLength: 8, maxLength: 30 })
      .map((s) => `MARK${s.replace(/[^A-Za-z0-9]/g, "")}ER`);
    fc.assert(
      fc.property(marker, fc.integer({ min: 0, max: 4 }), (m, which) => {
        const bad = [
          doc({ client_id: `https://${m}.example.com/x` }),
          doc({ redirect_uris: [`javascript:${m}`] }),
          doc({ token_endpoint_auth_method: m }),
          doc({ grant_types: [m] }),
          doc({ client_name: `${m}\u0000` }),
        ][which];
        const e = refusal(URL_ID, bad);
        return !String(e.description).includes(m) && !e.message.includes(m);
      }),
    );
  });
});

describe("rule: a client_id URL is https with a path, and nothing that makes two spellings", () => {
  it("accepts well-formed ids", () => {
    for (const id of [URL_ID, "https://example.com/c", "https://example.com:8443/c/d.json"]) {
      expect(clientIdUrlProblem(id), id).toBeUndefined();
      expect(isUrlClientId(id)).toBe(true);
    }
  });

  it("refuses malformed ids", () => {
    for (const id of [
      "https://example.com",
      "https://example.com/",
      "https://example.com/c?x=1",
      "https://example.com/c?",
      "https://example.com/c#f",
      "https://user@example.com/c",
      "https://example.com/a/../c",
      "https://example.com/a/%2e%2e/c",
      "HTTPS://example.com/c",
      "https://Example.com/c",
      "https://example.com:443/c",
      "http://example.com/c",
      "https://2130706433/c",
    ]) {
      expect(clientIdUrlProblem(id), id).toBeTypeOf("string");
    }
    expect(isUrlClientId("HTTPS://example.com/c")).toBe(true);
    expect(isUrlClientId("my-client")).toBe(false);
  });
});

describe("trust policy host rules", () => {
  it("matches exact hosts and *.suffix rules (subdomains only, not the apex, not look-alikes)", () => {
    const rules = ["apps.example.org", "*.example.com"];
    expect(hostAllowed("apps.example.org", rules)).toBe(true);
    expect(hostAllowed("a.example.com", rules)).toBe(true);
    expect(hostAllowed("a.b.example.com", rules)).toBe(true);
    expect(hostAllowed("example.com", rules)).toBe(false);
    expect(hostAllowed("evilexample.com", rules)).toBe(false);
    expect(hostAllowed("example.com.evil.test", rules)).toBe(false);
    expect(hostAllowed("x.apps.example.org", rules)).toBe(false);
  });
});

describe("rule: cache headers are honoured within clamps", () => {
  const h = (init: Record<string, string>) => new Headers(init);
  const now = Date.parse("2026-01-01T00:00:00Z");
  it("reads max-age, Expires and the no-store family", () => {
    expect(cacheLifetimeSeconds(h({ "cache-control": "public, max-age=600" }), now, 60, 86400)).toBe(600);
    expect(cacheLifetimeSeconds(h({ "cache-control": "max-age=5" }), now, 60, 86400)).toBe(60);
    expect(cacheLifetimeSeconds(h({ "cache-control": "max-age=99999999" }), now, 60, 86400)).toBe(86400);
    expect(cacheLifetimeSeconds(h({ "cache-control": "max-age=0" }), now, 0, 86400)).toBe(0);
    expect(cacheLifetimeSeconds(h({ "cache-control": "no-store" }), now, 60, 86400)).toBeUndefined();
    expect(
      cacheLifetimeSeconds(h({ "cache-control": "max-age=600, No-Cache" }), now, 60, 86400),
    ).toBeUndefined();
    expect(
      cacheLifetimeSeconds(
        h({ expires: "Thu, 01 Jan 2026 01:00:00 GMT", date: "Thu, 01 Jan 2026 00:00:00 GMT" }),
        now,
        60,
        86400,
      ),
    ).toBe(3600);
    // max-age wins over Expires (RFC 9111 §5.3).
    expect(
      cacheLifetimeSeconds(
        h({ "cache-control": "max-age=120", expires: "Thu, 01 Jan 2026 01:00:00 GMT" }),
        now,
        60,
        86400,
      ),
    ).toBe(120);
    expect(cacheLifetimeSeconds(h({ expires: "garbage" }), now, 60, 86400)).toBe(60);
    expect(cacheLifetimeSeconds(h({}), now, 60, 86400)).toBe(60);
  });
});
