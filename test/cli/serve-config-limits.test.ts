/**
 * `gatehouse serve`'s configuration limits come from the authorization server's resolver
 * (OPTION_LIMITS in src/authorization-server/core/option-limits.ts), so the CLI cannot accept
 * what the server would refuse: an out-of-range value in the config file or a flag is a usage error
 * (exit status 2) at parse time, before anything listens, naming the field.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OPTION_LIMITS } from "../../src/authorization-server/core/option-limits.js";
import { parseCommandArgs, UsageError } from "../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../src/cli/config.js";
import { ensureBuilt, runCli } from "./helpers.js";

const BASE = [
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
  mkdtempSync(join(tmpdir(), "gatehouse-limits-")),
];

function build(args: string[]) {
  return buildServeConfig(parseCommandArgs([...BASE, ...args], SERVE_OPTIONS));
}

function withConfig(content: unknown): string[] {
  const file = join(mkdtempSync(join(tmpdir(), "gatehouse-limits-config-")), "gatehouse.json");
  writeFileSync(file, JSON.stringify(content));
  return ["--config", file];
}

function refusal(args: string[]): string {
  try {
    build(args);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`accepted: ${args.join(" ")}`);
}

describe("serve configuration limits are the server's", () => {
  it("a config file value outside the server's limits is a usage error naming the field", () => {
    const { min, max } = OPTION_LIMITS.accessTokenTtlSeconds;
    expect(refusal(withConfig({ accessTokenTtlSeconds: min - 1 }))).toMatch(/accessTokenTtlSeconds/);
    expect(refusal(withConfig({ accessTokenTtlSeconds: max + 1 }))).toMatch(/accessTokenTtlSeconds/);
    const grace = OPTION_LIMITS["refreshTokens.reuseGraceSeconds"].max + 1;
    expect(refusal(withConfig({ refreshTokens: { reuseGraceSeconds: grace } }))).toMatch(
      /refreshTokens\.reuseGraceSeconds/,
    );
    expect(refusal(withConfig({ dynamicRegistration: { unusedTtlSeconds: 59 } }))).toMatch(
      /dynamicRegistration\.unusedTtlSeconds/,
    );
    expect(refusal(withConfig({ clientMetadataDocuments: { maxBytes: 10 } }))).toMatch(
      /clientMetadataDocuments\.maxBytes/,
    );
  });

  it("the bounds themselves are accepted", () => {
    const { min, max } = OPTION_LIMITS.accessTokenTtlSeconds;
    expect(build(withConfig({ accessTokenTtlSeconds: min })).server.accessTokenTtlSeconds).toBe(min);
    expect(build(["--access-token-ttl", String(max)]).server.accessTokenTtlSeconds).toBe(max);
    const grace = OPTION_LIMITS["refreshTokens.reuseGraceSeconds"].max;
    expect(
      build(withConfig({ refreshTokens: { reuseGraceSeconds: grace } })).server.refreshTokens
        ?.reuseGraceSeconds,
    ).toBe(grace);
  });

  it("flags and rules across fields are judged by the server's resolver at parse time", () => {
    expect(refusal(["--access-token-ttl", "5"])).toMatch(/accessTokenTtlSeconds/);
    expect(refusal(["--refresh-idle-ttl", "7200", "--refresh-absolute-ttl", "3600"])).toMatch(
      /idleTtlSeconds must not exceed/,
    );
    expect(
      refusal(withConfig({ clientMetadataDocuments: { minCacheSeconds: 600, maxCacheSeconds: 60 } })),
    ).toMatch(/minCacheSeconds must not exceed maxCacheSeconds/);
  });

  it("gatehouse serve exits with status 2 and the usage hint, listening on nothing", async () => {
    ensureBuilt();
    const result = await runCli(["serve", ...BASE, "--access-token-ttl", "5"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/accessTokenTtlSeconds/);
    expect(result.stderr).toContain("see 'gatehouse serve --help'");
    expect(result.stdout).toBe("");
  });
});
