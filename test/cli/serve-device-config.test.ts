/**
 * `gatehouse serve` and the device authorization grant (RFC 8628): `--no-device-authorization`
 * and the config file's `deviceAuthorization` reach the server's options, and values outside the
 * server's limits are usage errors naming the field.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OPTION_LIMITS } from "../../src/authorization-server/core/option-limits.js";
import { parseCommandArgs, UsageError } from "../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../src/cli/commands/serve.js";
import { buildServeConfig } from "../../src/cli/config.js";

const BASE = [
  "--insecure-loopback",
  "--resource",
  "http://localhost:9001",
  "--scopes",
  "notes:read",
  "--data",
  mkdtempSync(join(tmpdir(), "gatehouse-device-")),
];

function build(args: string[]) {
  return buildServeConfig(parseCommandArgs([...BASE, ...args], SERVE_OPTIONS));
}

function withConfig(content: unknown): string[] {
  const file = join(mkdtempSync(join(tmpdir(), "gatehouse-device-config-")), "gatehouse.json");
  writeFileSync(file, JSON.stringify(content));
  return ["--config", file];
}

describe("serve: device authorization settings", () => {
  it("passes the config file's deviceAuthorization through, and the flag turns it off", () => {
    const config = withConfig({ deviceAuthorization: { ttlSeconds: 900, intervalSeconds: 10 } });
    expect(build(config).server.deviceAuthorization).toEqual({ ttlSeconds: 900, intervalSeconds: 10 });
    expect(build([...config, "--no-device-authorization"]).server.deviceAuthorization).toEqual({
      ttlSeconds: 900,
      intervalSeconds: 10,
      enabled: false,
    });
    expect(build([]).server.deviceAuthorization).toEqual({});
  });

  it("refuses values outside the server's limits, naming the field", () => {
    const { max } = OPTION_LIMITS["deviceAuthorization.ttlSeconds"];
    for (const bad of [{ ttlSeconds: max + 1 }, { intervalSeconds: 0 }, { enabled: "yes" }, { other: 1 }]) {
      let message = "";
      try {
        build(withConfig({ deviceAuthorization: bad }));
      } catch (error) {
        expect(error).toBeInstanceOf(UsageError);
        message = (error as Error).message;
      }
      expect(message, JSON.stringify(bad)).toMatch(/deviceAuthorization/);
    }
  });
});
