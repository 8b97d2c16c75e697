/**
 * `gatehouse serve`'s trusted proxy hops: `--trust-proxy` (one hop), `--trust-proxy-hops N`, and
 * `trustProxy` in the config file (true or a count). What the count does to the client address is
 * pinned by test/http/client-address.test.ts; this file pins how the command line produces it.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCommandArgs, UsageError } from "../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../src/cli/config.js";

const BASE = [
  "--issuer",
  "https://auth.example.test",
  "--resource",
  "https://api.example.test",
  "--scopes",
  "notes:read",
  "--data",
  mkdtempSync(join(tmpdir(), "gatehouse-proxy-")),
];

function hops(args: string[]): number {
  return buildServeConfig(parseCommandArgs([...BASE, ...args], SERVE_OPTIONS)).trustProxy;
}

function withConfig(content: unknown): string[] {
  const file = join(mkdtempSync(join(tmpdir(), "gatehouse-proxy-config-")), "gatehouse.json");
  writeFileSync(file, JSON.stringify(content));
  return ["--config", file];
}

describe("trusted proxy hops", () => {
  it("none by default; --trust-proxy is one hop; --trust-proxy-hops sets the count", () => {
    expect(hops(["--tls-cert", "c.pem", "--tls-key", "k.pem"])).toBe(0);
    expect(hops(["--trust-proxy"])).toBe(1);
    expect(hops(["--trust-proxy-hops", "2"])).toBe(2);
  });

  it("the config file takes true or a count; the command line wins", () => {
    expect(hops(withConfig({ trustProxy: true }))).toBe(1);
    expect(hops(withConfig({ trustProxy: 3 }))).toBe(3);
    expect(hops([...withConfig({ trustProxy: 3 }), "--trust-proxy-hops", "1"])).toBe(1);
  });

  it("an out-of-range count is a usage error", () => {
    expect(() => hops(["--trust-proxy-hops", "17"])).toThrow(UsageError);
    expect(() => hops(["--trust-proxy-hops", "-1"])).toThrow();
  });
});
