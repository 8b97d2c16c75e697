/**
 * `gatehouse login` end to end, as a person would use it: real `gatehouse demo` / `gatehouse serve`
 * processes, the built CLI with its encrypted token store in a temporary config directory, and a
 * real Chromium doing the browser part. `BROWSER` names a small script that writes the URL the CLI
 * wants opened to a file; the test reads it and opens it in Playwright.
 *
 * Covered: login with consent, `fetch`, step-up to notes:write with a second consent page showing
 * only the new scope, the admin page listing the CLI's registration, refresh once the access token
 * has expired, and `logout` leaving `status` empty.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNotesResource } from "../../src/demo/notes-resource.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  type CliResult,
  type DemoReady,
  ensureBuilt,
  MAIN,
  ROOT,
  type RunningCli,
  runCli,
  startCli,
  startDemo,
  tempDir,
} from "../cli/helpers.js";
import { launchChromium } from "../support/browser.js";

interface StatusJson {
  tokens: {
    resource: string;
    scope: string | null;
    expires_at: string | null;
    expired: boolean;
    refreshable: boolean;
  }[];
  clients: { issuer: string; client_id: string; source: string }[];
}

let dir: ReturnType<typeof tempDir>;
let browser: Browser;
let browserScript: string;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-login-e2e-");
  browserScript = join(dir.path, "open-url.sh");
  // The CLI runs $BROWSER without a shell, with the URL as its one argument.
  writeFileSync(browserScript, `#!/bin/sh\nprintf '%s\\n' "$1" >> "$GATEHOUSE_TEST_URL_FILE"\n`);
  chmodSync(browserScript, 0o755);
  browser = await launchChromium();
}, 60_000);

/** CLI commands still running (a login waiting for a callback that never came, after a failure). */
const running = new Set<ChildProcess>();

afterAll(async () => {
  for (const child of running) child.kill("SIGKILL");
  await browser?.close();
  dir?.remove();
});

/** One user of the CLI: its own config directory (token store) and file of opened URLs. */
class CliUser {
  readonly configDir: string;
  readonly urlFile: string;
  #seen = 0;

  constructor(name: string) {
    this.configDir = join(dir.path, `${name}-config`);
    this.urlFile = join(dir.path, `${name}-urls.txt`);
    mkdirSync(this.configDir, { recursive: true });
  }

  env(): NodeJS.ProcessEnv {
    return {
      GATEHOUSE_CONFIG_DIR: this.configDir,
      GATEHOUSE_STORE_KEY: "",
      BROWSER: browserScript,
      GATEHOUSE_TEST_URL_FILE: this.urlFile,
      HOME: dir.path,
      XDG_CONFIG_HOME: join(dir.path, "xdg"),
    };
  }

  /** Runs `gatehouse <args>` as this user; killed in afterAll if it is still running then. */
  run(args: string[]): Promise<CliResult> {
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: ROOT,
      env: { ...process.env, GATEHOUSE_DATABASE_URL: "", ...this.env() },
      stdio: ["ignore", "pipe", "pipe"],
    });
    running.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (code) => {
        running.delete(child);
        resolve({ code, stdout, stderr });
      });
    });
  }

  /** The next URL the CLI asked the browser to open; fails if `command` ends first. */
  async nextUrl(command: Promise<CliResult>): Promise<URL> {
    let ended: CliResult | undefined;
    void command.then((r) => {
      ended = r;
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const lines = existsSync(this.urlFile)
        ? readFileSync(this.urlFile, "utf8").split("\n").filter(Boolean)
        : [];
      if (lines.length > this.#seen) return new URL(lines[this.#seen++]!);
      if (ended) {
        throw new Error(
          `the CLI ended (${ended.code}) without opening a browser:\n${ended.stderr}${ended.stdout}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the CLI opened no browser within 30 s");
  }

  async status(): Promise<StatusJson> {
    const result = await this.run(["status", "--json"]);
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as StatusJson;
  }
}

/** Signs in on the login page and approves on the consent page that follows; returns its scope lists. */
async function signInAndApprove(
  context: BrowserContext,
  url: URL,
  who: { username: string; password: string } | undefined,
): Promise<{ requested: string[]; granted: string[] }> {
  const page = await context.newPage();
  await page.goto(url.href);
  if (who) {
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.getByLabel("Username").fill(who.username);
    await page.getByLabel("Password").fill(who.password);
    await page.getByRole("button", { name: "Sign in" }).click();
  }
  await page.waitForURL((u) => u.pathname === "/consent");
  const requested = await page
    .locator('[data-testid="requested-scopes"] [data-scope]')
    .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope") ?? ""));
  const granted = await page
    .locator('[data-testid="granted-scopes"] [data-scope]')
    .evaluateAll((els) => els.map((e) => e.getAttribute("data-scope") ?? ""));
  await page.getByRole("button", { name: "Allow" }).click();
  // The CLI's one-shot loopback listener receives the redirect.
  await page.waitForURL((u) => u.hostname === "127.0.0.1" && u.searchParams.has("code"), { timeout: 15_000 });
  await page.close();
  return { requested, granted };
}

describe("gatehouse login against gatehouse demo, in Chromium", () => {
  let demo: RunningCli<DemoReady> | undefined;
  afterAll(async () => {
    await demo?.stop();
  });

  it("login + consent, fetch, step-up to notes:write with only the new scope on the second consent, logout", async () => {
    // 30 s, as the demo's walk-through suggests to watch a refresh: at or under the client's
    // default 30 s refresh lead, which is therefore scaled to a third of the lifetime.
    demo = await startDemo(join(dir.path, "demo-data"), ["--no-request-log", "--access-token-ttl", "30"]);
    const { issuer, resource, notes, username, password } = demo.ready;
    const user = new CliUser("demo");
    const context = await browser.newContext();

    // 1. Login: GET /notes needs notes:read, so that is what the CLI asks for first.
    const login = user.run(["login", notes]);
    const first = await user.nextUrl(login);
    expect(`${first.origin}${first.pathname}`).toBe(`${issuer}/authorize`);
    expect(first.searchParams.get("scope")?.split(" ")).toContain("notes:read");
    expect(first.searchParams.get("scope")?.split(" ")).not.toContain("notes:write");
    expect(first.searchParams.get("code_challenge_method")).toBe("S256");
    expect(first.searchParams.get("resource")).toBe(resource);
    const firstConsent = await signInAndApprove(context, first, { username, password });
    expect(firstConsent.requested).toContain("notes:read");
    expect(firstConsent.granted).toEqual([]);
    const loggedIn = await login;
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    expect(loggedIn.stdout).toContain(`Logged in to ${resource} via ${issuer}`);

    // 2. fetch with the stored token, no browser, and no refresh of a token a moment old.
    const list = await user.run(["fetch", notes]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toBeDefined();
    expect(list.stderr).not.toContain("Refreshed the access token");

    // 3. POST needs notes:write: 403 insufficient_scope → step-up → a consent page for the new scope only.
    const write = user.run([
      "fetch",
      "-X",
      "POST",
      "-H",
      "content-type: application/json",
      "-d",
      '{"text":"from the e2e test"}',
      notes,
    ]);
    const second = await user.nextUrl(write);
    expect(second.searchParams.get("scope")?.split(" ")).toContain("notes:write");
    const stepUp = await signInAndApprove(context, second, undefined); // still signed in: straight to consent
    expect(stepUp.requested).toEqual(["notes:write"]);
    expect(stepUp.granted).toContain("notes:read");
    const written = await write;
    expect(written.code, written.stderr).toBe(0);
    expect(written.stderr).toContain("Requesting more scope");
    expect(written.stdout).toContain("from the e2e test");
    const after = await user.run(["fetch", notes]);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toContain("from the e2e test");

    // 4. The demo user is an administrator: the admin page lists the CLI's registration and grants.
    const admin = await context.newPage();
    const adminResponse = await admin.goto(`${issuer}/admin`);
    expect(adminResponse?.status()).toBe(200);
    const status = await user.status();
    const clientId = status.clients.find((c) => c.issuer === issuer)?.client_id;
    expect(clientId).toBeDefined();
    const row = admin.locator(`[data-client-id="${clientId}"]`);
    await expect(row.locator('[data-testid="client-source"]').textContent()).resolves.toBe(
      "dynamic registration",
    );
    await expect(
      admin.locator('[data-testid="grant-row"][data-status="active"]').count(),
    ).resolves.toBeGreaterThan(0);
    await admin.screenshot({ path: "/tmp/admin-demo.png", fullPage: true });
    await context.close();

    // 4b. A restart on the same ports keeps the notes, as it keeps the users, clients and grants.
    const ports = ["--port", String(demo.ready.port), "--resource-port", String(demo.ready.resourcePort)];
    await demo.stop();
    demo = await startDemo(join(dir.path, "demo-data"), ["--no-request-log", ...ports]);
    const kept = await user.run(["fetch", notes]);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).toContain("from the e2e test");

    // 5. logout forgets the tokens; status then shows none.
    expect(status.tokens.map((t) => t.resource)).toContain(resource);
    const logout = await user.run(["logout"]);
    expect(logout.code, logout.stderr).toBe(0);
    expect(logout.stdout).toMatch(/^Forgot \d+ token set\(s\)\./);
    expect((await user.status()).tokens).toEqual([]);
    const human = await user.run(["status"]);
    expect(human.stdout).toContain("Not logged in to any resource.");
  }, 180_000);
});

describe("refresh after the access token expires (gatehouse serve with a 10 s access token)", () => {
  let serve: RunningCli<{ issuer: string }> | undefined;
  let notesServer: ListeningServer | undefined;
  afterAll(async () => {
    await serve?.stop();
    await notesServer?.close();
  });

  it("fetch after expiry refreshes the token and succeeds, without a browser", async () => {
    const data = join(dir.path, "serve-data");
    let notesHandler: ((request: Request) => Promise<Response>) | undefined;
    notesServer = await listen(async (request) =>
      notesHandler ? notesHandler(request) : new Response("starting", { status: 503 }),
    );
    const resource = notesServer.url;
    const password = "a long password for the refresh test";
    const added = await runCli(["users", "add", "carol", "--password-stdin", "--data", data], {
      input: `${password}\n`,
    });
    expect(added.code, added.stderr).toBe(0);
    serve = await startCli<{ issuer: string }>([
      "serve",
      "--insecure-loopback",
      "--port",
      "0",
      "--data",
      data,
      "--resource",
      resource,
      "--scopes",
      "notes:read notes:write",
      "--access-token-ttl",
      "10",
      "--json",
      "--no-request-log",
    ]);
    const { issuer } = serve.ready;
    notesHandler = createNotesResource({ resource, issuer, jwksUri: `${issuer}/jwks.json` }).fetch;

    const user = new CliUser("carol");
    const context = await browser.newContext();
    const login = user.run(["login", `${resource}/notes`]);
    await signInAndApprove(context, await user.nextUrl(login), { username: "carol", password });
    const loggedIn = await login;
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    await context.close();

    const [stored] = (await user.status()).tokens;
    expect(stored?.refreshable).toBe(true);
    const expiresAt = Date.parse(stored!.expires_at!);
    // Wait for the access token to expire for real (its lifetime is 10 s).
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 500));
    expect((await user.status()).tokens[0]?.expired).toBe(true);

    const urlsBefore = existsSync(user.urlFile) ? readFileSync(user.urlFile, "utf8") : "";
    const fetched = await user.run(["fetch", `${resource}/notes`]);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(fetched.stderr).toContain("Refreshed the access token");
    // No browser was needed.
    expect(existsSync(user.urlFile) ? readFileSync(user.urlFile, "utf8") : "").toBe(urlsBefore);
    const [renewed] = (await user.status()).tokens;
    expect(renewed?.expired).toBe(false);
    expect(Date.parse(renewed!.expires_at!)).toBeGreaterThan(expiresAt);
  }, 120_000);
});
