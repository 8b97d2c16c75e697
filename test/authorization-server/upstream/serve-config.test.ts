/**
 * `gatehouse serve` and upstream sign-in: the config file's `upstreamSignIn` reaches the server's
 * options with each client secret read from its file or environment variable (never from the config
 * file itself), `--no-local-passwords` turns the password form off, and mistakes are usage errors
 * naming the field, through the same resolver as the library.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseCommandArgs, UsageError } from "../../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../../src/cli/config.js";

const dir = mkdtempSync(join(tmpdir(), "gatehouse-upstream-config-"));
const BASE = [
  "--insecure-loopback",
  "--resource",
  "http://localhost:9001",
  "--scopes",
  "notes:read",
  "--data",
  dir,
];

function build(config: unknown, flags: string[] = []) {
  const file = join(mkdtempSync(join(dir, "c-")), "gatehouse.json");
  writeFileSync(file, JSON.stringify(config));
  writeFileSync(join(file, "..", "github.secret"), "file-secret\n", { mode: 0o600 });
  return buildServeConfig(parseCommandArgs([...BASE, "--config", file, ...flags], SERVE_OPTIONS));
}

function usageError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error("expected a usage error");
}

afterEach(() => {
  delete process.env.GATEHOUSE_TEST_GOOGLE_SECRET;
});

describe("serve: upstreamSignIn", () => {
  it("reads the secrets from a file beside the config and from the environment", () => {
    process.env.GATEHOUSE_TEST_GOOGLE_SECRET = "env-secret";
    const config = build({
      upstreamSignIn: {
        providers: [
          { id: "github", preset: "github", clientId: "gh", clientSecretFile: "github.secret" },
          {
            id: "google",
            preset: "google",
            clientId: "g",
            clientSecretEnv: "GATEHOUSE_TEST_GOOGLE_SECRET",
            admission: { googleHostedDomains: ["example.com"] },
          },
        ],
      },
    });
    expect(config.server.upstreamSignIn?.providers).toEqual([
      { id: "github", preset: "github", clientId: "gh", clientSecret: "file-secret" },
      {
        id: "google",
        preset: "google",
        clientId: "g",
        clientSecret: "env-secret",
        admission: { googleHostedDomains: ["example.com"] },
      },
    ]);
    expect(config.server.upstreamSignIn?.localPasswords).toBeUndefined();
  });

  it("--no-local-passwords turns the password form off, and needs providers", () => {
    const config = build(
      { upstreamSignIn: { providers: [{ id: "gitlab", preset: "gitlab", clientId: "x" }] } },
      ["--no-local-passwords"],
    );
    expect(config.server.upstreamSignIn?.localPasswords).toBe(false);
    expect(usageError(() => build({}, ["--no-local-passwords"]))).toMatch(/needs upstreamSignIn providers/);
  });

  it("refuses a secret written into the config file, and other mistakes, naming the field", () => {
    const provider = { id: "github", preset: "github", clientId: "gh", clientSecretFile: "github.secret" };
    expect(
      usageError(() => build({ upstreamSignIn: { providers: [{ ...provider, clientSecret: "inline" }] } })),
    ).toMatch(/clientSecret/);
    expect(
      usageError(() =>
        build({ upstreamSignIn: { providers: [{ ...provider, clientSecretFile: "missing.secret" }] } }),
      ),
    ).toMatch(/cannot read clientSecretFile/);
    expect(
      usageError(() =>
        build({
          upstreamSignIn: { providers: [{ ...provider, clientSecretEnv: "GATEHOUSE_TEST_UNSET_SECRET" }] },
        }),
      ),
    ).toMatch(/not both/);
    expect(
      usageError(() => build({ upstreamSignIn: { providers: [{ ...provider, preset: "okta" }] } })),
    ).toMatch(/issuer is required for the okta preset/);
  });
});
