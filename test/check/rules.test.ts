/**
 * Pure parts of the auditor: the transport classifier (an http authorization server on a
 * non-loopback name cannot be served from a test, so the classifier is tested directly, and through
 * the as.https rule with hand-built observations), the PRM resource comparison, the rule table's
 * shape and the report rendering.
 */
import { describe, expect, it } from "vitest";
import { classifyTransport, compareResource } from "../../src/check/classify.js";
import {
  buildReport,
  evaluateRules,
  formatHuman,
  formatJson,
  type Observations,
  RULES,
} from "../../src/check/index.js";
import { resourceRefusalIn } from "../../src/check/resource-parameter.js";

describe("classifyTransport (spec: authorization server endpoints MUST be HTTPS)", () => {
  it.each([
    ["https://as.example.com/token", "https"],
    ["HTTPS://AS.EXAMPLE.COM", "https"],
    ["http://localhost:4000/token", "loopback-http"],
    ["http://app.localhost/x", "loopback-http"],
    ["http://127.0.0.1:9/x", "loopback-http"],
    ["http://127.200.1.1/x", "loopback-http"],
    ["http://[::1]:8080/x", "loopback-http"],
    ["http://as.example.com/token", "insecure"],
    ["http://localhost.example.com/token", "insecure"],
    ["http://10.0.0.1/token", "insecure"],
    ["http://[::2]/token", "insecure"],
    ["ftp://as.example.com/", "insecure"],
    ["not a url", "invalid"],
  ])("%s → %s", (url, expected) => {
    expect(classifyTransport(url)).toBe(expected);
  });
});

describe("compareResource (RFC 9728 §3.3)", () => {
  it.each([
    ["https://rs.example/mcp", "https://rs.example/mcp", "exact"],
    ["https://rs.example/mcp", "HTTPS://RS.example/mcp/", "canonical"],
    ["https://rs.example", "https://rs.example/mcp", "prefix"],
    ["https://rs.example/mcp", "https://rs.example/mcpx", "mismatch"],
    ["https://rs.example/mcp", "https://other.example/mcp", "mismatch"],
    ["https://rs.example:8443/mcp", "https://rs.example/mcp", "mismatch"],
    ["http://rs.example/mcp", "https://rs.example/mcp", "mismatch"],
    ["https://rs.example/mcp#x", "https://rs.example/mcp", "mismatch"],
  ])("PRM %s for %s → %s", (prm, called, expected) => {
    expect(compareResource(prm, called)).toBe(expected);
  });
});

function observations(overrides: Partial<Observations> = {}): Observations {
  const issuer = "https://as.example.com";
  const metadata = {
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: "http://as.example.com/token",
    response_types_supported: ["code"],
    code_challenge_methods_supported: ["S256"],
  };
  return {
    resourceUrl: "https://rs.example.com/mcp",
    revision: "2026-07-28",
    unauthenticated: {
      url: "https://rs.example.com/mcp",
      form: "get",
      status: 401,
      wwwAuthenticate: null,
      challenges: [],
    },
    prm: [],
    authorizationServers: [
      {
        issuer,
        forms: [
          {
            url: `${issuer}/.well-known/oauth-authorization-server`,
            form: "rfc8414",
            status: 200,
            json: metadata,
          },
          { url: `${issuer}/.well-known/openid-configuration`, form: "oidc", status: 404 },
        ],
      },
    ],
    ...overrides,
  };
}

describe("rule table", () => {
  it("every rule has a unique id, a level and a spec reference", () => {
    const ids = RULES.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const rule of RULES) {
      expect(rule.id).toMatch(/^(transport|challenge|prm|resource|as|login)\.[a-z0-9-]+$/);
      expect(rule.id.startsWith(`${rule.group}.`)).toBe(true);
      expect(["MUST", "SHOULD", "MAY"]).toContain(rule.level);
      expect(rule.spec).toMatch(/RFC \d+|Spec "|OAuth 2\.1|OpenID/);
    }
  });

  it("as.https fails an http endpoint on a public host (hand-built observation)", () => {
    const findings = evaluateRules(observations());
    const https = findings.filter((f) => f.rule === "as.https");
    expect(https.map((f) => f.outcome)).toEqual(["fail"]);
    expect(https[0]!.message).toContain("token_endpoint=http://as.example.com/token");
  });

  it("transport.resource-https fails a plain-http resource on a public host", () => {
    const findings = evaluateRules(observations({ resourceUrl: "http://rs.example.com/mcp" }));
    expect(findings.find((f) => f.rule === "transport.resource-https")?.outcome).toBe("fail");
  });

  it("a SHOULD rule never yields fail, only warn", () => {
    const weak = {
      ...RULES[0]!,
      id: "challenge.weak",
      level: "SHOULD" as const,
      check: () => ({ outcome: "fail" as const, message: "x" }),
    };
    const [finding] = evaluateRules(observations(), [weak]);
    expect(finding?.outcome).toBe("warn");
  });

  it("rules limited to 2026-07-28 are not evaluated for 2025-11-25", () => {
    const ids = evaluateRules(observations({ revision: "2025-11-25" })).map((f) => f.rule);
    expect(ids).not.toContain("as.iss-parameter");
    expect(evaluateRules(observations()).map((f) => f.rule)).toContain("as.iss-parameter");
  });
});

describe("report rendering", () => {
  const report = buildReport(observations(), { exchanges: [] }, "2026-01-01T00:00:00.000Z");

  it("ok is false when a MUST fails, and the text names the rule and its spec section", () => {
    expect(report.ok).toBe(false);
    const text = formatHuman(report);
    expect(text).toContain("✖ The issuer and every endpoint use HTTPS");
    expect(text).toContain('[as.https] MUST · Spec "Token theft and communication security" 3');
    expect(text).toContain("Result: FAIL");
    // Grouped, in section order.
    expect(text.indexOf("401 challenge")).toBeLessThan(text.indexOf("Authorization server metadata"));
  });

  it("colours only when asked, and strips control characters from server-supplied text", () => {
    expect(formatHuman(report)).not.toContain("\u001b[");
    expect(formatHuman(report, { color: true })).toContain("\u001b[31m✖");
    const hostile = buildReport(
      observations({
        authorizationServers: [
          { issuer: "https://as.example.com\u001b[2J", invalid: "bad\u001b]0;x\u0007", forms: [] },
        ],
      }),
      { exchanges: [] },
      "2026-01-01T00:00:00.000Z",
    );
    const text = formatHuman(hostile);
    expect(text.includes("\u001b") || text.includes("\u0007")).toBe(false);
  });

  it("JSON output is one parsable object with findings and summary", () => {
    const parsed = JSON.parse(formatJson(report));
    expect(parsed.ok).toBe(false);
    expect(parsed.summary.fail).toBeGreaterThan(0);
    expect(parsed.findings.some((f: { rule: string }) => f.rule === "as.https")).toBe(true);
  });
});

describe("resourceRefusalIn (what counts as a refusal of resource)", () => {
  it.each([
    [
      "AADSTS901002: The &#39;resource&#39; request parameter is not supported.",
      "'resource' request parameter is not supported",
    ],
    [
      '{"error":"invalid_request","error_description":"the \\"resource\\" parameter is not allowed"}',
      '"resource" parameter is not allowed',
    ],
    ["invalid_target the resource is unknown", "invalid_target"],
    ["Unsupported resource parameter", "resource parameter"],
  ])("%s → %s", (text, expected) => {
    expect(resourceRefusalIn(text)).toBe(expected);
  });

  it.each([
    "The resource you requested could not be found",
    "AADSTS700016: Application with identifier 'gatehouse-check-probe' was not found",
    "invalid_targets_list",
    "resources parameter",
  ])("%s → nothing", (text) => {
    expect(resourceRefusalIn(text)).toBeUndefined();
  });
});

describe("as.resource-parameter under --login (hand-built observations)", () => {
  const verdicts = (login: Observations["login"]) =>
    evaluateRules(observations({ login }))
      .filter((f) => f.rule === "as.resource-parameter")
      .map((f) => [f.outcome, f.subject]);

  it("fails when the flow stopped on a refusal of resource, passes when it obtained a token", () => {
    expect(
      verdicts({
        attempted: true,
        error:
          "the authorization server refused the request [invalid_target] (ERR_AUTHORIZATION at authorize)",
      }),
    ).toEqual([["fail", "--login"]]);
    expect(verdicts({ attempted: true, tokenObtained: true })).toEqual([["pass", "--login"]]);
  });

  it("does not blame resource for a flow that stopped for another reason", () => {
    expect(verdicts({ attempted: true, error: "the user denied access [access_denied]" })).toEqual([
      ["skip", undefined],
    ]);
  });
});

describe("docs/check.md", () => {
  it("lists every rule id with its level", async () => {
    const { readFileSync } = await import("node:fs");
    const doc = readFileSync(new URL("../../docs/check.md", import.meta.url), "utf8");
    for (const rule of RULES) expect(doc).toContain(`| \`${rule.id}\` | ${rule.level} |`);
  });
});
