/**
 * What the three client test files share: the matrix they run over, the party on the user's side
 * (a user, a fresh browser profile, a loopback redirect and, for the pre-registered case, a public
 * client created on the server for that redirect URI), readers for the recorded exchanges, and the
 * checks of the scenarios every client must pass alike (docs/interop.md "Scenarios").
 */
import type { Browser } from "playwright-core";
import { expect } from "vitest";
import type { Revision } from "../../src/authorization-server/index.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { AuthorizationHandoff, ChromiumUser, LoopbackRedirect } from "./browser-user.js";
import {
  authorizationRequests,
  type InteropStack,
  REGISTRATIONS,
  REVISIONS,
  type Registration,
  type TestUser,
  tokenRequests,
} from "./harness.js";
import type { McpExchange } from "./notes-mcp.js";

/** Every (revision, registration) pair, for `describe.each`. */
export const MATRIX: [Revision, Registration][] = REVISIONS.flatMap((revision) =>
  REGISTRATIONS.map((registration): [Revision, Registration] => [revision, registration]),
);

export interface Party {
  user: TestUser;
  handoff: AuthorizationHandoff;
  /** Set for a pre-registered client. */
  clientId: string | undefined;
  close(): Promise<void>;
}

/** A user with a fresh browser profile and a loopback redirect; a public client when pre-registered. */
export async function openParty(
  stack: InteropStack,
  browser: Browser,
  registration: Registration,
  appName: string,
): Promise<Party> {
  const user = await stack.addUser(`alice-${registration}`);
  const redirect = await LoopbackRedirect.start();
  const context = await browser.newContext();
  const handoff = new AuthorizationHandoff(new ChromiumUser(context, user), redirect);
  const clientId =
    registration === "preregistered" ? await stack.addPublicClient(appName, redirect.uri) : undefined;
  return {
    user,
    handoff,
    clientId,
    async close() {
      await context.close();
      await redirect.close();
    },
  };
}

/** The text of a tool result's first content item (the notes tools answer with text). */
export function resultText(answer: unknown): string {
  const result = (answer ?? {}) as { content?: unknown; isError?: unknown };
  if (result.isError) throw new Error(`the tool failed: ${JSON.stringify(result.content)}`);
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const first = content[0] as { type?: unknown; text?: unknown } | undefined;
  return first?.type === "text" && typeof first.text === "string" ? first.text : "";
}

/** The parameters of the first Bearer challenge of an MCP answer. */
export function challengeOf(exchange: McpExchange | undefined): Record<string, string> {
  const [challenge] = parseWWWAuthenticate(exchange?.challenge ?? "");
  return { ...challenge?.params };
}

/** Scope strings as sorted arrays, for comparisons that ignore order. */
export function scopeSet(scope: string | undefined): string[] {
  return (scope ?? "").split(" ").filter(Boolean).sort();
}

/**
 * Scenario 1, once the client connected: one browser visit with sign-in and consent for notes:read
 * only; the authorization request used PKCE S256 and named the resource (RFC 8707) and the
 * loopback redirect; the code exchange named the resource too.
 */
export function expectFirstLogin(stack: InteropStack, party: Party): void {
  expect(party.handoff.opened).toBe(1);
  const [visit] = party.handoff.user.visits;
  expect(visit).toMatchObject({ login: true });
  expect(visit!.requested).toContain("notes:read");
  expect(visit!.requested).not.toContain("notes:write");

  const [authorization] = authorizationRequests(stack);
  expect(authorization?.params).toMatchObject({
    response_type: "code",
    code_challenge_method: "S256",
    resource: stack.resource,
    redirect_uri: party.handoff.redirect.uri,
  });
  if (party.clientId) expect(authorization?.params.client_id).toBe(party.clientId);
  const [exchange] = tokenRequests(stack, "authorization_code");
  expect(exchange).toMatchObject({ status: 200, params: { resource: stack.resource } });
}

/**
 * Scenarios 3 and 5: expires the access tokens, then runs `calls` (which check their answers); they
 * must get through by exactly one successful refresh, without opening the browser.
 */
export async function expectRefreshWithoutBrowser(
  stack: InteropStack,
  party: Party,
  calls: () => Promise<void>,
): Promise<void> {
  const opened = party.handoff.opened;
  const refreshes = tokenRequests(stack, "refresh_token").length;
  stack.expireAccessTokens();
  await calls();
  expect(party.handoff.opened).toBe(opened);
  expect(
    tokenRequests(stack, "refresh_token")
      .slice(refreshes)
      .map((x) => x.status),
  ).toEqual([200]);
}

/**
 * Scenario 4, once notes.add succeeded: among the MCP exchanges since `seen`, the gate answered
 * notes.add 403 insufficient_scope naming notes:write (RFC 6750 §3.1), and the client stepped up in
 * a second browser visit, without sign-in, asking for notes:write.
 */
export function expectStepUp(stack: InteropStack, party: Party, seen: number): void {
  const refused = stack.mcp.exchanges.slice(seen).find((x) => x.status === 403);
  expect(refused?.tool).toBe("notes.add");
  expect(challengeOf(refused).error).toBe("insufficient_scope");
  expect(scopeSet(challengeOf(refused).scope)).toContain("notes:write");
  expect(party.handoff.opened).toBe(2);
  const visit = party.handoff.user.visits.at(-1);
  expect(visit).toMatchObject({ login: false });
  expect(visit!.requested).toContain("notes:write");
}

/** Scenario 6: the step-up's grant superseded the login's; one active grant, holding notes:write. */
export async function expectOnlySteppedUpGrant(stack: InteropStack, party: Party): Promise<void> {
  const grants = await stack.activeGrants(party.user.id);
  expect(grants).toHaveLength(1);
  expect(grants[0]!.scopes).toContain("notes:write");
}
