/**
 * External check: the MCP conformance tool's authorization-server scenarios against
 * `gatehouse demo` (`authorization-server-metadata-endpoint`, then `authorization-code-grant`, which
 * reuses the metadata the first one fetched). The tool needs Node 22 (scripts/node22.sh) and is
 * installed, pinned, into .cache by scripts/conformance-tool.sh; it prints
 * the authorization URL and waits for the redirect on its own loopback callback server, so the
 * browser step (login, consent) is driven here with Chromium. Any FAILURE, WARNING or SKIPPED
 * check fails the test.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DemoReady, ensureBuilt, ROOT, type RunningCli, startDemo, tempDir } from "../cli/helpers.js";
import { launchChromium } from "../support/browser.js";
import { freePort } from "../support/free-port.js";

interface Check {
  id: string;
  name: string;
  status: "SUCCESS" | "FAILURE" | "WARNING" | "SKIPPED" | "INFO";
  errorMessage?: string;
}

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;
let browser: Browser;
let node22: string;
/** The tool's entry point: not a devDependency (it needs Node 22), installed pinned into .cache. */
let tool: string;
let toolProcess: ChildProcess | undefined;

beforeAll(async () => {
  ensureBuilt();
  try {
    node22 = execFileSync("bash", [join(ROOT, "scripts/node22.sh")], { cwd: ROOT, encoding: "utf8" }).trim();
  } catch (cause) {
    throw new Error("the conformance tool needs Node 22 and scripts/node22.sh could not provide it", {
      cause,
    });
  }
  tool = execFileSync("bash", [join(ROOT, "scripts/conformance-tool.sh")], {
    cwd: ROOT,
    encoding: "utf8",
  }).trim();
  dir = tempDir("gatehouse-conformance-as-");
  demo = await startDemo(dir.path, ["--no-request-log"]);
  browser = await launchChromium();
});
afterAll(async () => {
  if (toolProcess && toolProcess.exitCode === null) toolProcess.kill("SIGKILL");
  await browser?.close();
  await demo?.stop();
  dir?.remove();
});

function checksIn(outputDir: string): { scenario: string; checks: Check[] }[] {
  const found: { scenario: string; checks: Check[] }[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name === "checks.json")
        found.push({
          scenario: d.slice(outputDir.length + 1),
          checks: JSON.parse(readFileSync(p, "utf8")) as Check[],
        });
    }
  };
  walk(outputDir);
  return found;
}

/** Logs in as the demo user and approves consent for the authorization URL the tool printed. */
async function completeInBrowser(authorizationUrl: string, callbackPrefix: string): Promise<void> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(authorizationUrl);
    await page.fill("#username", demo.ready.username);
    await page.fill("#password", demo.ready.password);
    await Promise.all([
      page.waitForURL((u) => !u.pathname.endsWith("/login")),
      page.click("button[type=submit]"),
    ]);
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(callbackPrefix)),
      page.click('button[name="decision"][value="approve"]'),
    ]);
  } finally {
    await context.close();
  }
}

describe("MCP conformance tool: authorization server scenarios against gatehouse demo", () => {
  it("passes authorization-server-metadata-endpoint and authorization-code-grant with no failure or warning", async () => {
    const port = await freePort();
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    const registration = await fetch(`${demo.ready.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "MCP conformance tool",
        redirect_uris: [redirectUri],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code"],
        response_types: ["code"],
      }),
    });
    expect(registration.status).toBe(201);
    const { client_id } = (await registration.json()) as { client_id: string };
    const outputDir = join(dir.path, "results");

    const child = spawn(
      node22,
      [
        tool,
        "authorization",
        "--url",
        demo.ready.issuer,
        "--client-id",
        client_id,
        "--resource",
        demo.ready.resource,
        "--port",
        String(port),
        "-o",
        outputDir,
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    toolProcess = child;
    let stdout = "";
    let stderr = "";
    let browserStep: Promise<void> | undefined;
    child.stderr?.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
      if (browserStep) return;
      // The tool prints the authorization URL on a line of its own and waits for the callback.
      const line = stdout.split("\n").find((l) => l.startsWith(`${demo.ready.issuer}/authorize?`));
      if (line) browserStep = completeInBrowser(line.trim(), redirectUri);
    });
    const exitCode = await new Promise<number | null>((resolve) =>
      child.once("exit", (code) => resolve(code)),
    );
    if (browserStep) await browserStep;

    const results = checksIn(outputDir);
    const scenarios = results.map((r) => r.scenario).join(" ");
    expect(scenarios).toContain("authorization-server-metadata-endpoint");
    expect(scenarios).toContain("authorization-code-grant");
    const notPassed = results.flatMap((r) =>
      r.checks
        .filter((c) => c.status !== "SUCCESS")
        .map((c) => `${r.scenario}: ${c.id} ${c.status} ${c.errorMessage ?? ""}`),
    );
    expect(notPassed, `${stdout}\n${stderr}`).toEqual([]);
    const ids = results.flatMap((r) => r.checks.map((c) => c.id));
    expect(ids).toEqual(
      expect.arrayContaining([
        "authorization-server-metadata",
        "authorization-server-metadata-cimd",
        "authorization-code-grant",
      ]),
    );
    if (process.env.GATEHOUSE_CONFORMANCE_VERBOSE) process.stdout.write(stdout);
    expect(exitCode, stdout).toBe(0);
  }, 120_000);
});
