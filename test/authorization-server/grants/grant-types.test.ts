/**
 * The grant-type table (src/authorization-server/grants/grant-types.ts) drives both the token
 * endpoint's dispatch and `grant_types_supported`: every advertised grant type reaches its handler,
 * anything else is `unsupported_grant_type` (RFC 6749 §5.2), with refresh on and off.
 */
import { describe, expect, it } from "vitest";
import { DEVICE_CODE_GRANT_TYPE } from "../../../src/authorization-server/policy/grants.js";
import { makeServer, PUBLIC_CLIENT, postToken } from "../helpers.js";

async function advertised(t: Awaited<ReturnType<typeof makeServer>>): Promise<string[]> {
  const response = await t.server.fetch(
    new Request("https://as.example.test/.well-known/oauth-authorization-server"),
  );
  return ((await response.json()) as { grant_types_supported: string[] }).grant_types_supported;
}

describe("grant types: one table for dispatch and metadata", () => {
  for (const refresh of [true, false]) {
    it(`every advertised grant type is dispatched; nothing else is (refresh ${refresh ? "on" : "off"})`, async () => {
      const t = await makeServer({ refreshTokens: { enabled: refresh } });
      const listed = await advertised(t);
      expect(listed).toEqual(
        refresh
          ? ["authorization_code", "refresh_token", "client_credentials", DEVICE_CODE_GRANT_TYPE]
          : ["authorization_code", "client_credentials", DEVICE_CODE_GRANT_TYPE],
      );
      for (const grantType of listed) {
        const { body } = await postToken(t, { grant_type: grantType, client_id: PUBLIC_CLIENT });
        expect(body.error, grantType).not.toBe("unsupported_grant_type");
      }
      const unknown = ["password", "implicit", "__proto__", "toString", "constructor", "AUTHORIZATION_CODE"];
      if (!refresh) unknown.push("refresh_token");
      for (const grantType of unknown) {
        const { status, body } = await postToken(t, { grant_type: grantType, client_id: PUBLIC_CLIENT });
        expect([status, body.error], grantType).toEqual([400, "unsupported_grant_type"]);
      }
    });
  }
});
