/**
 * The closed set of errors (shared/errors.ts, DESIGN.md principle 3): every error class Gatehouse
 * exports is an OAuthError (protocol) or carries a GatehouseErrorCode (everything else), and an
 * OAuthError's own headers reach the HTTP answer without the handler knowing its class.
 */
import { describe, expect, it } from "vitest";
import { ClientAuthenticationError } from "../../src/authorization-server/clients/authentication.js";
import { RateLimitedError } from "../../src/authorization-server/endpoints/register.js";
import { SigningKeyDecryptionError } from "../../src/authorization-server/keys/signing-key-envelope.js";
import { UsageError } from "../../src/cli/args.js";
import { AuthorizationFlowError } from "../../src/client/errors.js";
import { HostNotAllowedError, MissingTokenError } from "../../src/resource-server/errors.js";
import { GatehouseError, GatehouseTypeError, isGatehouseError, OAuthError } from "../../src/shared/errors.js";
import { GuardedFetchError } from "../../src/shared/guarded-fetch.js";
import { oauthErrorResponse } from "../../src/shared/http.js";
import { SecretEnvelopeError } from "../../src/shared/secret-envelope.js";
import { StorageConflictError, StorageUnavailableError } from "../../src/storage/contract.js";

describe("the closed set of errors", () => {
  it("every non-protocol error class is a GatehouseError with a stable code", () => {
    const errors: Array<[GatehouseError, string]> = [
      [new AuthorizationFlowError("iss_mismatch", "x", { kind: "refused", step: "s" }), "iss_mismatch"],
      [new GuardedFetchError("blocked_address", "x"), "blocked_address"],
      [new SecretEnvelopeError("ERR_KEK_UNKNOWN", "x"), "ERR_KEK_UNKNOWN"],
      [new SigningKeyDecryptionError("ERR_KEY_MISMATCH", "kid-1", "x"), "ERR_KEY_MISMATCH"],
      [new StorageUnavailableError("down"), "ERR_STORAGE_UNAVAILABLE"],
      [new StorageConflictError("exists"), "ERR_STORAGE_CONFLICT"],
      [new MissingTokenError(), "ERR_MISSING_TOKEN"],
      [new HostNotAllowedError("host", "evil.example"), "ERR_HOST_NOT_ALLOWED"],
      [new UsageError("bad flag"), "ERR_USAGE"],
    ];
    for (const [error, code] of errors) {
      expect(error).toBeInstanceOf(GatehouseError);
      expect(error.code).toBe(code);
      expect(isGatehouseError(error)).toBe(true);
      expect(error.name).not.toBe("Error");
    }
    expect(isGatehouseError(new GatehouseTypeError("ERR_INVALID_OPTION", "x"))).toBe(true);
    expect(isGatehouseError(new OAuthError("invalid_grant"))).toBe(true);
    expect(isGatehouseError(new Error("plain"))).toBe(false);
  });

  it("an OAuthError's own headers reach the response: a client-authentication challenge, Retry-After", () => {
    const challenge = oauthErrorResponse(
      new ClientAuthenticationError({ description: "bad secret", wwwAuthenticate: 'Basic realm="token"' }),
    );
    expect(challenge.status).toBe(401);
    expect(challenge.headers.get("www-authenticate")).toBe('Basic realm="token"');
    expect(challenge.headers.get("cache-control")).toBe("no-store");
    const limited = oauthErrorResponse(new RateLimitedError(42));
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("42");
    // The caller's headers come on top.
    expect(
      oauthErrorResponse(new RateLimitedError(42), { "retry-after": "7" }).headers.get("retry-after"),
    ).toBe("7");
  });
});
