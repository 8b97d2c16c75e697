/**
 * The PKCE comparison inside codeCheck (RFC 7636 §4.6): the code is redeemed only when
 * BASE64URL(SHA256(code_verifier)) is exactly the stored challenge, as a string. Near misses a
 * lenient comparison would let through (padding, the standard base64 alphabet, case, a prefix, a
 * look-alike character) are refused, whatever the stored value looks like.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { codeCheck } from "../../../src/authorization-server/grants/authorization-code.js";
import type { AuthorizationCodeRecord, ClientRecord } from "../../../src/storage/contract.js";

const CLIENT = {
  clientId: "pkce-client",
  source: "preregistered",
  redirectUris: ["https://app.example/cb"],
  grantTypes: ["authorization_code"],
  responseTypes: ["code"],
  tokenEndpointAuthMethod: "none",
  metadata: {},
  createdAt: 0,
} as ClientRecord;
const VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE = createHash("sha256").update(VERIFIER).digest("base64url");
const RESOURCE = "https://rs.example/mcp";

function code(codeChallenge: string): AuthorizationCodeRecord {
  return {
    codeHash: "h",
    grantId: "g",
    clientId: CLIENT.clientId,
    userId: "u",
    redirectUri: "https://app.example/cb",
    redirectUriSent: true,
    scopes: ["notes:read"],
    resource: RESOURCE,
    codeChallenge,
    codeChallengeMethod: "S256",
    refreshAllowed: false,
    createdAt: 0,
    expiresAt: 1,
  };
}

function check(verifier: string, challenge: string) {
  return codeCheck(CLIENT, {
    redirectUri: "https://app.example/cb",
    codeVerifier: verifier,
    resource: RESOURCE,
  })(code(challenge));
}

describe("codeCheck PKCE (RFC 7636 §4.6)", () => {
  it("accepts the verifier whose S256 challenge is stored (RFC 7636 Appendix B's example)", () => {
    expect(CHALLENGE).toBe("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    expect(check(VERIFIER, CHALLENGE)).toBeUndefined();
  });

  it("refuses a verifier one character off", () => {
    const other = `${VERIFIER.slice(0, -1)}Y`;
    expect(check(other, CHALLENGE)?.code).toBe("invalid_grant");
    expect(check(other, CHALLENGE)?.detail).toBe("PKCE verification failed");
  });

  it("refuses stored challenges that only look like the right one", () => {
    const standardAlphabet = createHash("sha256").update(VERIFIER).digest("base64");
    const nearMisses = [
      `${CHALLENGE}=`,
      standardAlphabet,
      standardAlphabet.replace(/=+$/, ""),
      CHALLENGE.slice(0, -1),
      `${CHALLENGE}A`,
      `A${CHALLENGE}`,
      CHALLENGE.toLowerCase(),
      CHALLENGE.toUpperCase(),
      // Same length in UTF-16, one look-alike character (Cyrillic "М" for "M").
      CHALLENGE.replace("M", "\u041c"),
      // Same byte length in UTF-8 only if counted wrongly: a two-byte character for two ASCII ones.
      `${CHALLENGE.slice(0, -2)}\u00e9`,
      createHash("sha256").update(VERIFIER).digest("hex"),
      "",
    ];
    for (const challenge of nearMisses) {
      expect(challenge).not.toBe(CHALLENGE);
      expect(check(VERIFIER, challenge)?.code, JSON.stringify(challenge)).toBe("invalid_grant");
    }
  });

  it("refuses when the verifier is sent where the challenge belongs (plain is never accepted)", () => {
    expect(check(VERIFIER, VERIFIER)?.code).toBe("invalid_grant");
    expect(check(CHALLENGE, CHALLENGE)?.code).toBe("invalid_grant");
  });
});
