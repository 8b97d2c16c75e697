/**
 * `as.anonymous-machine-clients`: the auditor asks the announced registration endpoint, with no
 * credential, for the client of issue 22's High finding (client_secret_post, client_credentials)
 * and warns when it is registered. Against Gatehouse's own server on loopback (refuses: pass) and
 * against loopback fixtures that accept it as Gatehouse did before (warn), with and without RFC
 * 7592 management so the probe's client is deleted where it can be.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { type Fixture, type FixtureOptions, startFixture } from "./fixture.js";
import { startLoginStack } from "./stack.js";

const RULE = "as.anonymous-machine-clients";
const SECRET = "fixture-client-secret-that-must-never-be-reported";
const MANAGEMENT_TOKEN = "fixture-registration-access-token";

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

function findings(report: CheckReport) {
  return report.findings.filter((f) => f.rule === RULE);
}

async function audit(options: FixtureOptions): Promise<{ fixture: Fixture; report: CheckReport }> {
  const fixture = await startFixture(options);
  open.push(fixture);
  return { fixture, report: await runCheck(fixture.resourceUrl, { timeoutMs: 5000 }) };
}

/** A registration endpoint that registers anything for anyone, as Gatehouse did before issue 22. */
function permissive(withManagement: boolean, seen: { bodies: unknown[]; deleted: string[] }) {
  return async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    if (request.method === "DELETE") {
      const ok = request.headers.get("authorization") === `Bearer ${MANAGEMENT_TOKEN}`;
      if (ok) seen.deleted.push(path);
      return new Response(null, { status: ok ? 204 : 401 });
    }
    seen.bodies.push(await request.json());
    return Response.json(
      {
        client_id: "gh_anyone",
        client_secret: SECRET,
        client_secret_expires_at: 0,
        grant_types: ["client_credentials"],
        token_endpoint_auth_method: "client_secret_post",
        ...(withManagement
          ? {
              registration_client_uri: `${new URL(request.url).origin}${path}/gh_anyone`,
              registration_access_token: MANAGEMENT_TOKEN,
            }
          : {}),
      },
      { status: 201 },
    );
  };
}

describe("as.anonymous-machine-clients", () => {
  it("passes against Gatehouse's authorization server, which refuses the anonymous registration", async () => {
    const stack = await startLoginStack();
    open.push(stack);
    const report = await runCheck(stack.resource, { timeoutMs: 5000 });
    const [finding] = findings(report);
    expect(finding?.outcome).toBe("pass");
    expect(finding?.message).toContain("invalid_client_metadata");
    const registration = report.exchanges.find((e) => e.url.endsWith("/register"));
    expect(registration).toMatchObject({ method: "POST", credential: "none", status: 400 });
  });

  it("warns when a server registers a client_credentials client for anyone, and deletes it through RFC 7592", async () => {
    const seen = { bodies: [] as unknown[], deleted: [] as string[] };
    const { report } = await audit({ register: permissive(true, seen) });
    const [finding] = findings(report);
    expect(finding?.outcome).toBe("warn");
    expect(finding?.message).toContain("anonymous caller");
    expect(finding?.message).toContain("deleted again");
    expect(seen.bodies).toEqual([
      expect.objectContaining({
        grant_types: ["client_credentials"],
        token_endpoint_auth_method: "client_secret_post",
      }),
    ]);
    expect(seen.deleted).toEqual(["/register/gh_anyone"]);
    // The secret the server handed out is never kept, printed or logged.
    expect(JSON.stringify(report)).not.toContain(SECRET);
    expect(JSON.stringify(report)).not.toContain(MANAGEMENT_TOKEN);
  });

  it("without management, the warning says the probe's client is left to delete", async () => {
    const seen = { bodies: [] as unknown[], deleted: [] as string[] };
    const { report } = await audit({ register: permissive(false, seen) });
    const [finding] = findings(report);
    expect(finding?.outcome).toBe("warn");
    expect(finding?.message).toContain("stays registered");
    expect(seen.deleted).toEqual([]);
    expect(JSON.stringify(report)).not.toContain(SECRET);
  });

  it("is skipped, and nothing is posted, when no registration_endpoint is announced", async () => {
    const { fixture, report } = await audit({
      asMetadata: ({ registration_endpoint: _, ...doc }) => doc,
      register: () => new Response(null, { status: 500 }),
    });
    expect(findings(report).map((f) => f.outcome)).toEqual(["skip"]);
    expect(fixture.requests.filter((r) => r.method === "POST" && r.server === "as")).toEqual([]);
  });
});
