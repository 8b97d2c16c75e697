/**
 * Two instances of one client in one browser session (issue 21): two processes running
 * Gatehouse's own client (the built gatehouse/client, two-instances-client.mjs), each with its own
 * token store and the one pre-registered client id, as two terminals of one CLI or two windows of
 * one app are, authorize through the same Chromium session against `gatehouse demo` (its notes
 * resource is co-hosted and reports insufficient_scope to the authorization server). Both then
 * refresh without a browser once their access tokens expired, and a step-up by one of them retires
 * its own older grant, never the other's (superseded-grants.ts `supersededInSignIn`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { type DemoReady, ensureBuilt, type RunningCli, runCli, startDemo, tempDir } from "../cli/helpers.js";
import { launchChromium } from "../support/browser.js";
import { openDatabase } from "../support/instances.js";

const CLIENT_ID = "shared-cli";
const CHILD = fileURLToPath(new URL("./two-instances-client.mjs", import.meta.url));

let dir: ReturnType<typeof tempDir>;
let browser: Browser;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-two-instances-");
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  for (const child of running) child.kill("SIGKILL");
  await browser?.close();
  dir?.remove();
});

type Message =
  | { type: "open"; url: string }
  | { type: "event"; event: string }
  | { type: "result"; status: number; body: string };

/** One client process: commands in, JSON lines out. */
class Instance {
  readonly #child: ChildProcess;
  readonly #queue: Message[] = [];
  #wake: (() => void) | undefined;
  #stderr = "";

  constructor(notes: string, issuer: string) {
    this.#child = spawn(process.execPath, [CHILD, notes, issuer, CLIENT_ID], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    running.add(this.#child);
    this.#child.once("exit", () => running.delete(this.#child));
    this.#child.stderr!.setEncoding("utf8").on("data", (c: string) => {
      this.#stderr += c;
    });
    createInterface({ input: this.#child.stdout! }).on("line", (line) => {
      this.#queue.push(JSON.parse(line) as Message);
      this.#wake?.();
    });
  }

  send(command: string): void {
    this.#child.stdin!.write(`${command}\n`);
  }

  /** The next message, within 30 s. */
  async next(): Promise<Message> {
    const deadline = Date.now() + 30_000;
    while (this.#queue.length === 0) {
      if (Date.now() > deadline)
        throw new Error(`no answer from the client process within 30 s\n${this.#stderr}`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 200);
      });
    }
    return this.#queue.shift()!;
  }

  /** Runs `command` and collects its events up to its result; `onOpen` answers a browser step. */
  async run(
    command: string,
    onOpen?: (url: URL) => Promise<void>,
  ): Promise<{ events: string[]; status: number; body: string }> {
    this.send(command);
    const events: string[] = [];
    for (;;) {
      const message = await this.next();
      if (message.type === "result") return { events, status: message.status, body: message.body };
      if (message.type === "event") events.push(message.event);
      if (message.type === "open") {
        if (!onOpen) {
          this.#child.kill("SIGKILL");
          throw new Error(`"${command}" needed the browser again: a refresh was refused`);
        }
        await onOpen(new URL(message.url));
      }
    }
  }

  close(): void {
    this.#child.stdin!.end();
  }
}

/** Approves the consent page `url` leads to in `context` (signing in first when `who` is given). */
async function consent(
  context: BrowserContext,
  url: URL,
  who?: { username: string; password: string },
): Promise<void> {
  const page = await context.newPage();
  await page.goto(url.href);
  if (who) {
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.getByLabel("Username").fill(who.username);
    await page.getByLabel("Password").fill(who.password);
    await page.getByRole("button", { name: "Sign in" }).click();
  }
  await page.waitForURL((u) => u.pathname === "/consent");
  await page.getByRole("button", { name: "Allow" }).click();
  await page.waitForURL((u) => u.hostname === "127.0.0.1" && u.searchParams.has("code"), { timeout: 15_000 });
  await page.close();
}

/** Waits until every access token the instances hold has expired (the demo runs with 10 s ones). */
async function waitForExpiry(): Promise<void> {
  await new Promise((r) => setTimeout(r, 11_000));
}

describe("two instances of one client in one browser session (gatehouse demo, Chromium)", () => {
  let demo: RunningCli<DemoReady> | undefined;
  let store: AuthorizationStore | undefined;
  afterAll(async () => {
    await store?.close();
    await demo?.stop();
  });

  it("both log in, both refresh without a browser, and one's step-up retires only its own older grant", async () => {
    const dataDir = join(dir.path, "demo-data");
    demo = await startDemo(dataDir, ["--no-request-log", "--access-token-ttl", "10"]);
    const { issuer, notes, username, password } = demo.ready;
    const added = await runCli([
      "clients",
      "add",
      "--name",
      "Shared CLI",
      "--client-id",
      CLIENT_ID,
      "--redirect-uri",
      "http://127.0.0.1/callback",
      "--data",
      dataDir,
    ]);
    expect(added.code, added.stderr).toBe(0);
    const [one, two] = [new Instance(notes, issuer), new Instance(notes, issuer)];
    const context = await browser.newContext();

    // One browser session: the first instance signs the browser in, the second finds it signed in.
    const first = await one.run("get", (url) => consent(context, url, { username, password }));
    expect(first.status).toBe(200);
    expect(first.events).toContain("authorized");
    const second = await two.run("get", (url) => consent(context, url));
    expect(second.status).toBe(200);
    expect(second.events).toContain("authorized");

    await waitForExpiry();
    for (const instance of [one, two]) {
      const listed = await instance.run("get");
      expect(listed.status).toBe(200);
      expect(listed.events).toContain("refreshed");
    }

    // The first instance writes a note: 403 insufficient_scope (reported to the authorization
    // server by the co-hosted gate), then a step-up in the same browser session.
    const written = await one.run("post one", (url) => consent(context, url));
    expect(written.status).toBe(201);
    expect(written.events).toContain("authorized");
    await context.close();

    store = await openDatabase({ kind: "sqlite", dataDir });
    const grants = await store.listGrants({ clientId: CLIENT_ID });
    const scopesOf = (active: boolean) =>
      grants
        .filter((g) => (g.revokedAt === undefined) === active)
        .map((g) => [...g.scopes].filter((s) => s.startsWith("notes:")).sort());
    // The first instance's login grant is retired; the second's (same scopes) is not.
    expect(scopesOf(false)).toEqual([["notes:read"]]);
    expect(scopesOf(true).sort()).toEqual([["notes:read"], ["notes:read", "notes:write"]]);

    await waitForExpiry();
    for (const instance of [two, one]) {
      const listed = await instance.run("get");
      expect(listed.status).toBe(200);
      expect(listed.events).toContain("refreshed");
      expect(listed.body).toContain('"one"');
    }
    one.close();
    two.close();
  }, 180_000);
});
