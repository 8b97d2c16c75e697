/**
 * Issue 26: on a machine without a browser, a `fetch` that needs more scope than the stored login
 * holds (a step-up) failed suggesting `gatehouse login --device <url>`, which only reports the
 * stored token and changes nothing. The refusal now names the scope missing and the command that
 * works: the same command again with --device. Against `gatehouse demo` (real server, real
 * resource): a first login through its forms, then a headless POST that needs notes:write.
 */
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FormUserAgent } from "../examples/form-user-agent.js";
import { launchChromium } from "../support/browser.js";
import {
  type DemoReady,
  ensureBuilt,
  type RunningCli,
  runCli,
  startDemo,
  startHeadless,
  tempDir,
} from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-headless-step-up-");
  demo = await startDemo(join(dir.path, "data"), ["--no-request-log"]);
}, 60_000);
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  await demo?.stop();
  dir?.remove();
});

/** Logs in to the demo's notes (notes:read) through the printed URL and a form-filling user agent. */
async function firstLogin(config: string): Promise<void> {
  const { notes, username, password } = demo.ready;
  const login = startHeadless(["login", "--print-url", notes], config);
  let url: string | undefined;
  for (let i = 0; i < 300 && !url; i++) {
    url = /Open this URL in a browser to authorize:\n\s+(\S+)/.exec(login.stderr())?.[1];
    if (!url) await new Promise((r) => setTimeout(r, 100));
  }
  expect(url, login.stderr()).toBeDefined();
  const callback = await new FormUserAgent(username, password).open(new URL(url!));
  expect((await fetch(callback)).status).toBe(200);
  expect((await login.done).code).toBe(0);
}

const WRITE = ["fetch", "-X", "POST", "-H", "content-type: application/json", "-d", '{"text":"x"}'];

describe("a headless step-up", () => {
  it("names the missing scope and says to run the same command with --device", async () => {
    const { notes, username, password } = demo.ready;
    const config = join(dir.path, "config");
    // First login (notes:read) through the printed URL, followed by a form-filling user agent.
    const login = startHeadless(["login", "--print-url", notes], config);
    let url: string | undefined;
    for (let i = 0; i < 300 && !url; i++) {
      url = /Open this URL in a browser to authorize:\n\s+(\S+)/.exec(login.stderr())?.[1];
      if (!url) await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, login.stderr()).toBeDefined();
    const callback = await new FormUserAgent(username, password).open(new URL(url!));
    expect((await fetch(callback)).status).toBe(200);
    expect((await login.done).code).toBe(0);

    const write = await startHeadless(
      ["fetch", "-X", "POST", "-H", "content-type: application/json", "-d", '{"text":"x"}', notes],
      config,
    ).done;
    expect(write.code, write.stderr).toBe(1);
    const refusal = write.stderr.split("\n").find((l) => l.startsWith("gatehouse fetch:")) ?? "";
    expect(refusal).toContain("needs scope notes:write");
    expect(write.stderr).toContain("--device");
    expect(write.stderr).toContain("run this command again with --device");
    expect(write.stderr).not.toContain(`gatehouse login --device ${notes}`);
  }, 90_000);

  it("the login command the refusal names works: login --device --scope adds the scope to the stored login", async () => {
    const { notes, username, password } = demo.ready;
    const config = join(dir.path, "config-scope");
    await firstLogin(config);
    const refused = await startHeadless([...WRITE, notes], config).done;
    expect(refused.code, refused.stderr).toBe(1);
    const named = /'gatehouse login --device --scope "([^"]+)" (\S+)'/.exec(refused.stderr);
    expect(named, refused.stderr).not.toBeNull();
    const [, scope, url] = named!;
    expect(scope).toBe("notes:write");
    expect(url).toBe(notes);

    // The command as named, approved in Chromium on the demo's device page.
    const login = startHeadless(["login", "--device", "--scope", scope!, url!], config);
    let complete: string | undefined;
    for (let i = 0; i < 300 && !complete; i++) {
      complete = /Or open this address, which carries the code:\n {2}(\S+)\n/.exec(login.stdout())?.[1];
      if (!complete) await new Promise((r) => setTimeout(r, 100));
    }
    expect(complete, login.stdout() + login.stderr()).toBeDefined();
    browser ??= await launchChromium();
    const page = await browser.newPage();
    await page.goto(complete!);
    await expect.poll(() => new URL(page.url()).pathname).toBe("/login");
    await page.locator("#username").fill(username);
    await page.locator("#password").fill(password);
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/device"),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("button", { name: "Allow" }).click();
    await expect.poll(() => page.getByTestId("device-done").textContent()).toContain("You allowed");
    const loggedIn = await login.done;
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    // The union (2026-07-28 step-up rule): the stored notes:read is kept beside notes:write.
    const granted = /\(scope: ([^)]*)\)/.exec(loggedIn.stdout)?.[1]?.split(" ") ?? [];
    expect(granted).toEqual(expect.arrayContaining(["notes:read", "notes:write"]));

    const write = await startHeadless([...WRITE, notes], config).done;
    expect(write.code, write.stderr).toBe(0);
    const read = await startHeadless(["fetch", notes], config).done;
    expect(read.code, read.stderr).toBe(0);
  }, 120_000);

  it("login --scope that the stored login already holds keeps it; a bad scope is a usage error", async () => {
    const { notes } = demo.ready;
    const config = join(dir.path, "config-held");
    await firstLogin(config);
    const again = await startHeadless(["login", "--scope", "notes:read", notes], config).done;
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain("Authorizing");
    expect(again.stdout).toContain("notes:read");
    for (const bad of ["", "  ", 'notes:"x"', "a\\b"]) {
      const usage = await runCli(["login", "--scope", bad, notes], { env: { GATEHOUSE_CONFIG_DIR: config } });
      expect({ bad, code: usage.code }).toEqual({ bad, code: 2 });
      expect(usage.stderr).toContain("gatehouse login: --scope");
    }
  }, 90_000);
});
