/**
 * The public surface of gatehouse-auth/authorization-server (src/authorization-server/index.ts): the
 * factory and what a user of it needs, never the composition root, the option resolver or the
 * router's parts (tests import those by path).
 */
import { describe, expect, it } from "vitest";

describe("gatehouse-auth/authorization-server exports", () => {
  it("exactly the public runtime values", async () => {
    const entry = await import("../../src/authorization-server/index.js");
    expect(Object.keys(entry).sort()).toEqual(
      [
        "ENDPOINT_PATHS",
        "OFFLINE_ACCESS",
        "SigningKeyDecryptionError",
        "createAuthorizationServer",
        "endpointUrl",
        "hashPassword",
        "isLocalhostOnly",
        "matchRedirectUri",
        "redirectUriProblem",
        "verifyPassword",
      ].sort(),
    );
  });
});
