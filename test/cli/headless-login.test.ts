/**
 * Issue 14, "no silent hang": `gatehouse fetch` of a resource it holds no login for, on a machine
 * where no browser can be opened (no display, standard input closed, not a terminal, or
 * `--no-browser`), fails at once and names the command to run instead of starting a browser login
 * nobody can finish. The real CLI runs against a real authorization server (oidc-provider on
 * loopback, test/support/oidc-provider.ts). No timing is asserted: a command that waited for a
 * browser would not exit before the (generous) test timeout, and the test would fail there.
 */
import type { ChildProcess } from "node:child_process";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type OidcProviderFixture, startOidcProvider } from "../support/oidc-provider.js";
import { type CliResult, ensureBuilt, startHeadless, tempDir } from "./helpers.js";

let op: OidcProviderFixture;
let config: ReturnType<typeof tempDir>;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  ensureBuilt();
  op = await startOidcProvider();
  config = tempDir("gatehouse-headless-");
}, 60_000);

afterEach(() => {
  // A command that hung (the bug this file guards against) does not outlive its test.
  for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
  running.clear();
});

afterAll(async () => {
  await op?.close();
  config?.remove();
});

/** `gatehouse <args>` headless (see `startHeadless`), to completion; killed after its test. */
function runHeadless(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  const cli = startHeadless(args, config.path, env);
  running.add(cli.child);
  return cli.done;
}

describe("gatehouse fetch with no stored login and no browser to open", () => {
  it("no display, stdin closed: exits 1 at once, naming 'gatehouse login <url>' and 'gatehouse login --device <url>'", async () => {
    const result = await runHeadless(["fetch", op.resourceUrl]);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`gatehouse login ${op.resourceUrl}`);
    expect(result.stderr).toContain(`gatehouse login --device ${op.resourceUrl}`);
    expect(result.stderr).toContain("no browser can be opened here");
    // It never got as far as a browser login: no URL printed, no wait announced.
    expect(result.stderr).not.toContain("Waiting for you to finish in the browser");
    expect(result.stderr).not.toContain("/auth?");
  }, 60_000);

  it("--no-browser refuses the same way even with a display and $BROWSER set", async () => {
    const result = await runHeadless(["fetch", "--no-browser", op.resourceUrl], {
      DISPLAY: ":0",
      BROWSER: "/nonexistent/browser",
    });
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toContain("--no-browser");
    expect(result.stderr).toContain(`gatehouse login --device ${op.resourceUrl}`);
    expect(result.stderr).not.toContain("Waiting for you to finish in the browser");
  }, 60_000);

  it("the help text documents --no-browser and the refusal", async () => {
    const result = await runHeadless(["fetch", "--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("--no-browser");
    expect(result.stdout).toContain("gatehouse login --device");
  }, 60_000);
});

describe("gatehouse login (browser) where no browser can be opened", () => {
  it("says why and points to --device as it shows the URL, then says it waits, how to cancel and for how long", async () => {
    const cli = startHeadless(["login", op.resourceUrl], config.path);
    running.add(cli.child);
    for (let i = 0; i < 300 && !cli.stderr().includes("Waiting for you"); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const stderr = cli.stderr();
    expect(stderr).toContain(
      `No browser can be opened here (standard input or output is not a terminal): open the address below where you can, or press Ctrl-C and run 'gatehouse login --device ${op.resourceUrl}'.`,
    );
    expect(stderr).toMatch(/Open this URL in a browser to authorize:\n {2}http:\/\/127\.0\.0\.1:\d+\/auth\?/);
    expect(stderr).toContain(
      "Waiting for you to finish in the browser (Ctrl-C to cancel; gives up after 5 min)",
    );
    cli.child.kill("SIGINT");
    await cli.done;
  }, 60_000);
});
