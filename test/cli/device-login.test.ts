/**
 * `gatehouse login --device` (RFC 8628) as a person on a machine without a browser would use it:
 * the built CLI with standard input closed and no display, against oidc-provider with its
 * `deviceFlow` on loopback; Chromium plays the person's other device on the provider's
 * verification pages. Covered: the printed address and code, approval then a headless `fetch`
 * with the stored tokens, denial, expiry, the QR code only on a terminal (tmux gives the CLI one),
 * Ctrl-C, and the help text. Then the same login end to end against Gatehouse's own server
 * (`gatehouse demo`), Chromium signing in and allowing on its /device page, and a step-up to more
 * scope by `fetch --device`.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { type OidcProviderFixture, startOidcProvider } from "../support/oidc-provider.js";
import { decideOnDevicePage } from "../support/oidc-provider-device-page.js";
import {
  type CliResult,
  type DemoReady,
  ensureBuilt,
  type HeadlessCli,
  MAIN,
  type RunningCli,
  startDemo,
  startHeadless,
  tempDir,
} from "./helpers.js";

let browser: Browser;
let dir: ReturnType<typeof tempDir>;
let op: OidcProviderFixture | undefined;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-device-login-");
  browser = await launchChromium();
}, 60_000);
afterEach(async () => {
  for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
  running.clear();
  await op?.close();
  op = undefined;
});
afterAll(async () => {
  await browser?.close();
  dir?.remove();
});

/** `startHeadless`, killed after its test if it is still running. */
function headless(args: string[], configDir: string): HeadlessCli {
  const cli = startHeadless(args, configDir);
  running.add(cli.child);
  return cli;
}

/** The address with the code that the CLI printed, once it has (fails if the CLI ends first). */
async function printedPrompt(cli: HeadlessCli): Promise<{ complete: URL; userCode: string; uri: string }> {
  let ended: CliResult | undefined;
  void cli.done.then((r) => {
    ended = r;
  });
  for (;;) {
    const out = cli.stdout();
    const uri = /open this address on any device:\n {2}(\S+)\n/.exec(out)?.[1];
    const userCode = /and enter the code:\n {2}(\S+)\n/.exec(out)?.[1];
    const complete = /Or open this address, which carries the code:\n {2}(\S+)\n/.exec(out)?.[1];
    if (uri && userCode && complete) return { uri, userCode, complete: new URL(complete) };
    if (ended) throw new Error(`the CLI ended (${ended.code}) before printing a code:\n${ended.stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Terminal rows of `█▀▄ ` as the picture a light-on-dark terminal shows (a block is lit, a space
 * is dark; each character is two pixels tall), as a plain PBM image (1 = dark) scaled 8 times.
 */
function terminalBlocksAsImage(rows: string[]): string {
  const pixels: number[][] = [];
  for (const row of rows) {
    const chars = [...row.trimEnd()];
    pixels.push(chars.map((c) => (c === "█" || c === "▀" ? 0 : 1)));
    pixels.push(chars.map((c) => (c === "█" || c === "▄" ? 0 : 1)));
  }
  const scale = 8;
  const width = Math.max(...pixels.map((p) => p.length));
  const lines = pixels.flatMap((line) => {
    const padded = [...line, ...Array(width - line.length).fill(1)];
    const scaled = padded.flatMap((p) => Array(scale).fill(p)).join(" ");
    return Array(scale).fill(scaled);
  });
  return `P1\n${width * scale} ${pixels.length * scale}\n${lines.join("\n")}\n`;
}

describe("gatehouse login --device against oidc-provider", () => {
  it("prints the address and code (no QR code off a terminal), waits, stores the tokens; a headless fetch then uses them", async () => {
    op = await startOidcProvider({ deviceFlow: {} });
    const config = join(dir.path, "approve");
    const login = headless(["login", "--device", op.resourceUrl], config);
    const prompt = await printedPrompt(login);
    expect(prompt.uri).toBe(`${op.issuer}/device`);
    expect(prompt.complete.searchParams.get("user_code")).toBe(prompt.userCode);
    await decideOnDevicePage(browser, prompt.complete.href, "approve", { userCode: prompt.userCode });
    const result = await login.done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Logged in to ${op.resourceUrl} via ${op.issuer}`);
    expect(result.stdout).toContain("refreshable");
    expect(result.stderr).toMatch(
      /Waiting for you to approve \(Ctrl-C to cancel; the code expires in \d+ minutes\)/,
    );
    // stdout is a pipe: no QR code blocks in it.
    expect(result.stdout).not.toMatch(/[▀▄█]/);
    // The device code is a secret: never printed.
    expect(`${result.stdout}${result.stderr}`).not.toMatch(/device_code/i);

    // The same headless machine now calls the resource with the stored tokens.
    const fetched = await headless(["fetch", op.resourceUrl], config).done;
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(JSON.parse(fetched.stdout)).toEqual({ ok: true, sub: "alice" });
  }, 120_000);

  it("denial: exits 1 saying the login was denied, and stores nothing", async () => {
    op = await startOidcProvider({ deviceFlow: {} });
    const config = join(dir.path, "deny");
    const login = headless(["login", "--device", op.resourceUrl], config);
    await decideOnDevicePage(browser, (await printedPrompt(login)).complete.href, "deny");
    const result = await login.done;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("the login was denied on the verification page [access_denied]");
    const status = await headless(["status", "--json"], config).done;
    expect(JSON.parse(status.stdout).tokens).toEqual([]);
  }, 120_000);

  it("expiry: exits 1 saying the code expired", async () => {
    op = await startOidcProvider({ deviceFlow: { codeTtlSeconds: 2 } });
    const result = await headless(["login", "--device", op.resourceUrl], join(dir.path, "expire")).done;
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "the user code expired before the login was approved; start the login again [expired_token]",
    );
  }, 60_000);

  it("on a terminal (tmux): the QR code drawn decodes to the address with the code; Ctrl-C cancels with status 130", async () => {
    op = await startOidcProvider({ deviceFlow: {} });
    const session = `gatehouse-device-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync("tmux", args, { encoding: "utf8" });
    // bash waits for the CLI (which handles Ctrl-C itself and exits normally) and prints its
    // status; remain-on-exit keeps the pane and its last screen after that.
    const command = `bash -c 'env -u DISPLAY -u WAYLAND_DISPLAY -u BROWSER GATEHOUSE_CONFIG_DIR=${join(dir.path, "tty")} GATEHOUSE_DATABASE_URL= ${process.execPath} ${MAIN} login --device ${op.resourceUrl}; echo "exit status $?"'`;
    tmux(
      "new-session",
      "-d",
      "-s",
      session,
      "-x",
      "120",
      "-y",
      "60",
      command,
      ";",
      "set-option",
      "-t",
      session,
      "remain-on-exit",
      "on",
    );
    try {
      let screen = "";
      for (let i = 0; i < 300 && !screen.includes("Waiting for you to approve"); i++) {
        await new Promise((r) => setTimeout(r, 100));
        screen = tmux("capture-pane", "-p", "-t", session);
      }
      expect(screen).toContain("and enter the code:");
      // The QR code: rows of half and full blocks, read back as a light-on-dark terminal shows
      // them, and decoded by zbarimg: it is the address with the code, as printed above it.
      const rows = screen.split("\n").filter((line) => /^[▀▄█ ]{20,}$/.test(line.trimEnd()));
      expect(rows.length).toBeGreaterThan(10);
      const printed = /Or open this address, which carries the code:\n {2}(\S+)\n/.exec(screen)?.[1];
      expect(printed).toContain("user_code=");
      const image = join(dir.path, "terminal-qr.pbm");
      writeFileSync(image, terminalBlocksAsImage(rows));
      expect(
        execFileSync("zbarimg", ["--quiet", "--raw", image], {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "ignore"],
        }).trim(),
      ).toBe(printed);
      tmux("send-keys", "-t", session, "C-c");
      let after = "";
      for (let i = 0; i < 100 && !after.includes("exit status"); i++) {
        await new Promise((r) => setTimeout(r, 100));
        after = tmux("capture-pane", "-p", "-t", session);
      }
      expect(after).toContain("exit status 130");
      expect(after).toContain("gatehouse login: cancelled; nothing was stored");
    } finally {
      tmux("kill-session", "-t", session);
    }
  }, 60_000);

  it("--help describes --device, and --device with --print-url is a usage error", async () => {
    const help = await headless(["login", "--help"], join(dir.path, "help")).done;
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("--device");
    expect(help.stdout).toContain("QR code");
    const both = await startHeadless(
      ["login", "--device", "--print-url", "http://127.0.0.1:9/mcp"],
      join(dir.path, "help"),
    ).done;
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--print-url is for the browser login");
  }, 60_000);
});

describe("gatehouse login --device against gatehouse demo, allowed on its /device page in Chromium", () => {
  let demo: RunningCli<DemoReady> | undefined;
  afterAll(async () => {
    await demo?.stop();
  });

  it("sign in from verification_uri_complete, check the code, Allow: the CLI stores the tokens and a headless fetch reads the notes; fetch --device steps up to notes:write the same way", async () => {
    demo = await startDemo(join(dir.path, "demo-data"), ["--no-request-log"]);
    const { issuer, resource, notes, username, password } = demo.ready;
    const config = join(dir.path, "gatehouse");
    const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
    /** On the person's other device: the code is filled in; check it, then Allow. */
    const allow = async (prompt: { complete: URL; userCode: string }, signIn: boolean, shot?: string) => {
      const page = await context.newPage();
      await page.goto(prompt.complete.href);
      if (signIn) {
        // Signed-in users only: the login page first, which returns to /device with the code.
        await expect.poll(() => new URL(page.url()).pathname).toBe("/login");
        await page.locator("#username").fill(username);
        await page.locator("#password").fill(password);
        await Promise.all([
          page.waitForURL((u) => u.pathname === "/device"),
          page.getByRole("button", { name: "Sign in" }).click(),
        ]);
      }
      expect(await page.getByTestId("user-code-input").inputValue()).toBe(prompt.userCode);
      await page.getByRole("button", { name: "Continue" }).click();
      // The code the CLI printed is the one shown for checking.
      await expect.poll(() => page.getByTestId("user-code").textContent()).toBe(prompt.userCode);
      const asked = await page.getByTestId("requested-scopes").innerText();
      if (shot) await page.screenshot({ path: shot, fullPage: true });
      await page.getByRole("button", { name: "Allow" }).click();
      await expect.poll(() => page.getByTestId("device-done").textContent()).toContain("You allowed");
      await page.close();
      return asked;
    };
    try {
      const login = headless(["login", "--device", notes], config);
      const prompt = await printedPrompt(login);
      expect(prompt.uri).toBe(`${issuer}/device`);
      await allow(prompt, true, "/tmp/device-login-gatehouse-confirm.png");
      const result = await login.done;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain(`Logged in to ${resource} via ${issuer}`);
      const fetched = await headless(["fetch", notes], config).done;
      expect(fetched.code, fetched.stderr).toBe(0);
      expect(JSON.parse(fetched.stdout)).toBeDefined();

      // Writing needs notes:write: the headless fetch asks for it with --device, prompting on
      // stderr so that stdout carries the response alone.
      const write = headless(
        [
          "fetch",
          "--device",
          "-X",
          "POST",
          "-H",
          "content-type: application/json",
          "-d",
          '{"text":"from a device"}',
          notes,
        ],
        config,
      );
      let stepUp: { complete: URL; userCode: string } | undefined;
      for (let i = 0; i < 300 && !stepUp; i++) {
        const err = write.stderr();
        const userCode = /and enter the code:\n {2}(\S+)\n/.exec(err)?.[1];
        const complete = /which carries the code:\n {2}(\S+)\n/.exec(err)?.[1];
        if (userCode && complete) stepUp = { userCode, complete: new URL(complete) };
        else await new Promise((r) => setTimeout(r, 100));
      }
      expect(stepUp, write.stderr()).toBeDefined();
      expect(await allow(stepUp!, false)).toContain("notes:write");
      const written = await write.done;
      expect(written.code, written.stderr).toBe(0);
      expect(written.stderr).toContain("Requesting more scope");
      expect(JSON.parse(written.stdout)).toMatchObject({ text: "from a device" });
    } finally {
      await context.close();
    }
  }, 120_000);
});
