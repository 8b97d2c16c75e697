/**
 * The one-shot loopback redirect listener (RFC 8252 §7.3): 127.0.0.1 only, the right `state` once,
 * then closed; a timeout when no callback comes.
 */
import { describe, expect, it } from "vitest";
import { startLoopbackListener } from "../../../src/client/index.js";

describe("loopback redirect listener", () => {
  it("binds 127.0.0.1, ignores a wrong state, accepts the right one once, then closes", async () => {
    const listener = await startLoopbackListener({ timeoutMs: 10_000 });
    expect(listener.redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    const wait = listener.waitForCallback("good-state");
    const wrong = await fetch(`${listener.redirectUri}?code=x&state=bad-state`);
    expect(wrong.status).toBe(400);
    const right = await fetch(`${listener.redirectUri}?code=y&state=good-state`);
    expect(right.status).toBe(200);
    const callback = new URL(await wait);
    expect(callback.searchParams.get("code")).toBe("y");
    await expect(fetch(`${listener.redirectUri}?code=z&state=good-state`)).rejects.toThrow();
  });

  it("times out when no callback arrives", async () => {
    const listener = await startLoopbackListener({ timeoutMs: 50 });
    await expect(listener.waitForCallback("s")).rejects.toThrow(/no authorization callback/);
  });

  it("a callback from before the request is known, or to another path, gets a styled page and no content read", async () => {
    const listener = await startLoopbackListener({ timeoutMs: 10_000 });
    const early = await fetch(`${listener.redirectUri}?error=access_denied&state=s`);
    const text = await early.text();
    expect(text).toContain("Response received");
    expect(text).not.toMatch(/denied|access_denied/i);
    expect(early.headers.get("content-security-policy")).toMatch(/default-src 'none'; style-src 'sha256-/);
    const elsewhere = await fetch(`${listener.redirectUri.replace(/\/callback$/, "/other")}`);
    expect(elsewhere.status).toBe(404);
    await listener.close();
  });
});

const ISSUER = "https://as.example";

/** The page a fresh listener shows for one callback whose state matches. */
async function pageFor(
  query: Record<string, string | string[]>,
  /** `null`: the caller passes no expected issuer. */
  expectedIssuer: { issuer: string; issParameterSupported: boolean } | null = {
    issuer: ISSUER,
    issParameterSupported: true,
  },
): Promise<{ status: number; text: string; csp: string | null; callback: URL }> {
  const listener = await startLoopbackListener({ timeoutMs: 10_000 });
  const wait = listener.waitForCallback("st", expectedIssuer ?? undefined);
  const params = new URLSearchParams({ state: "st" });
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) params.append(name, v);
  }
  const response = await fetch(`${listener.redirectUri}?${params}`);
  const text = await response.text();
  const callback = new URL(await wait);
  return { status: response.status, text, csp: response.headers.get("content-security-policy"), callback };
}

describe("the page the listener shows for the matching callback", () => {
  it("says approved for a code whose iss checks out, under a CSP without script", async () => {
    const { status, text, csp } = await pageFor({ code: "c", iss: ISSUER });
    expect(status).toBe(200);
    expect(text).toContain("Access approved");
    expect(text).not.toContain("denied");
    expect(text).toContain("<style>");
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; /);
    expect(csp).toContain("frame-ancestors 'none'");
  });

  it('says denied after the user clicked Deny, not "Authorization received"', async () => {
    const { text, callback } = await pageFor({ error: "access_denied", iss: ISSUER });
    expect(text).toContain("Access denied");
    expect(text).toContain("You denied the access");
    expect(text).not.toMatch(/approved|Authorization received/);
    // The caller still gets the response to validate and report.
    expect(callback.searchParams.get("error")).toBe("access_denied");
  });

  it("shows another error's code, escaped, never its description", async () => {
    const scope = await pageFor({ error: "invalid_scope", error_description: "<b>desc</b>", iss: ISSUER });
    expect(scope.text).toContain("Authorization failed");
    expect(scope.text).toContain('<code data-testid="error-code">invalid_scope</code>');
    expect(scope.text).not.toContain("desc");
    const markup = await pageFor({ error: "<img src=x onerror=alert(1)>&'", iss: ISSUER });
    expect(markup.text).toContain("&lt;img src=x onerror=alert(1)&gt;&amp;&#39;");
    expect(markup.text).not.toContain("<img");
    const long = await pageFor({ error: "x".repeat(500), iss: ISSUER });
    expect(long.text).toContain("Authorization failed");
    expect(long.text).not.toContain("x".repeat(65));
  });

  it.each([
    [
      "another issuer",
      { error: "access_denied", error_description: "mixup-text", iss: "https://evil.example" },
    ],
    ["an issuer differing only in a trailing slash", { error: "access_denied", iss: `${ISSUER}/` }],
    ["an issuer differing only in case", { error: "invalid_scope", iss: ISSUER.toUpperCase() }],
    ["no iss from a server that announced it", { error: "access_denied", error_description: "mixup-text" }],
    ["iss twice", { error: "access_denied", iss: [ISSUER, ISSUER] }],
    ["a code from another issuer", { code: "c", iss: "https://evil.example" }],
  ])("neither acts on nor shows the fields of a response with %s (RFC 9207 §2.4)", async (_what, query) => {
    const { status, text } = await pageFor(query);
    expect(status).toBe(400);
    expect(text).toContain("Response not used");
    expect(text).not.toMatch(/access_denied|invalid_scope|mixup-text|denied|approved|error-code/i);
  });

  it("reads the fields when the server does not announce iss and the response has none (spec table, last row)", async () => {
    const { text } = await pageFor(
      { error: "access_denied" },
      { issuer: ISSUER, issParameterSupported: false },
    );
    expect(text).toContain("Access denied");
  });

  it("without an expected issuer says only that the response arrived", async () => {
    const { status, text } = await pageFor({ error: "access_denied", iss: ISSUER }, null);
    expect(status).toBe(200);
    expect(text).toContain("Response received");
    expect(text).not.toMatch(/denied|approved|Authorization received/i);
  });
});
