/**
 * `--login` against Gatehouse's own authorization server and demo notes resource: the auditor's
 * client registers dynamically, a scripted user agent signs in and approves the consent page over
 * real HTTP, the token is used (with a scope upgrade on the step-up route), then refreshed.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { hashPassword } from "../../src/authorization-server/password.js";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { fixedSession } from "../../src/client/user-agent/session.js";
import { createNotesResource } from "../../src/demo/notes-resource.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { Logger } from "../../src/shared/log.js";
import { buildChallenge } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { Browser, hiddenFields } from "../support/flow.js";

const quiet: Logger = { info() {}, warn() {}, error() {} };
const PASSWORD = "correct horse battery staple";
const REDIRECT = "http://127.0.0.1:9/callback";

let as: AuthorizationServer;
let asHttp: ListeningServer;
let rsHttp: ListeningServer;
let resource: string;

/** Follows the authorization URL like a user: sign in, approve, return the redirect. */
async function scriptedUser(authorizationUrl: URL): Promise<string> {
  const browser = new Browser();
  let response = await browser.request(authorizationUrl.href);
  for (let i = 0; i < 6; i++) {
    const location = response.headers.get("location");
    if (response.status === 303 && location?.startsWith(REDIRECT)) return location;
    if (response.status === 303 && location) {
      response = await browser.request(new URL(location, authorizationUrl).href);
      continue;
    }
    if (response.status !== 200) throw new Error(`the authorization pages answered ${response.status}`);
    const page = await response.text();
    const fields = hiddenFields(page);
    const action = new URL(response.url || authorizationUrl.href);
    if (/name="password"/.test(page)) {
      response = await browser.postForm(`${action.origin}${action.pathname.replace(/\/[^/]*$/, "")}/login`, {
        ...fields,
        username: "auditor",
        password: PASSWORD,
      });
    } else {
      response = await browser.postForm(
        `${action.origin}${action.pathname.replace(/\/[^/]*$/, "")}/consent`,
        {
          ...fields,
          decision: "approve",
        },
      );
    }
  }
  throw new Error("the authorization pages did not lead back to the redirect URI");
}

beforeAll(async () => {
  let notes: ReturnType<typeof createNotesResource> | undefined;
  asHttp = await listen((r) => as.fetch(r));
  rsHttp = await listen((r) => handler(r));
  resource = rsHttp.url;
  const store = createMemoryStore();
  as = await createAuthorizationServer({
    issuer: asHttp.url,
    store,
    resources: [{ uri: resource, scopes: ["notes:read", "notes:write"] }],
    scopeHierarchy: { "notes:write": ["notes:read"] },
    allowInsecureLoopback: true,
    dynamicRegistration: { enabled: true },
    accessTokenTtlSeconds: 300,
    maintenanceIntervalMs: 0,
    logger: quiet,
  });
  await store.createUser({
    id: randomUUID(),
    username: "auditor",
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
  notes = createNotesResource({
    resource,
    issuer: asHttp.url,
    jwksUri: String(as.metadata.jwks_uri),
    logger: quiet,
  });
  const gate = notes.resourceServer;
  const needsWrite = gate.requireBearer({ scopes: ["notes:write"] });
  // A route whose anonymous challenge asks for notes:read while the operation needs notes:write:
  // the client must come back for more scope (403 insufficient_scope → scope upgrade).
  const handler = async (request: Request): Promise<Response> => {
    if (new URL(request.url).pathname !== "/step-up") return notes!.fetch(request);
    if (!request.headers.has("authorization")) {
      return new Response(null, {
        status: 401,
        headers: {
          "www-authenticate": buildChallenge("Bearer", {
            resource_metadata: gate.resourceMetadataUrl,
            scope: "notes:read",
          }),
        },
      });
    }
    return needsWrite(request, async () => Response.json({ ok: true }));
  };
});
afterAll(async () => {
  await as?.close();
  await rsHttp?.close();
  await asHttp?.close();
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
      if (e.credential === "client") expect(origin).toBe(asHttp.url);
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
