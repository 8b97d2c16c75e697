/**
 * Issue 26: the package as a stranger gets it. `npm pack` this checkout, install the tarball into
 * a clean directory (its dependencies from the npm registry, through npm's cache), then use only
 * what that install put there: the `gatehouse` command from node_modules/.bin (and through
 * `npx gatehouse`, as README says a project runs it), and the library by its package name
 * `gatehouse-auth` in a small resource server. `serve` runs on a temporary data directory;
 * `login --device` logs in against it (Chromium signs in and allows on its /device page) and
 * `fetch` reads the resource with the stored token.
 *
 * One shortcut, and only for time: the tarball is installed with --ignore-scripts, and the native
 * SQLite binding of the same better-sqlite3 version is copied from this checkout's install, since
 * compiling it here (no prebuilt binary is reachable) takes a minute and a half of both cores.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { type CliResult, ensureBuilt, ROOT, tempDir } from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let project: string;
let browser: Browser | undefined;
const running = new Set<ChildProcess>();

/** The resource server of the test, written against the installed package only. */
const RESOURCE_SCRIPT = `
import { createInterface } from "node:readline";
import { listen } from "gatehouse-auth/node";
import { createResourceServer, jwtVerifier } from "gatehouse-auth/resource-server";

// The resource URI must exist before the authorization server is told about it: listen first.
let handler = async () => new Response(null, { status: 503 });
const server = await listen((request) => handler(request), { port: 0 });
console.log(server.url);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const issuer = (await lines.next()).value;
const metadata = await (await fetch(issuer + "/.well-known/oauth-authorization-server")).json();
const gate = createResourceServer({
  resource: server.url,
  authorizationServers: [issuer],
  scopesSupported: ["notes:read"],
  verifier: jwtVerifier({ issuer, audience: server.url, jwksUri: metadata.jwks_uri }),
});
const read = gate.requireBearer({ scopes: ["notes:read"] });
handler = async (request) =>
  gate.handles(request)
    ? gate.metadataResponse(request)
    : read(request, async (_request, auth) => Response.json({ owner: auth.subject, notes: [] }));
console.log("ready");
`;

beforeAll(() => {
  ensureBuilt();
  dir = tempDir("gatehouse-packed-");
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", dir.path], { cwd: ROOT, encoding: "utf8" }),
  ) as { filename: string; name: string }[];
  expect(packed[0]?.name).toBe("gatehouse-auth");
  project = join(dir.path, "project");
  mkdirSync(project);
  writeFileSync(join(project, "package.json"), JSON.stringify({ private: true, type: "module" }));
  execFileSync(
    "npm",
    [
      "install",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      join(dir.path, packed[0]!.filename),
    ],
    { cwd: project, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
  const version = (path: string) =>
    (JSON.parse(readFileSync(join(path, "package.json"), "utf8")) as { version: string }).version;
  const ours = join(ROOT, "node_modules/better-sqlite3");
  const theirs = join(project, "node_modules/better-sqlite3");
  expect(version(theirs)).toBe(version(ours));
  mkdirSync(join(theirs, "build/Release"), { recursive: true });
  copyFileSync(
    join(ours, "build/Release/better_sqlite3.node"),
    join(theirs, "build/Release/better_sqlite3.node"),
  );
  writeFileSync(join(project, "resource.mjs"), RESOURCE_SCRIPT);
}, 180_000);

afterAll(async () => {
  for (const child of running) if (child.exitCode === null) child.kill("SIGKILL");
  await browser?.close();
  dir?.remove();
});

/** The `gatehouse` command the install put in node_modules/.bin (what `npx gatehouse` runs there). */
function installedBin(): string {
  return join(project, "node_modules", ".bin", "gatehouse");
}

/** The environment of a machine with nothing of this checkout: the installed bin first on PATH. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const { DISPLAY: _d, WAYLAND_DISPLAY: _w, BROWSER: _b, ...inherited } = process.env;
  return {
    ...inherited,
    PATH: `${join(project, "node_modules/.bin")}:${process.env.PATH}`,
    GATEHOUSE_DATABASE_URL: "",
    GATEHOUSE_STORE_KEY_LOCATION: "file",
    GATEHOUSE_CONFIG_DIR: join(dir.path, "config"),
    ...extra,
  };
}

/** Runs `command args` in the clean project (never in this checkout) and collects its output. */
function spawnIn(
  command: string,
  args: string[],
  input?: string,
): { child: ChildProcess; done: Promise<CliResult> } {
  const child = spawn(command, args, { cwd: project, env: env(), stdio: ["pipe", "pipe", "pipe"] });
  running.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  if (input === undefined) child.stdin!.end();
  else child.stdin!.end(input);
  const done = new Promise<CliResult>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
  return { child, done };
}

/** The first stdout line of a long-running child. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => {
      lines.close();
      resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`exited (${code}) before printing a line`)));
  });
}

describe("the packed package installed in a clean directory", () => {
  it("installs the gatehouse command and nothing from this checkout", () => {
    const bin = readdirSync(join(project, "node_modules/.bin"));
    expect(bin).toContain("gatehouse");
    const installed = JSON.parse(
      readFileSync(join(project, "node_modules/gatehouse-auth/package.json"), "utf8"),
    );
    expect(installed).toMatchObject({ name: "gatehouse-auth", bin: { gatehouse: "dist/cli/main.js" } });
  });

  it("does not install the MCP conformance harness (a test tool of this checkout, not the package)", () => {
    const installed = join(project, "node_modules/gatehouse-auth");
    expect(existsSync(join(installed, "dist/cli/main.js"))).toBe(true);
    expect(existsSync(join(installed, "dist/conformance"))).toBe(false);
  });

  it("gatehouse --help, and npx gatehouse --help in the project, print the commands", async () => {
    const help = await spawnIn(installedBin(), ["--help"]).done;
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^Usage: gatehouse <command>/);
    for (const command of ["serve", "users", "login", "fetch"])
      expect(help.stdout).toContain(`  ${command} `);
    const viaNpx = await spawnIn("npx", ["--offline", "gatehouse", "--help"]).done;
    expect(viaNpx.code, viaNpx.stderr).toBe(0);
    expect(viaNpx.stdout).toBe(help.stdout);
  }, 60_000);

  it("serve on a temporary data directory answers /health and its metadata; login --device and fetch work against it", async () => {
    const data = join(dir.path, "data");
    const added = await spawnIn(
      installedBin(),
      ["users", "add", "alice", "--password-stdin", "--data", data],
      "correct horse battery\n",
    ).done;
    expect(added.code, added.stderr).toBe(0);

    // Its stdin stays open: the issuer goes there once the authorization server is up.
    const resourceChild = spawn("node", ["resource.mjs"], {
      cwd: project,
      env: env(),
      stdio: ["pipe", "pipe", "inherit"],
    });
    running.add(resourceChild);
    const resourceUrl = await firstLine(resourceChild);

    const serve = spawn(
      installedBin(),
      [
        "serve",
        "--insecure-loopback",
        "--port",
        "0",
        "--data",
        data,
        "--resource",
        resourceUrl,
        "--scopes",
        "notes:read",
        "--json",
        "--no-request-log",
      ],
      { cwd: project, env: env(), stdio: ["ignore", "pipe", "pipe"] },
    );
    running.add(serve);
    const ready = JSON.parse(await firstLine(serve)) as { event: string; issuer: string };
    expect(ready.event).toBe("ready");
    const { issuer } = ready;

    const health = await fetch(`${issuer}/health`);
    expect(health.status).toBe(200);
    const metadata = (await (
      await fetch(`${issuer}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, unknown>;
    expect(metadata.issuer).toBe(issuer);
    expect(metadata.code_challenge_methods_supported).toEqual(["S256"]);

    resourceChild.stdin!.write(`${issuer}\n`);
    const resourceReady = await new Promise<string>((resolve) =>
      createInterface({ input: resourceChild.stdout! }).once("line", resolve),
    );
    expect(resourceReady).toBe("ready");

    browser = await launchChromium();
    const login = spawnIn(installedBin(), ["login", "--device", resourceUrl]);
    let out = "";
    login.child.stdout!.on("data", (c: string) => {
      out += c;
    });
    let complete: string | undefined;
    for (let i = 0; i < 300 && !complete; i++) {
      complete = /Or open this address, which carries the code:\n {2}(\S+)\n/.exec(out)?.[1];
      if (!complete) await new Promise((r) => setTimeout(r, 100));
    }
    expect(complete, out).toBeDefined();
    const page = await browser.newPage();
    await page.goto(complete!);
    await expect.poll(() => new URL(page.url()).pathname).toBe("/login");
    await page.locator("#username").fill("alice");
    await page.locator("#password").fill("correct horse battery");
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/device"),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByRole("button", { name: "Allow" }).click();
    await expect.poll(() => page.getByTestId("device-done").textContent()).toContain("You allowed");
    const loggedIn = await login.done;
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    expect(loggedIn.stdout).toContain(`via ${issuer}`);

    const fetched = await spawnIn(installedBin(), ["fetch", resourceUrl]).done;
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(JSON.parse(fetched.stdout)).toMatchObject({ notes: [] });
    serve.kill("SIGTERM");
    resourceChild.kill("SIGTERM");
  }, 120_000);
});
