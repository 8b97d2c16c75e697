/**
 * `gatehouse serve`'s config file carries the explicit allowance of "Grants without a user"
 * (docs/authorization-server.md): `dynamicRegistration.initialAccessTokens`, each a token's SHA-256
 * and the scopes it allows (RFC 7591 §3). What the file says reaches the server; a malformed entry
 * is a usage error before anything listens.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommandArgs, UsageError } from "../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../src/cli/config.js";
import { sha256Base64url } from "../../src/shared/crypto.js";

function build(config: unknown) {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-iat-"));
  const file = join(dir, "gatehouse.json");
  writeFileSync(file, JSON.stringify(config));
  return buildServeConfig(
    parseCommandArgs(
      [
        "--issuer",
        "https://auth.example.test",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
        "--resource",
        "https://api.example.test",
        "--scopes",
        "notes:read",
        "--data",
        dir,
        "--config",
        file,
      ],
      SERVE_OPTIONS,
    ),
  );
}

describe("dynamicRegistration.initialAccessTokens in the config file", () => {
  it("reaches the server as written", () => {
    const entry = { sha256: sha256Base64url("operator-token"), scopes: ["notes:read"] };
    const config = build({ dynamicRegistration: { initialAccessTokens: [entry] } });
    expect(config.server.dynamicRegistration?.initialAccessTokens).toEqual([entry]);
  });

  it.each([
    [{ sha256: sha256Base64url("t"), scopes: [] }],
    [{ sha256: sha256Base64url("t"), scopes: ['a"b'] }],
    [{ sha256: sha256Base64url("t"), scopes: ["notes:read"], token: "the-token-itself" }],
  ])("refuses %j as a usage error", (entry) => {
    expect(() => build({ dynamicRegistration: { initialAccessTokens: [entry] } })).toThrow(UsageError);
  });
});
