/**
 * The official MCP SDK v1 client (`@modelcontextprotocol/sdk` 1.32.x, `StreamableHTTPClientTransport`
 * with an `OAuthClientProvider`) against Gatehouse's authorization server and a Gatehouse-protected
 * MCP server, the browser part in real Chromium. For each revision and for a dynamically registered
 * and a pre-registered public client: login, a call needing notes:read, the same once the access
 * token expired (refresh, no browser), a call needing notes:write (403 insufficient_scope, then
 * step-up), refresh of the stepped-up grant, and the grants the server keeps.
 *
 * SDK v1 speaks MCP protocol 2025-11-25 in both cases; the revision changes the authorization
 * server's and the gate's rules. Its step-up goes through the interop rule for clients that answer
 * a 403 by refreshing (docs/authorization-server.md "Refresh policy").
 */
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { authorizationRequests, type InteropStack, startStack, tokenRequests } from "./harness.js";
import {
  expectFirstLogin,
  expectOnlySteppedUpGrant,
  expectRefreshWithoutBrowser,
  expectStepUp,
  MATRIX,
  openParty,
  type Party,
  resultText,
  scopeSet,
} from "./scenarios.js";
import { SdkV1NotesApp, SdkV1Provider } from "./sdk-v1-app.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe.each(MATRIX)("MCP SDK v1 client, revision %s, %s client", (revision, registration) => {
  let stack: InteropStack;
  let party: Party;
  let provider: SdkV1Provider;
  let app: SdkV1NotesApp;

  beforeAll(async () => {
    stack = await startStack({ revision, label: `sdk-v1-${revision}-${registration}` });
    party = await openParty(stack, browser, registration, "Interop app (SDK v1)");
    provider = new SdkV1Provider(party.handoff, { clientId: party.clientId });
    app = new SdkV1NotesApp(new URL(stack.resource), provider);
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
    expect(app.protocolVersion).toBe("2025-11-25");
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
    const refreshes = tokenRequests(stack, "refresh_token").length;
    expect(resultText(await app.callTool("notes.add", { text: "buy milk" }))).toBe("added note 1");

    // SDK v1 holds a refresh token, so it answers the 403 by refreshing at the old scope. The gate's
    // onInsufficientScope marked the grant: that refresh gets invalid_grant, the SDK drops its
    // tokens and authorizes again for the challenged scopes.
    const refused = tokenRequests(stack, "refresh_token").slice(refreshes);
    expect(refused.map((x) => [x.status, x.answer.error])).toEqual([[400, "invalid_grant"]]);
    expect(provider.invalidated).toEqual(["tokens"]);
    expect(scopeSet(authorizationRequests(stack).at(-1)?.params.scope)).toEqual([
      "notes:read",
      "notes:write",
    ]);

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
