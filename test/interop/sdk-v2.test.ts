/**
 * The official MCP SDK v2 client (`@modelcontextprotocol/client` 2.x, `StreamableHTTPClientTransport`
 * with an `OAuthClientProvider`) against Gatehouse's authorization server and a Gatehouse-protected
 * MCP server, the browser part in real Chromium. Same scenarios as sdk-v1.test.ts: login, a call
 * needing notes:read, refresh once the token expired, a call needing notes:write (403
 * insufficient_scope, then step-up), refresh of the stepped-up grant, and the grants the server keeps.
 *
 * Under revision 2026-07-28 the client pins MCP protocol 2026-07-28 (`server/discover`, per-request
 * envelopes); under 2025-11-25 it uses the legacy `initialize` handshake.
 */
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { type InteropStack, startStack } from "./harness.js";
import {
  expectFirstLogin,
  expectOnlySteppedUpGrant,
  expectRefreshWithoutBrowser,
  expectStepUp,
  MATRIX,
  openParty,
  type Party,
  resultText,
} from "./scenarios.js";
import { SdkV2NotesApp, SdkV2Provider } from "./sdk-v2-app.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe.each(MATRIX)("MCP SDK v2 client, revision %s, %s client", (revision, registration) => {
  let stack: InteropStack;
  let party: Party;
  let provider: SdkV2Provider;
  let app: SdkV2NotesApp;

  beforeAll(async () => {
    stack = await startStack({ revision, label: `sdk-v2-${revision}-${registration}` });
    party = await openParty(stack, browser, registration, "Interop app (SDK v2)");
    provider = new SdkV2Provider(party.handoff, { clientId: party.clientId });
    app = new SdkV2NotesApp(new URL(stack.resource), provider, revision);
  });
  afterAll(async () => {
    await app?.close();
    await party?.close();
    await stack?.close();
  });

  it("1. logs in: one browser visit (sign-in, consent for notes:read), PKCE and resource sent", async () => {
    await app.connect();
    expectFirstLogin(stack, party);
    expect((await app.listTools()).sort()).toEqual(["notes.add", "notes.list"]);
    expect(app.protocolVersion).toBe(revision);
  });

  it("2. notes.list (notes:read) works with the login's token, no browser", async () => {
    expect(resultText(await app.callTool("notes.list"))).toBe("[]");
    expect(party.handoff.opened).toBe(1);
  });

  it("3. once the access token expired, notes.list succeeds by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(resultText(await app.callTool("notes.list"))).toBe("[]");
    });
  });

  it("4. notes.add: 403 insufficient_scope for notes:write, step-up in the signed-in browser", async () => {
    const seen = stack.mcp.exchanges.length;
    expect(resultText(await app.callTool("notes.add", { text: "buy milk" }))).toBe("added note 1");

    expectStepUp(stack, party, seen);
    expect(resultText(await app.callTool("notes.list"))).toBe('["buy milk"]');
  });

  it("5. once the stepped-up token expired, both tools work by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(resultText(await app.callTool("notes.add", { text: "eggs" }))).toBe("added note 2");
      expect(resultText(await app.callTool("notes.list"))).toBe('["buy milk","eggs"]');
    });
  });

  it("6. after the step-up no superseded grant is still active", async () => {
    await expectOnlySteppedUpGrant(stack, party);
  });
});
