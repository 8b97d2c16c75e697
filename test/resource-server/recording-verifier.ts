/** An inner verifier for the cachedVerifier tests, shared by the cache's test files. */
import type { AuthInfo } from "../../src/resource-server/index.js";
import { OAuthError } from "../../src/shared/errors.js";

/**
 * An inner verifier that accepts the tokens in `accepted` (each expiring at `expiresAt()` seconds)
 * and records every call; a token removed from `accepted` is refused from then on (revoked), one
 * added is accepted from then on.
 */
export function recordingVerifier(valid: Iterable<string> = [], expiresAt = () => 1e12) {
  const accepted = new Set(valid);
  const calls: string[] = [];
  return {
    accepted,
    calls,
    verify: async (token: string): Promise<AuthInfo> => {
      calls.push(token);
      if (!accepted.has(token)) throw new OAuthError("invalid_token");
      return {
        subject: token,
        clientId: "c",
        scopes: [],
        audience: ["r"],
        expiresAt: expiresAt(),
        issuer: "i",
      };
    },
  };
}
