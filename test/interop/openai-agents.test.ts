/**
 * The OpenAI Agents SDK 0.20.0 (`@openai/agents`, pinned in package.json) as an MCP client: its
 * `MCPServerStreamableHttp` with an `authProvider`, driven directly (connect, listTools, callTool;
 * no model and no OpenAI API call is involved), against Gatehouse's authorization server and the
 * notes MCP server behind Gatehouse's gate (harness.ts), the browser part in real Chromium.
 *
 * The Agents SDK hands `authProvider` to the official SDK v2's `StreamableHTTPClientTransport`
 * (`@modelcontextprotocol/client`), so the provider is an SDK v2 `OAuthClientProvider`
 * (sdk-v2-app.ts `SdkV2Provider`) and a login ends as the SDK's guide says: on
 * `UnauthorizedError`, `finishAuth(callbackParams)` on a transport for that server and provider,
 * then the call again. `errorFunction: null` makes the Agents SDK rethrow tool failures instead of
 * turning them into model-visible text.
 *
 * Scenarios: login, a call needing notes:read, the same once the access token expired (refresh,
 * no browser), a call needing notes:write (403 insufficient_scope, step-up), and both tools once
 * the stepped-up token expired.
 */
import { StreamableHTTPClientTransport, UnauthorizedError } from "@modelcontextprotocol/client";
import { MCPServerStreamableHttp } from "@openai/agents";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { type InteropStack, startStack, tokenRequests } from "./harness.js";
import {
  expectFirstLogin,
  expectRefreshWithoutBrowser,
  expectStepUp,
  openParty,
  type Party,
  resultText,
} from "./scenarios.js";
import { retryOnceAfterAuthorization } from "./sdk-app-support.js";
import { SdkV2Provider } from "./sdk-v2-app.js";

let browser: Browser;
let stack: InteropStack;
let party: Party;
let provider: SdkV2Provider;
let server: MCPServerStreamableHttp;

/** The SDK's finish of a browser authorization: the code exchanged, the tokens in the provider. */
async function finishAuth(): Promise<void> {
  const transport = new StreamableHTTPClientTransport(new URL(stack.resource), { authProvider: provider });
  await transport.finishAuth(await provider.callbackParams());
  await transport.close();
}

function callTool(name: string, args: Record<string, unknown> = {}) {
  return retryOnceAfterAuthorization(UnauthorizedError, () => server.callToolResult(name, args), finishAuth);
}

beforeAll(async () => {
  browser = await launchChromium();
  stack = await startStack({ revision: "2025-11-25", label: "openai-agents" });
  party = await openParty(stack, browser, "dynamic", "Interop app (OpenAI Agents SDK)");
  provider = new SdkV2Provider(party.handoff);
  server = new MCPServerStreamableHttp({
    url: stack.resource,
    name: "notes",
    authProvider: provider,
    errorFunction: null,
    cacheToolsList: false,
  });
}, 60_000);

afterAll(async () => {
  await server?.close().catch(() => {});
  await party?.close();
  await browser?.close();
  await stack?.close();
});

describe("OpenAI Agents SDK 0.20 MCPServerStreamableHttp, Gatehouse authorization server, notes MCP server", () => {
  it("1. logs in: one browser visit (sign-in, consent for notes:read), PKCE and resource sent", async () => {
    await retryOnceAfterAuthorization(UnauthorizedError, () => server.connect(), finishAuth);
    expectFirstLogin(stack, party);
    expect((await server.listTools()).map((t) => t.name).sort()).toEqual(["notes.add", "notes.list"]);
  }, 120_000);

  it("2. notes.list (notes:read) works with the login's token, no browser", async () => {
    expect(resultText(await callTool("notes.list"))).toBe("[]");
    expect(party.handoff.opened).toBe(1);
  });

  it("3. once the access token expired, notes.list succeeds by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(resultText(await callTool("notes.list"))).toBe("[]");
    });
  });

  it("4. notes.add: 403 insufficient_scope for notes:write, step-up in the signed-in browser", async () => {
    const seen = stack.mcp.exchanges.length;
    expect(resultText(await callTool("notes.add", { text: "buy milk" }))).toBe("added note 1");
    expectStepUp(stack, party, seen);
    expect(resultText(await callTool("notes.list"))).toBe('["buy milk"]');
  }, 120_000);

  it("5. once the stepped-up token expired, both tools work by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(resultText(await callTool("notes.add", { text: "eggs" }))).toBe("added note 2");
      expect(resultText(await callTool("notes.list"))).toBe('["buy milk","eggs"]');
    });
    expect(tokenRequests(stack, "authorization_code").map((x) => x.status)).toEqual([200, 200]);
  });
});
