/**
 * Gatehouse's own client (`AuthClient` / `createAuthFetch` from src/client) as the `fetch` of the
 * official MCP SDK v2 client transport, against Gatehouse's authorization server and a
 * Gatehouse-protected MCP server, the browser part in real Chromium. The scenarios of
 * sdk-v1.test.ts and sdk-v2.test.ts, then logout, which must leave the user no active grant.
 *
 * The SDK sees no 401 or 403: the wrapped fetch authorizes, steps up and refreshes by itself. Under
 * revision 2026-07-28 the SDK pins MCP protocol 2026-07-28; under 2025-11-25 it uses `initialize`.
 */
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthClient, type AuthEvent } from "../../src/client/index.js";
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

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe.each(MATRIX)("Gatehouse client, revision %s, %s client", (revision, registration) => {
  let stack: InteropStack;
  let party: Party;
  let auth: AuthClient;
  let mcp: Client;
  const events: AuthEvent[] = [];

  beforeAll(async () => {
    stack = await startStack({ revision, label: `gatehouse-${revision}-${registration}` });
    party = await openParty(stack, browser, registration, "Interop app (Gatehouse client)");
    const { handoff } = party;
    auth = new AuthClient({
      revision,
      clientName: "Interop app (Gatehouse client)",
      redirectUri: handoff.redirect.uri,
      // The "browser opener": hand the URL to Chromium, resolve with what the loopback received.
      userAgent: async (url) => {
        handoff.open(url);
        return handoff.callback();
      },
      ...(party.clientId && { preregisteredClients: { [stack.issuer]: { client_id: party.clientId } } }),
      onEvent: (event) => events.push(event),
    });
    mcp = new Client(
      { name: "interop-gatehouse", version: "1.0.0" },
      revision === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
    );
  });
  afterAll(async () => {
    await mcp?.close();
    await party?.close();
    await stack?.close();
  });

  const call = async (name: string, args?: Record<string, unknown>) =>
    resultText(await mcp.callTool({ name, ...(args && { arguments: args }) }));

  it("1. logs in: one browser visit (sign-in, consent for notes:read), PKCE and resource sent", async () => {
    await mcp.connect(new StreamableHTTPClientTransport(new URL(stack.resource), { fetch: auth.fetch }));
    expectFirstLogin(stack, party);
    expect((await mcp.listTools()).tools.map((t) => t.name).sort()).toEqual(["notes.add", "notes.list"]);
    expect(mcp.getNegotiatedProtocolVersion()).toBe(revision);
  });

  it("2. notes.list (notes:read) works with the login's token, no browser", async () => {
    expect(await call("notes.list")).toBe("[]");
    expect(party.handoff.opened).toBe(1);
  });

  it("3. once the access token expired, notes.list succeeds by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(await call("notes.list")).toBe("[]");
    });
  });

  it("4. notes.add: 403 insufficient_scope for notes:write, step-up in the signed-in browser", async () => {
    const seen = stack.mcp.exchanges.length;
    expect(await call("notes.add", { text: "buy milk" })).toBe("added note 1");

    expectStepUp(stack, party, seen);
    expect(events.some((e) => e.type === "authorization_started" && e.stepUp)).toBe(true);
    expect(await call("notes.list")).toBe('["buy milk"]');
  });

  it("5. once the stepped-up token expired, both tools work by refresh, without the browser", async () => {
    await expectRefreshWithoutBrowser(stack, party, async () => {
      expect(await call("notes.add", { text: "eggs" })).toBe("added note 2");
      expect(await call("notes.list")).toBe('["buy milk","eggs"]');
    });
  });

  it("6. after the step-up no superseded grant is still active", async () => {
    await expectOnlySteppedUpGrant(stack, party);
  });

  it("7. logout revokes at the server: the user has no active grant left", async () => {
    const result = await auth.logout();
    expect(result.outcomes.map((o) => o.revocation)).toEqual(["revoked"]);
    expect(await stack.activeGrants(party.user.id)).toEqual([]);
  });
});
