/**
 * mcp-remote 0.15.1 (pinned in package.json), the stdio-to-HTTP proxy desktop hosts run for remote
 * servers, driven over stdio as a host drives it (the official SDK v1 `StdioClientTransport` and
 * `Client`), against Gatehouse's authorization server and the notes MCP server behind Gatehouse's
 * gate (harness.ts). Its browser step goes through its own opener to a fake `xdg-open`/`$BROWSER`
 * that hands the URL to a real Chromium (browser-opener.ts), which signs in and approves consent
 * and lands on mcp-remote's own loopback callback server (`http://localhost:<port>/oauth/callback`,
 * registered by dynamic registration).
 *
 * Scenarios: login (one visit, PKCE S256, resource), a call needing notes:read, the same once the
 * access token expired (refresh, no browser), a call needing notes:write (403 insufficient_scope,
 * step-up in the signed-in browser), and a call after the stepped-up token expired.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { BrowserOpener, expectRefreshWithoutOpening, freeLoopbackPort } from "./browser-opener.js";
import { ChromiumUser } from "./browser-user.js";
import {
  authorizationRequests,
  type InteropStack,
  startStack,
  type TestUser,
  tokenRequests,
} from "./harness.js";
import { challengeOf, resultText, scopeSet } from "./scenarios.js";

/** The package's `mcp-remote` bin, resolved as a dependency (package.json pins 0.15.1). */
const PROXY = fileURLToPath(import.meta.resolve("mcp-remote/dist/proxy.js"));
const CALL = { timeout: 120_000 };

let browser: Browser;
let context: BrowserContext;
let stack: InteropStack;
let user: TestUser;
let opener: BrowserOpener;
let client: Client;
let transport: StdioClientTransport;
let dir: string;
let stderr = "";

beforeAll(async () => {
  browser = await launchChromium();
  context = await browser.newContext();
  // Ten minutes: mcp-remote refreshes ahead of expiry (within its own margin), so with the
  // harness's 60 s tokens it would refresh before every call; the test moves the clock instead.
  stack = await startStack({ revision: "2026-07-28", label: "mcp-remote", accessTokenTtlSeconds: 600 });
  user = await stack.addUser("alice-mcp-remote");
  dir = mkdtempSync(join(tmpdir(), "gatehouse-mcp-remote-"));
  opener = await BrowserOpener.start(new ChromiumUser(context, user), dir);
  const { DISPLAY: _d, WAYLAND_DISPLAY: _w, BROWSER: _b, ...inherited } = process.env;
  transport = new StdioClientTransport({
    command: process.execPath,
    args: [PROXY, stack.resource, String(await freeLoopbackPort())],
    env: {
      ...(inherited as Record<string, string>),
      ...opener.environment(),
      MCP_REMOTE_CONFIG_DIR: join(dir, "mcp-auth"),
    },
    stderr: "pipe",
  });
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  client = new Client({ name: "interop-host (mcp-remote)", version: "1.0.0" });
}, 60_000);

afterAll(async () => {
  await client?.close().catch(() => {});
  await opener?.close();
  await context?.close();
  await browser?.close();
  await stack?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** What mcp-remote said on stderr, for a failure message (it never prints tokens). */
const said = () => stderr.split("\n").slice(-40).join("\n");

describe("mcp-remote 0.15.1 over stdio, Gatehouse authorization server, notes MCP server", () => {
  it("1. logs in on connect: dynamic registration, one browser visit (sign-in, consent for notes:read), PKCE and resource sent", async () => {
    await client.connect(transport, CALL);
    const visit = await opener.visit(1);
    expect(visit.login).toBe(true);
    expect(visit.requested).toContain("notes:read");
    expect(visit.requested).not.toContain("notes:write");
    const registration = stack.exchanges.find((x) => x.path === "/register");
    expect(registration?.status, said()).toBe(201);
    const [authorization] = authorizationRequests(stack);
    expect(authorization?.params).toMatchObject({
      response_type: "code",
      code_challenge_method: "S256",
      resource: stack.resource,
    });
    expect(authorization?.params.redirect_uri).toMatch(/^http:\/\/localhost:\d+\/oauth\/callback$/);
    expect(tokenRequests(stack, "authorization_code").map((x) => x.status)).toEqual([200]);
    const tools = await client.listTools(undefined, CALL);
    expect(tools.tools.map((t) => t.name).sort()).toEqual(["notes.add", "notes.list"]);
  }, 180_000);

  it("2. notes.list (notes:read) works with the login's token, no browser", async () => {
    expect(resultText(await client.callTool({ name: "notes.list", arguments: {} }, undefined, CALL))).toBe(
      "[]",
    );
    expect(opener.opened).toHaveLength(1);
  }, 120_000);

  it("3. once the access token expired, notes.list succeeds by one refresh, without the browser", async () => {
    await expectRefreshWithoutOpening(
      stack,
      opener,
      async () => {
        expect(
          resultText(await client.callTool({ name: "notes.list", arguments: {} }, undefined, CALL)),
        ).toBe("[]");
      },
      said,
    );
  }, 120_000);

  it("4. notes.add: 403 insufficient_scope for notes:write, step-up in the signed-in browser, then the call succeeds", async () => {
    const seen = stack.mcp.exchanges.length;
    const answer = await client.callTool(
      { name: "notes.add", arguments: { text: "buy milk" } },
      undefined,
      CALL,
    );
    const refused = stack.mcp.exchanges.slice(seen).find((x) => x.status === 403);
    expect(refused?.tool).toBe("notes.add");
    expect(challengeOf(refused).error).toBe("insufficient_scope");
    expect(resultText(answer), said()).toBe("added note 1");
    expect(opener.opened).toHaveLength(2);
    const visit = await opener.visit(2);
    expect(visit.login).toBe(false);
    expect(visit.requested).toContain("notes:write");
    expect(scopeSet(authorizationRequests(stack).at(-1)?.params.scope)).toEqual(
      expect.arrayContaining(["notes:read", "notes:write"]),
    );
  }, 180_000);

  it("5. once the stepped-up token expired, both tools work by refresh, without the browser", async () => {
    await expectRefreshWithoutOpening(
      stack,
      opener,
      async () => {
        expect(
          resultText(
            await client.callTool({ name: "notes.add", arguments: { text: "eggs" } }, undefined, CALL),
          ),
        ).toBe("added note 2");
        expect(
          resultText(await client.callTool({ name: "notes.list", arguments: {} }, undefined, CALL)),
        ).toBe('["buy milk","eggs"]');
      },
      said,
    );
  }, 120_000);
});
