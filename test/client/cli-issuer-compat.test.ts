/**
 * The command line's per-issuer compatibility settings (`issuers.json` in the config directory,
 * src/cli/issuer-compat-file.ts) with the built `gatehouse` (dist/cli/main.js) against a loopback
 * Cognito-like authorization server (field-servers.ts): `login` is refused by the spec's PKCE rule
 * without the file, works with it and says so on stderr; `status` and `check` show the settings;
 * a file with an unknown setting stops the command naming the file.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, runCli, tempDir } from "../cli/helpers.js";
import { CLIENT_ID, type FieldServer, startFieldServer } from "./field-servers.js";

let field: FieldServer;
let dir: { path: string; remove(): void };
let browser: string;

beforeAll(async () => {
  ensureBuilt();
  field = await startFieldServer("cognito");
  dir = tempDir("gatehouse-compat-");
  // $BROWSER: follows the authorization URL's redirect to the CLI's loopback listener, as a
  // browser would after an instant approval (this server asks nothing).
  browser = join(dir.path, "browser.sh");
  writeFileSync(
    browser,
    `#!/bin/sh\nexec "${process.execPath}" -e 'fetch(process.argv[1]).then((r) => r.text()).catch(() => {})' "$1"\n`,
  );
  chmodSync(browser, 0o755);
});
afterAll(async () => {
  await field?.close();
  dir?.remove();
});

function run(args: string[], configDir: string) {
  return runCli(args, { env: { GATEHOUSE_CONFIG_DIR: configDir, BROWSER: browser } });
}

const login = (configDir: string) =>
  run(["login", field.resourceUrl, "--client-id", CLIENT_ID, "--issuer", field.issuer], configDir);

describe("gatehouse and issuers.json", () => {
  it("login without the file: refused by the spec's PKCE rule; with assumeS256 for the issuer: logged in, the use said on stderr", async () => {
    const without = join(dir.path, "without");
    const refused = await login(without);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("code_challenge_methods_supported");
    expect(field.seen.authorize).toHaveLength(0);

    const withFile = join(dir.path, "with");
    mkdirSync(withFile, { recursive: true, mode: 0o700 });
    writeFileSync(
      join(withFile, "issuers.json"),
      JSON.stringify({ issuers: { [field.issuer]: { assumeS256: true } } }),
    );
    const ok = await login(withFile);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(
      `Compatibility setting assume_s256 for ${field.issuer} (issuers.json): metadata omits code_challenge_methods_supported; proceeding with S256`,
    );
    expect(field.seen.authorize).toHaveLength(1);

    const status = await run(["status"], withFile);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("Compatibility settings (");
    expect(status.stdout).toContain("assume PKCE S256 when code_challenge_methods_supported is absent");
    expect(status.stdout).toContain("applied to the stored metadata: assume_s256");
    const json = JSON.parse((await run(["status", "--json"], withFile)).stdout);
    expect(json.issuer_compatibility).toEqual([
      {
        issuer: field.issuer,
        settings: ["assume PKCE S256 when code_challenge_methods_supported is absent"],
        applied_to_stored_metadata: ["assume_s256"],
      },
    ]);

    // check shows the settings and does not apply them: the PKCE rule still fails there.
    const check = await run(["check", field.resourceUrl], withFile);
    expect(check.stdout).toContain("Client compatibility settings in");
    expect(check.stdout).toContain("shown, not applied by this check");
    expect(check.stdout).toContain(field.issuer);
  }, 60_000);

  it("a file with an unknown setting or a non-URL issuer stops the command, naming the file", async () => {
    const bad = join(dir.path, "bad");
    mkdirSync(bad, { recursive: true, mode: 0o700 });
    writeFileSync(join(bad, "issuers.json"), JSON.stringify({ issuers: { "*": { assumeS256: true } } }));
    const star = await run(["status"], bad);
    expect(star.code).toBe(2);
    expect(star.stderr).toContain("issuers.json");
    writeFileSync(
      join(bad, "issuers.json"),
      JSON.stringify({ issuers: { [field.issuer]: { assumeS256: true, skipAllChecks: true } } }),
    );
    const unknown = await login(bad);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown setting "skipAllChecks"');
  }, 60_000);
});
