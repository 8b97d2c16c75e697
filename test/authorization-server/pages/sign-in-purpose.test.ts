/**
 * Issue 26: the sign-in page reached from /device, /admin or /account said nothing of what the
 * sign-in was for. It now says it in one line (an authorization request's sign-in names the
 * application instead, as before). Over HTTP on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent, type FlowServer, startFlowServer } from "../support/flow-server.js";

let server: FlowServer;

beforeAll(async () => {
  server = await startFlowServer();
});
afterAll(async () => {
  await server?.close();
});

/** Follows the page's redirect (or its sign-in link) to the sign-in page; returns its purpose line. */
async function purposeFrom(path: string): Promise<string> {
  const agent = new Agent(server.issuer);
  const first = await agent.get(path);
  const location =
    first.status === 303
      ? first.headers.get("location")!
      : (/href="([^"]*\/login[^"]*)"/.exec(await first.text())?.[1] ?? "").replaceAll("&amp;", "&");
  const login = await agent.get(
    new URL(location, server.issuer).pathname + new URL(location, server.issuer).search,
  );
  expect(login.status).toBe(200);
  const html = await login.text();
  return /<p data-testid="sign-in-purpose">([^<]*)<\/p>/.exec(html)?.[1] ?? "";
}

describe("the sign-in page says what it is for", () => {
  it("from /admin: to open the administration page", async () => {
    expect(await purposeFrom("/admin")).toBe("to open the administration page");
  });
  it("from /device: to connect a device", async () => {
    expect(await purposeFrom("/device?user_code=BCDF-GHJK")).toMatch(/^to connect a device/);
  });
  it("from /account: to see the account", async () => {
    expect(await purposeFrom("/account")).toBe(
      "to see your account and the applications you have authorized",
    );
  });
});
