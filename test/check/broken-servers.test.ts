/**
 * The auditor against deliberately broken servers on loopback: each test breaks one rule and
 * asserts that exactly that rule fails (or warns) while a correct server passes it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { type Fixture, type FixtureOptions, page, startFixture } from "./fixture.js";

const open: Fixture[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

async function audit(options: FixtureOptions = {}, revision?: "2025-11-25" | "2026-07-28") {
  const fixture = await startFixture(options);
  open.push(fixture);
  const report = await runCheck(fixture.resourceUrl, { timeoutMs: 5000, ...(revision && { revision }) });
  return { fixture, report };
}

function outcomes(report: CheckReport, rule: string): string[] {
  return report.findings.filter((f) => f.rule === rule).map((f) => f.outcome);
}

/** MUST rules that failed. */
function failedMusts(report: CheckReport): string[] {
  return [...new Set(report.findings.filter((f) => f.outcome === "fail").map((f) => f.rule))];
}

describe("gatehouse check against a correct server", () => {
  it("passes every MUST, and reports each discovery form as served", async () => {
    const { report } = await audit();
    expect(failedMusts(report)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(outcomes(report, "prm.resource-metadata-url")).toEqual(["pass"]);
    expect(outcomes(report, "prm.path-specific")).toEqual(["pass"]);
    expect(outcomes(report, "prm.root")).toEqual(["pass"]);
    expect(outcomes(report, "prm.resource")).toEqual(["pass", "pass", "pass"]);
    expect(outcomes(report, "prm.content-type")).toEqual(["pass", "pass", "pass"]);
    expect(outcomes(report, "as.content-type")).toEqual(["pass", "pass"]);
    expect(outcomes(report, "as.discovery-form")).toEqual(["pass", "pass"]);
    expect(outcomes(report, "as.issuer")).toEqual(["pass"]);
    expect(outcomes(report, "as.pkce")).toEqual(["pass"]);
    expect(outcomes(report, "resource.invalid-token-401")).toEqual(["pass"]);
    expect(outcomes(report, "resource.invalid-token-error")).toEqual(["pass"]);
    expect(outcomes(report, "resource.query-token-refused")).toEqual(["pass"]);
    expect(outcomes(report, "challenge.www-authenticate")).toEqual(["pass"]);
    // Loopback http: tolerated with a warning, never a pass.
    expect(outcomes(report, "transport.resource-https")).toEqual(["warn"]);
    expect(outcomes(report, "as.https")).toEqual(["warn"]);
  });

  it("sends bogus tokens only to the resource URL and no credential to the AS", async () => {
    const { fixture, report } = await audit();
    const asRequests = fixture.requests.filter((r) => r.server === "as");
    expect(asRequests.length).toBeGreaterThan(0);
    for (const r of asRequests) {
      expect(r.authorization).toBeNull();
      expect(r.queryToken).toBe(false);
    }
    // Besides metadata: one anonymous authorization request for an unknown, non-URL client (so a
    // CIMD server fetches nothing), carrying the resource a client would send, and one anonymous
    // registration asking for a client_credentials client (as.anonymous-machine-clients).
    const others = asRequests.filter((r) => !new URL(r.url).pathname.includes("/.well-known/"));
    expect(others.map((r) => [r.method, new URL(r.url).pathname])).toEqual([
      ["GET", "/authorize"],
      ["POST", "/register"],
    ]);
    const authorize = others.filter((r) => r.method === "GET");
    const params = new URL(authorize[0]!.url).searchParams;
    expect(params.get("client_id")).toBe("gatehouse-check-probe");
    expect(params.get("resource")).toBe(fixture.resourceUrl);
    expect(params.get("code_challenge_method")).toBe("S256");
    const withCredential = fixture.requests.filter((r) => r.authorization !== null || r.queryToken);
    expect(withCredential).toHaveLength(2);
    for (const r of withCredential) {
      const url = new URL(r.url);
      expect(`${url.origin}${url.pathname}`).toBe(fixture.resourceUrl);
    }
    // The exchange log names the credential kind and never holds the bogus value.
    expect(report.exchanges.map((e) => e.credential).sort()).toEqual(
      [...Array(report.exchanges.length - 2).fill("none"), "bogus-bearer", "bogus-query"].sort(),
    );
    expect(JSON.stringify(report)).not.toMatch(/gatehouse-check-bogus-[0-9a-f]/);
  });

  it("calls a POST-only MCP endpoint with an initialize POST when GET gets 405 (auto)", async () => {
    const { fixture, report } = await audit({ postOnly: true });
    expect(report.ok).toBe(true);
    expect(report.observations.getAnswer?.status).toBe(405);
    expect(report.observations.unauthenticated.form).toBe("mcp");
    expect(report.findings.find((f) => f.rule === "challenge.status-401")?.message).toContain(
      "MCP initialize POST",
    );
    const credentialed = fixture.requests.filter((r) => r.authorization !== null || r.queryToken);
    expect(credentialed.map((r) => r.method)).toEqual(["POST", "POST"]);
  });

  it("with request 'get', a POST-only endpoint fails challenge.status-401", async () => {
    const fixture = await startFixture({ postOnly: true });
    open.push(fixture);
    const report = await runCheck(fixture.resourceUrl, { request: "get", timeoutMs: 5000 });
    expect(outcomes(report, "challenge.status-401")).toEqual(["fail"]);
  });

  it("probes the three forms for an issuer with a path", async () => {
    const { report } = await audit({ issuerPath: "/tenant1" });
    const forms = report.findings.filter((f) => f.rule === "as.discovery-form");
    expect(forms.map((f) => f.message.split(":")[0])).toEqual(["rfc8414", "oidc-inserted", "oidc-appended"]);
    expect(forms.every((f) => f.outcome === "pass")).toBe(true);
    expect(report.ok).toBe(true);
  });
});

describe("gatehouse check: one broken rule per server", () => {
  it("prm.resource: a PRM naming another resource fails", async () => {
    const { report } = await audit({ prm: (doc) => ({ ...doc, resource: "https://elsewhere.example/mcp" }) });
    expect(outcomes(report, "prm.resource")).toEqual(["fail", "fail", "fail"]);
    expect(failedMusts(report)).toEqual(["prm.resource"]);
    expect(report.ok).toBe(false);
  });

  it("prm.resource: a parent resource (same origin) is a warning, not a failure", async () => {
    const { report } = await audit({
      prm: (doc, { resource }) => ({ ...doc, resource: new URL(resource).origin }),
    });
    expect(outcomes(report, "prm.resource")).toEqual(["warn", "warn", "warn"]);
    expect(report.ok).toBe(true);
  });

  it("as.pkce: missing code_challenge_methods_supported fails", async () => {
    const { report } = await audit({
      asMetadata: ({ code_challenge_methods_supported: _, ...doc }) => doc,
    });
    expect(outcomes(report, "as.pkce")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["as.pkce"]);
  });

  it("as.pkce: the message for a missing list names the field to add", async () => {
    const { report } = await audit({
      asMetadata: ({ code_challenge_methods_supported: _, ...doc }) => doc,
    });
    expect(report.findings.find((f) => f.rule === "as.pkce")?.message).toContain(
      'Add "code_challenge_methods_supported": ["S256"]',
    );
  });

  it("as.pkce: judged per document when the forms serve different metadata", async () => {
    const { report } = await audit({
      asMetadata: ({ code_challenge_methods_supported: methods, ...doc }, { form }) =>
        form === "rfc8414" ? { ...doc, code_challenge_methods_supported: methods } : doc,
    });
    const pkce = report.findings.filter((f) => f.rule === "as.pkce");
    expect(pkce.map((f) => [f.outcome, f.subject?.includes("openid-configuration")])).toEqual([
      ["pass", false],
      ["fail", true],
    ]);
  });

  it("as.pkce: plain only (no S256) fails", async () => {
    const { report } = await audit({
      asMetadata: (doc) => ({ ...doc, code_challenge_methods_supported: ["plain"] }),
    });
    expect(outcomes(report, "as.pkce")).toEqual(["fail"]);
  });

  it("as.issuer: an issuer that differs (even by a trailing slash) fails", async () => {
    const { report } = await audit({ asMetadata: (doc, { issuer }) => ({ ...doc, issuer: `${issuer}/` }) });
    expect(outcomes(report, "as.issuer")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["as.issuer"]);
    // The message says what to change, and in which setting.
    const message = report.findings.find((f) => f.rule === "as.issuer")?.message;
    expect(message).toContain("only by a trailing slash");
    expect(message).toContain(
      `authorization_servers entry in the protected resource metadata exactly as "${report.observations.authorizationServers[0]!.issuer}/"`,
    );
  });

  it("challenge.www-authenticate: a 401 without WWW-Authenticate fails", async () => {
    const { report } = await audit({ challenge: () => null });
    expect(outcomes(report, "challenge.www-authenticate")).toEqual(["fail"]);
    // The well-known URLs still make the metadata discoverable.
    expect(outcomes(report, "prm.discoverable")).toEqual(["pass"]);
    expect(outcomes(report, "prm.resource-metadata-url")).toEqual(["skip"]);
    expect(failedMusts(report)).toEqual(["challenge.www-authenticate"]);
  });

  it("challenge.www-authenticate: an unparsable header or a non-Bearer scheme fails", async () => {
    const garbled = await audit({ challenge: () => 'Bearer realm="unterminated' });
    expect(outcomes(garbled.report, "challenge.www-authenticate")).toEqual(["fail"]);
    const basic = await audit({ challenge: () => 'Basic realm="x"' });
    expect(outcomes(basic.report, "challenge.www-authenticate")).toEqual(["fail"]);
  });

  it("challenge.status-401: a resource that answers without a token fails", async () => {
    const { report } = await audit({ anonymousStatus: 200 });
    expect(outcomes(report, "challenge.status-401")).toEqual(["fail"]);
    expect(outcomes(report, "resource.query-token-refused")).toEqual(["skip"]);
  });

  it("prm.path-specific / prm.root: PRM only at the root is reported per form and still discoverable", async () => {
    const { report } = await audit({ prmAt: ["root"] });
    expect(outcomes(report, "prm.resource-metadata-url")).toEqual(["skip"]);
    expect(outcomes(report, "prm.path-specific")).toEqual(["info"]);
    expect(outcomes(report, "prm.root")).toEqual(["pass"]);
    expect(outcomes(report, "challenge.resource-metadata")).toEqual(["warn"]);
    expect(report.observations.selectedPrm?.source).toBe("root");
    expect(report.ok).toBe(true);
  });

  it("prm.discoverable: no PRM anywhere fails", async () => {
    const { report } = await audit({ prmAt: [] });
    expect(outcomes(report, "prm.discoverable")).toEqual(["fail"]);
    expect(report.observations.authorizationServers).toEqual([]);
    expect(report.ok).toBe(false);
  });

  it("prm.resource-metadata-url: a challenge URL that does not serve the PRM fails", async () => {
    const { report } = await audit({
      prmAt: ["path", "root"],
      challenge: ({ prmUrl }) => `Bearer resource_metadata="${prmUrl}"`,
    });
    expect(outcomes(report, "prm.resource-metadata-url")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["prm.resource-metadata-url"]);
  });

  it("prm.scopes-no-offline-access: offline_access in PRM scopes warns (2026-07-28 only)", async () => {
    const options: FixtureOptions = {
      prm: (doc) => ({ ...doc, scopes_supported: ["mcp:read", "offline_access"] }),
    };
    const latest = await audit(options);
    expect(outcomes(latest.report, "prm.scopes-no-offline-access")).toEqual(["warn", "warn", "warn"]);
    expect(latest.report.ok).toBe(true);
    const older = await audit(options, "2025-11-25");
    expect(outcomes(older.report, "prm.scopes-no-offline-access")).toEqual([]);
  });

  it("challenge.no-offline-access and challenge.no-error-without-token warn", async () => {
    const { report } = await audit({
      challenge: ({ prmUrl }) =>
        `Bearer error="invalid_request", scope="mcp:read offline_access", resource_metadata="${prmUrl}"`,
    });
    expect(outcomes(report, "challenge.no-offline-access")).toEqual(["warn"]);
    expect(outcomes(report, "challenge.no-error-without-token")).toEqual(["warn"]);
    expect(report.ok).toBe(true);
  });

  it("challenge.scope: a challenge without scope warns", async () => {
    const { report } = await audit({ challenge: ({ prmUrl }) => `Bearer resource_metadata="${prmUrl}"` });
    expect(outcomes(report, "challenge.scope")).toEqual(["warn"]);
  });

  it("prm.bearer-methods: query in bearer_methods_supported fails", async () => {
    const { report } = await audit({
      prm: (doc) => ({ ...doc, bearer_methods_supported: ["header", "query"] }),
    });
    expect(outcomes(report, "prm.bearer-methods")).toEqual(["fail", "fail", "fail"]);
    expect(failedMusts(report)).toEqual(["prm.bearer-methods"]);
  });

  it("prm.authorization-servers: an empty list fails and stops discovery", async () => {
    const { report } = await audit({ prm: (doc) => ({ ...doc, authorization_servers: [] }) });
    expect(outcomes(report, "prm.authorization-servers")).toEqual(["fail", "fail", "fail"]);
    expect(outcomes(report, "prm.discoverable")).toEqual(["fail"]);
  });

  it("prm.content-type: a PRM served as text/plain fails", async () => {
    const { report } = await audit({ prmContentType: "text/plain" });
    expect(outcomes(report, "prm.content-type")).toEqual(["fail", "fail", "fail"]);
    expect(failedMusts(report)).toEqual(["prm.content-type"]);
  });

  it("prm.valid: a PRM that is not JSON fails", async () => {
    const { report } = await audit({ prm: () => "not an object" as unknown as Record<string, unknown> });
    expect(outcomes(report, "prm.valid")).toEqual(["fail", "fail", "fail"]);
  });

  it("resource.query-token-refused: a resource accepting ?access_token= fails", async () => {
    const { report } = await audit({ acceptQueryToken: true });
    expect(outcomes(report, "resource.query-token-refused")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["resource.query-token-refused"]);
  });

  it("resource.invalid-token-401: a resource accepting any bearer token fails", async () => {
    const { report } = await audit({ bearerStatus: 200 });
    expect(outcomes(report, "resource.invalid-token-401")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["resource.invalid-token-401"]);
  });

  it("as.metadata-found: an AS serving only the OpenID Connect form passes; one serving none fails", async () => {
    const oidcOnly = await audit({ asForms: ["oidc-inserted"] });
    expect(outcomes(oidcOnly.report, "as.discovery-form")).toEqual(["info", "pass"]);
    expect(outcomes(oidcOnly.report, "as.metadata-found")).toEqual(["pass"]);
    const none = await audit({ asForms: [] });
    expect(outcomes(none.report, "as.metadata-found")).toEqual(["fail"]);
    expect(none.report.ok).toBe(false);
  });

  it("as.iss-parameter and as.client-id-metadata-documents warn when not announced", async () => {
    const { report } = await audit({
      asMetadata: ({
        authorization_response_iss_parameter_supported: _a,
        client_id_metadata_document_supported: _b,
        ...doc
      }) => doc,
    });
    expect(outcomes(report, "as.iss-parameter")).toEqual(["warn"]);
    expect(outcomes(report, "as.client-id-metadata-documents")).toEqual(["warn"]);
    expect(report.ok).toBe(true);
  });

  it("as.https: an endpoint on plain http at a non-loopback host fails", async () => {
    const { report } = await audit({
      asMetadata: (doc) => ({ ...doc, token_endpoint: "http://as.example.test/token" }),
    });
    expect(outcomes(report, "as.https")).toEqual(["fail"]);
    expect(report.findings.find((f) => f.rule === "as.https")?.message).toContain("token_endpoint");
  });

  it("as.endpoints and as.response-type-code: missing required fields fail", async () => {
    const { report } = await audit({
      asMetadata: ({ token_endpoint: _t, response_types_supported: _r, ...doc }) => doc,
    });
    expect(outcomes(report, "as.endpoints")).toEqual(["fail"]);
    expect(outcomes(report, "as.response-type-code")).toEqual(["fail"]);
  });

  it("as.issuer: multi-tenant metadata naming a {tenantid} issuer (Entra /common) fails with the fix", async () => {
    const { report } = await audit({
      issuerPath: "/common/v2.0",
      asMetadata: (doc, { issuer }) => ({ ...doc, issuer: `${new URL(issuer).origin}/{tenantid}/v2.0` }),
    });
    expect(outcomes(report, "as.issuer")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["as.issuer"]);
    const message = report.findings.find((f) => f.rule === "as.issuer")?.message ?? "";
    expect(message).toContain("template");
    expect(message).toContain(
      "/<tenant-id>/v2.0) in authorization_servers of the protected resource metadata",
    );
  });

  it("as.issuer: any other difference names both settings", async () => {
    const { report } = await audit({
      asMetadata: (doc) => ({ ...doc, issuer: "https://other.example.test" }),
    });
    expect(outcomes(report, "as.issuer")).toEqual(["fail"]);
    expect(report.findings.find((f) => f.rule === "as.issuer")?.message).toContain(
      "Set the authorization_servers entry in the protected resource metadata",
    );
  });

  it("as.resource-parameter: a correct server is not judged refusing (one request, info)", async () => {
    const { fixture, report } = await audit();
    expect(outcomes(report, "as.resource-parameter")).toEqual(["info"]);
    expect(fixture.requests.filter((r) => r.url.includes("/authorize"))).toHaveLength(1);
  });

  it("as.resource-parameter: an Entra-like page refusing the 'resource' parameter fails", async () => {
    const { fixture, report } = await audit({
      authorize: (params) =>
        params.has("resource")
          ? page("<p>AADSTS901002: The &#39;resource&#39; request parameter is not supported.</p>", 400)
          : page("<p>AADSTS700016: Application not found in the directory.</p>", 400),
    });
    expect(outcomes(report, "as.resource-parameter")).toEqual(["fail"]);
    expect(failedMusts(report)).toEqual(["as.resource-parameter"]);
    const message = report.findings.find((f) => f.rule === "as.resource-parameter")?.message ?? "";
    expect(message).toContain("'resource' request parameter is not supported");
    expect(message).toContain(`resource=${fixture.resourceUrl} is refused`);
    expect(message).toContain("list in authorization_servers of the protected resource metadata");
    // The control request went out without resource.
    const sent = fixture.requests.filter((r) => r.url.includes("/authorize"));
    expect(sent.map((r) => new URL(r.url).searchParams.has("resource"))).toEqual([true, false]);
  });

  it("as.resource-parameter: a redirect with error=invalid_target fails", async () => {
    const { report } = await audit({
      authorize: (params) => {
        if (!params.has("resource")) return page("<h1>Unknown application</h1>", 400);
        const back = new URL(params.get("redirect_uri")!);
        back.searchParams.set("error", "invalid_target");
        back.searchParams.set("state", params.get("state")!);
        return new Response(null, { status: 302, headers: { location: back.href } });
      },
    });
    expect(outcomes(report, "as.resource-parameter")).toEqual(["fail"]);
    expect(report.findings.find((f) => f.rule === "as.resource-parameter")?.message).toContain(
      '"invalid_target", 302 redirect',
    );
  });

  it("as.resource-parameter: a page naming invalid_target whatever was sent does not fail", async () => {
    const { report } = await audit({
      authorize: () => page('<script>const codes = ["invalid_request", "invalid_target"]</script>', 400),
    });
    expect(outcomes(report, "as.resource-parameter")).toEqual(["info"]);
    expect(report.ok).toBe(true);
  });

  it("as.issuer-identifier: an authorization_servers entry that is not a URL fails", async () => {
    const { report } = await audit({ prm: (doc) => ({ ...doc, authorization_servers: ["not a url"] }) });
    expect(outcomes(report, "as.issuer-identifier")).toEqual(["fail"]);
  });

  it("challenge.status-401: an unreachable resource fails without throwing", async () => {
    const fixture = await startFixture();
    const url = fixture.resourceUrl;
    await fixture.close();
    const report = await runCheck(url, { timeoutMs: 2000 });
    expect(outcomes(report, "challenge.status-401")).toEqual(["fail"]);
    expect(report.ok).toBe(false);
  });
});
