/**
 * `gatehouse serve`'s config file takes a provider's `keepTokens` (upstream tokens for resource
 * servers) as the library does, and refuses a malformed one naming the field.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommandArgs, UsageError } from "../../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../../src/cli/config.js";

const dir = mkdtempSync(join(tmpdir(), "gatehouse-keep-tokens-config-"));
const RESOURCE = "http://localhost:9001";

function build(provider: Record<string, unknown>) {
  const file = join(mkdtempSync(join(dir, "c-")), "gatehouse.json");
  writeFileSync(file, JSON.stringify({ upstreamSignIn: { providers: [provider] } }));
  writeFileSync(join(file, "..", "github.secret"), "file-secret\n", { mode: 0o600 });
  return buildServeConfig(
    parseCommandArgs(
      [
        "--insecure-loopback",
        "--resource",
        RESOURCE,
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

const github = { id: "github", preset: "github", clientId: "gh", clientSecretFile: "github.secret" };

describe("serve: keepTokens", () => {
  it("reaches the server's options as written", () => {
    const keepTokens = { resourceServers: [{ clientId: "notes-rs", resource: RESOURCE }] };
    const config = build({ ...github, keepTokens });
    expect(config.server.upstreamSignIn?.providers[0]?.keepTokens).toEqual(keepTokens);
  });

  it("refuses an empty list, a missing resource and an unknown member", () => {
    for (const keepTokens of [
      { resourceServers: [] },
      { resourceServers: [{ clientId: "notes-rs" }] },
      { resourceServers: [{ clientId: "notes-rs", resource: RESOURCE, secret: "x" }] },
    ]) {
      let message = "";
      try {
        build({ ...github, keepTokens });
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        message = (error as Error).message;
      }
      expect(message).toMatch(/keepTokens/);
    }
  });
});
