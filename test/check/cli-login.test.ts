/**
 * `gatehouse check --login --print-url --json` as a command, end to end: the CLI's real user agent
 * (a one-shot loopback listener, the URL printed on stderr) against Gatehouse's own servers. The
 * "user" reads the printed URL, signs in and approves, and their browser follows the redirect back
 * to the loopback listener.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { run } from "../../src/cli/commands/check.js";
import { type LoginStack, scriptedUser, startLoginStack } from "./stack.js";

let stack: LoginStack;
beforeAll(async () => {
  stack = await startLoginStack();
});
afterAll(async () => {
  vi.restoreAllMocks();
  await stack?.close();
});

describe("gatehouse check --login (command)", () => {
  it("prints the authorization URL on stderr, completes the flow and prints one JSON report", async () => {
    let stdout = "";
    let stderr = "";
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      stdout += String(chunk);
      return true;
    });
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    const exit = run([`${stack.resource}/notes`, "--login", "--print-url", "--json"]);

    // The user: waits for the printed URL, authorizes, and lets the browser follow the redirect.
    let printedUrl = "";
    const user = (async () => {
      for (let i = 0; i < 200; i++) {
        const match = /https?:\/\/\S+\/authorize\?\S+/.exec(stderr);
        if (match) {
          printedUrl = match[0];
          const callback = await scriptedUser(new URL(match[0]));
          const landed = await fetch(callback);
          return landed.status;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no authorization URL was printed; stderr: ${stderr.slice(0, 500)}`);
    })();

    const [code, landedStatus] = await Promise.all([exit, user]);
    vi.restoreAllMocks();
    expect(landedStatus).toBe(200);
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    const outcome = (rule: string) =>
      report.findings
        .filter((f: { rule: string }) => f.rule === rule)
        .map((f: { outcome: string }) => f.outcome);
    expect(outcome("login.flow")).toEqual(["pass"]);
    expect(outcome("login.token-accepted")).toEqual(["pass"]);
    expect(outcome("login.refresh-rotation")).toEqual(["pass"]);
    // The URL went to stderr only; stdout is exactly the JSON object. The only authorization
    // requests it lists are the anonymous as.resource-parameter probes (unknown client).
    expect(printedUrl).not.toBe("");
    expect(stdout).not.toContain(printedUrl);
    const listed = [...stdout.matchAll(/https?:\/\/[^"\s]+\/authorize\?[^"\s]+/g)].map((m) => new URL(m[0]));
    expect(listed.length).toBeGreaterThan(0);
    for (const url of listed) expect(url.searchParams.get("client_id")).toBe("gatehouse-check-probe");
  });
});
