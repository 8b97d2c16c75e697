/**
 * Issue 6, progress for long operations: once the authorization URL is out, the session says it
 * is waiting, how to cancel and when it gives up; the loopback listener's timeout is an
 * `AuthorizationFlowError` that tells the user what to do next.
 */
import { describe, expect, it } from "vitest";
import { AuthorizationFlowError, browserSession } from "../../../src/client/index.js";

const URL_TO_OPEN = new URL("https://as.example/authorize?state=s1&client_id=c");

describe("browserSession progress", () => {
  it("after opening the browser it prints the wait line naming Ctrl-C and the time limit", async () => {
    const lines: string[] = [];
    const session = await browserSession({
      print: (line) => lines.push(line),
      open: async () => true,
      timeoutMs: 120_000,
    })();
    const wait = session.open(URL_TO_OPEN);
    try {
      // Deliver the callback so the wait ends; the listener accepts the matching state.
      await new Promise((r) => setTimeout(r, 0));
      const response = await fetch(`${session.redirectUri}?code=x&state=s1`);
      expect(response.status).toBe(200);
      await wait;
    } finally {
      await session.close?.();
    }
    expect(lines[0]).toContain("Opened your browser");
    expect(lines[1]).toBe(
      "Waiting for you to finish in the browser (Ctrl-C to cancel; gives up after 2 min)…",
    );
  });

  it("with --print-url behaviour the URL is printed, then the same wait line", async () => {
    const lines: string[] = [];
    let opened = false;
    const session = await browserSession({
      print: (line) => lines.push(line),
      printOnly: true,
      open: async () => {
        opened = true;
        return true;
      },
      timeoutMs: 90_000,
    })();
    const wait = session.open(URL_TO_OPEN);
    await fetch(`${session.redirectUri}?code=x&state=s1`);
    await wait;
    await session.close?.();
    expect(opened).toBe(false);
    expect(lines[0]).toBe(`Open this URL in a browser to authorize:\n  ${URL_TO_OPEN.href}`);
    expect(lines[1]).toContain("gives up after 90 s");
  });

  it("passes the expected issuer to the listener, so the page says denied only for a genuine answer", async () => {
    const session = await browserSession({ print: () => {}, open: async () => true, timeoutMs: 10_000 })();
    const expected = { issuer: "https://as.example", issParameterSupported: true };
    const wait = session.open(URL_TO_OPEN, expected);
    try {
      const response = await fetch(
        `${session.redirectUri}?error=access_denied&state=s1&iss=https%3A%2F%2Fas.example`,
      );
      expect(await response.text()).toContain("Access denied");
      await wait;
    } finally {
      await session.close?.();
    }
    const mixedUp = await browserSession({ print: () => {}, open: async () => true, timeoutMs: 10_000 })();
    const waitMixedUp = mixedUp.open(URL_TO_OPEN, expected);
    try {
      const response = await fetch(
        `${mixedUp.redirectUri}?error=access_denied&state=s1&iss=https%3A%2F%2Fevil.example`,
      );
      const text = await response.text();
      expect(text).toContain("Response not used");
      expect(text).not.toContain("denied");
      await waitMixedUp;
    } finally {
      await mixedUp.close?.();
    }
  });

  it("a timeout rejects with authorization_timed_out and the next step", async () => {
    const session = await browserSession({
      print: () => {},
      open: async () => true,
      timeoutMs: 50,
      timeoutHint: "run the command again, or use --print-url to open the URL yourself",
    })();
    const error = await session.open(URL_TO_OPEN).then(
      () => undefined,
      (e: unknown) => e,
    );
    await session.close?.();
    expect(error).toBeInstanceOf(AuthorizationFlowError);
    const flow = error as AuthorizationFlowError;
    expect(flow.code).toBe("authorization_timed_out");
    expect(flow.kind).toBe("action");
    expect(flow.message).toMatch(
      /^user agent \(loopback redirect listener, RFC 8252 §7\.3\): no authorization callback within 50 ms: run the command again, or use --print-url to open the URL yourself$/,
    );
  });
});
