/**
 * `--login` against Gatehouse's own authorization server and demo notes resource: the auditor's
 * client registers dynamically, a scripted user agent signs in and approves the consent page over
 * real HTTP, the token is used (with a scope upgrade on the step-up route), then refreshed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { fixedSession } from "../../src/client/user-agent/session.js";
import { type LoginStack, scriptedUser, startLoginStack } from "./stack.js";

const REDIRECT = "http://127.0.0.1:9/callback";

let stack: LoginStack;
let resource: string;

beforeAll(async () => {
  stack = await startLoginStack();
  resource = stack.resource;
});
afterAll(async () => {
  await stack?.close();
});

async function auditWithLogin(url: string): Promise<CheckReport> {
  return runCheck(url, {
    timeoutMs: 5000,
    login: { authorizationSession: fixedSession(REDIRECT, scriptedUser) },
  });
}

const outcome = (report: CheckReport, rule: string) =>
  report.findings.filter((f) => f.rule === rule).map((f) => f.outcome);

describe("gatehouse check --login against Gatehouse's own servers", () => {
  it("runs the flow, uses the token, refreshes with rotation and reports the lifetime", async () => {
    const report = await auditWithLogin(`${resource}/notes`);
    expect(report.findings.filter((f) => f.outcome === "fail")).toEqual([]);
    expect(outcome(report, "login.flow")).toEqual(["pass"]);
    expect(outcome(report, "login.token-accepted")).toEqual(["pass"]);
    expect(outcome(report, "login.token-lifetime")).toEqual(["pass"]);
    expect(report.observations.login?.accessTokenLifetimeSeconds).toBe(300);
    expect(outcome(report, "login.refresh")).toEqual(["pass"]);
    expect(outcome(report, "login.refresh-rotation")).toEqual(["pass"]);
    // Gatehouse judges the client before resource (anonymous probe: info); the flow decides.
    expect(outcome(report, "as.resource-parameter")).toEqual(["info", "pass"]);
    expect(report.observations.login?.clientSource).toBe("dynamic");
    expect(report.ok).toBe(true);
  });

  it("exercises a scope upgrade when the resource asks for more", async () => {
    const report = await auditWithLogin(`${resource}/step-up`);
    expect(outcome(report, "login.step-up")).toEqual(["pass"]);
    expect(report.observations.login?.stepUps).toBe(1);
    expect(outcome(report, "login.token-accepted")).toEqual(["pass"]);
  });

  it("sends the access token only to the resource and client credentials only to the AS", async () => {
    const report = await auditWithLogin(`${resource}/notes`);
    for (const e of report.exchanges) {
      const origin = new URL(e.url).origin;
      if (e.credential === "access-token" || e.credential.startsWith("bogus")) expect(origin).toBe(resource);
      if (e.credential === "client") expect(origin).toBe(stack.issuer);
    }
    expect(report.exchanges.some((e) => e.credential === "access-token")).toBe(true);
    expect(report.exchanges.some((e) => e.credential === "client")).toBe(true);
    expect(JSON.stringify(report)).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./); // no JWT anywhere
  });

  it("login.flow fails, without throwing, when the user agent cannot complete", async () => {
    const report = await runCheck(`${resource}/notes`, {
      timeoutMs: 5000,
      login: {
        authorizationSession: fixedSession(REDIRECT, async () => {
          throw new Error("the user closed the browser");
        }),
      },
    });
    expect(outcome(report, "login.flow")).toEqual(["fail"]);
    expect(outcome(report, "login.refresh")).toEqual(["skip"]);
    expect(report.ok).toBe(false);
  });
});
