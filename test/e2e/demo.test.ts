/**
 * `gatehouse demo` (what `npm start` runs) as a real process on free ports: the JSON ready line,
 * health, metadata, the notes resource's 401 challenge pointing at its metadata, and the demo user
 * whose password is reset (and printed) on every start.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyPassword } from "../../src/authorization-server/core/password.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import {
  type DemoReady,
  ensureBuilt,
  MAIN,
  ROOT,
  type RunningCli,
  runCli,
  startDemo,
  tempDir,
} from "../cli/helpers.js";

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-demo-");
  demo = await startDemo(dir.path);
});
afterAll(async () => {
  await demo?.stop();
  dir?.remove();
});

describe("gatehouse demo", () => {
  it("prints exactly one JSON line with the real ports", () => {
    const { ready } = demo;
    expect(ready.issuer).toBe(`http://localhost:${ready.port}`);
    // The resource identifier is the URL a user calls (RFC 9728 §3.3), the notes URL.
    expect(ready.resource).toBe(`http://localhost:${ready.resourcePort}/notes`);
    expect(ready.notes).toBe(ready.resource);
    expect(ready.port).toBeGreaterThan(0);
    expect(ready.resourcePort).toBeGreaterThan(0);
    expect(ready.username).toBe("demo");
    expect(ready.password.length).toBeGreaterThanOrEqual(16);
    expect(demo.stdout().trim().split("\n")).toHaveLength(1);
    // Development mode is said loudly.
    expect(demo.stderr()).toContain("INSECURE");
  });

  it("names the admin page, the account page and the access-token lifetime in the JSON line", async () => {
    const { ready } = demo;
    expect(ready.admin).toBe(`${ready.issuer}/admin`);
    expect(ready.account).toBe(`${ready.issuer}/account`);
    expect(ready.accessTokenTtlSeconds).toBe(300);
    // The admin page is really there: without a session it sends the browser to sign in first.
    const admin = await fetch(ready.admin, { redirect: "manual" });
    expect(admin.status).toBe(303);
    expect(new URL(admin.headers.get("location") ?? "", ready.issuer).pathname).toBe("/login");
  });

  it("refuses an access-token lifetime under 10 seconds as a usage error", async () => {
    const result = await runCli(["demo", "--access-token-ttl", "5", "--data", dir.path]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--access-token-ttl must be at least 10 seconds");
  });

  it("answers /health and serves metadata for its issuer, with the demo scopes and registration", async () => {
    const health = await fetch(`${demo.ready.issuer}/health`);
    expect(health.status).toBe(200);
    const res = await fetch(`${demo.ready.issuer}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    const metadata = (await res.json()) as Record<string, unknown>;
    expect(metadata.issuer).toBe(demo.ready.issuer);
    expect(metadata.scopes_supported).toEqual(
      expect.arrayContaining(["notes:read", "notes:write", "offline_access"]),
    );
    expect(metadata.code_challenge_methods_supported).toEqual(["S256"]);
    expect(metadata.registration_endpoint).toBe(`${demo.ready.issuer}/register`);
    expect(metadata.client_id_metadata_document_supported).toBe(true);
    expect(metadata.authorization_response_iss_parameter_supported).toBe(true);
  });

  it("protects GET /notes with a 401 whose challenge names the resource metadata", async () => {
    const res = await fetch(demo.ready.notes);
    expect(res.status).toBe(401);
    const header = res.headers.get("www-authenticate") ?? "";
    const challenge = parseWWWAuthenticate(header).find((c) => c.scheme.toLowerCase() === "bearer");
    expect(challenge, header).toBeDefined();
    const metadataUrl = challenge!.params.resource_metadata;
    // RFC 9728 §3.1: the well-known string goes between the host and the resource's path.
    expect(metadataUrl).toBe(
      `http://localhost:${demo.ready.resourcePort}/.well-known/oauth-protected-resource/notes`,
    );
    const prm = (await (await fetch(metadataUrl!)).json()) as {
      resource: string;
      authorization_servers: string[];
    };
    expect(prm.resource).toBe(demo.ready.resource);
    expect(prm.authorization_servers).toEqual([demo.ready.issuer]);
    const bad = await fetch(demo.ready.notes, {
      headers: { authorization: "Bearer not-a-token" },
    });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("www-authenticate")).toContain('error="invalid_token"');
  });

  it("agrees with gatehouse check: the notes URL's metadata names that URL, only the http warnings remain", async () => {
    const result = await runCli(["check", demo.ready.notes, "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as { findings: { rule: string; outcome: string }[] };
    expect(report.findings.find((f) => f.rule === "prm.resource")?.outcome).toBe("pass");
    const notPassed = report.findings.filter((f) => f.outcome === "warn" || f.outcome === "fail");
    // Plain http is the one thing the development mode is allowed to get wrong.
    expect(notPassed.map((f) => f.rule)).toEqual(["transport.resource-https", "as.https"]);
  });

  it("resets the demo user's password on each start and exits 0 on SIGTERM", async () => {
    const first = demo.ready.password;
    const { code } = await demo.stop();
    expect(code).toBe(0);
    demo = await startDemo(dir.path);
    expect(demo.ready.password).not.toBe(first);
    const { code: code2 } = await demo.stop();
    expect(code2).toBe(0);
    const store = createSqliteStore({ path: join(dir.path, "gatehouse.sqlite") });
    try {
      const users = await store.listUsers();
      expect(users.filter((u) => u.username === "demo")).toHaveLength(1);
      expect(await verifyPassword(demo.ready.password, users[0]!.passwordHash)).toBe(true);
      expect(await verifyPassword(first, users[0]!.passwordHash)).toBe(false);
    } finally {
      await store.close();
    }
  });

  it("prints a walk-through whose gatehouse commands and flags all exist", async () => {
    const data = tempDir("gatehouse-demo-human-");
    const child = spawn(
      process.execPath,
      [MAIN, "demo", "--port", "0", "--resource-port", "0", "--data", data.path, "--access-token-ttl", "30"],
      { cwd: ROOT, env: { ...process.env, GATEHOUSE_DATABASE_URL: "" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    try {
      const text = await new Promise<string>((resolveText, reject) => {
        let stdout = "";
        const timer = setTimeout(() => reject(new Error(`no walk-through within 30 s:\n${stdout}`)), 30_000);
        child.stdout.setEncoding("utf8").on("data", (c: string) => {
          stdout += c;
          if (stdout.includes("Stop with Ctrl-C.")) {
            clearTimeout(timer);
            resolveText(stdout);
          }
        });
        exited.then((code) => reject(new Error(`gatehouse demo exited (${code}) before it was ready`)));
      });
      const issuer = /Authorization server\s+(\S+)/.exec(text)?.[1];
      const resource = /Notes resource\s+(\S+)/.exec(text)?.[1];
      expect(issuer).toMatch(/^http:\/\/localhost:\d+$/);
      expect(text).toContain(`Admin page            ${issuer}/admin`);
      expect(text).toContain(`Your account          ${issuer}/account`);
      expect(text).toContain("Access tokens last    30 s");
      const walk = text.slice(text.indexOf("Try:"));
      const notes = resource;
      expect(notes).toMatch(/^http:\/\/localhost:\d+\/notes$/);
      expect(walk).toMatch(new RegExp(`curl -i ${notes} +# 401 \\+ WWW-Authenticate challenge`));
      // One form of the command, the README's: npx gatehouse.
      expect(walk).toContain(`  npx gatehouse login ${notes}`);
      expect(walk).toContain(
        `npx gatehouse fetch -X POST -H 'content-type: application/json' -d '{"text":"hi"}' ${notes}`,
      );
      expect(walk).toContain("consent shows only the new scope");
      // Every command line printed is one the CLI accepts: each parses its flags (with --help).
      const commands = walk
        .split("\n")
        .map((line) => line.replace(/#.*$/, "").trim())
        .filter((line) => line.includes("gatehouse "));
      expect(commands.every((c) => c.startsWith("npx gatehouse "))).toBe(true);
      expect(commands.map((c) => c.split(" ")[2])).toEqual(["login", "fetch", "fetch", "status", "logout"]);
      for (const command of commands) {
        const [, , name, ...rest] = command.split(" ");
        const flags = rest.filter((a) => a.startsWith("-"));
        const checked = await runCli([
          name!,
          ...flags.flatMap((f) => (f.startsWith("--") ? [f] : [])),
          "--help",
        ]);
        expect(checked.code, `${command}: ${checked.stderr}`).toBe(0);
      }
      // The short flags are the ones `gatehouse fetch --help` documents.
      const fetchHelp = (await runCli(["fetch", "--help"])).stdout;
      for (const short of ["-X", "-H", "-d"]) expect(fetchHelp).toContain(`${short}, --`);
    } finally {
      child.kill("SIGTERM");
      await exited;
      data.remove();
    }
  });
});
