/**
 * The `as.dpop-algorithms` rule of `gatehouse check` (RFC 9449 §4.2, §5.1) against the loopback
 * fixture: asymmetric algorithms pass, a metadata document listing `none` or an HMAC algorithm
 * fails, one without ES256 warns, and a server that does not advertise DPoP is only noted.
 * (Gatehouse's own servers, which advertise DPoP, are audited in gatehouse-servers.test.ts, where
 * every MUST rule, this one included, must hold.)
 */
import { afterEach, describe, expect, it } from "vitest";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { type Fixture, type FixtureOptions, startFixture } from "./fixture.js";

const open: Fixture[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((f) => f.close()));
});

async function audit(options: FixtureOptions = {}): Promise<CheckReport> {
  const fixture = await startFixture(options);
  open.push(fixture);
  return runCheck(fixture.resourceUrl, { timeoutMs: 5000 });
}

function findings(report: CheckReport) {
  return report.findings.filter((f) => f.rule === "as.dpop-algorithms");
}

const withAlgs = (algs: unknown): FixtureOptions => ({
  asMetadata: (doc) => ({ ...doc, dpop_signing_alg_values_supported: algs }),
});

describe("gatehouse check: as.dpop-algorithms", () => {
  it("passes asymmetric algorithms including ES256", async () => {
    const found = findings(await audit(withAlgs(["ES256", "EdDSA"])));
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((f) => f.outcome === "pass")).toBe(true);
  });

  it("fails none and HMAC algorithms, naming them", async () => {
    for (const bad of [["ES256", "none"], ["HS256"]]) {
      const found = findings(await audit(withAlgs(bad)));
      expect(found.length).toBeGreaterThan(0);
      expect(found.every((f) => f.outcome === "fail")).toBe(true);
      expect(found[0]!.message).toContain(bad.at(-1)!);
    }
  });

  it("fails an empty list; a value that is not a list is the metadata schema's failure", async () => {
    const empty = findings(await audit(withAlgs([])));
    expect(empty.length).toBeGreaterThan(0);
    expect(empty.every((f) => f.outcome === "fail")).toBe(true);
    const report = await audit(withAlgs("ES256"));
    const schema = report.findings.filter((f) => f.rule === "as.metadata-valid");
    expect(
      schema.every((f) => f.outcome === "fail" && f.message.includes("dpop_signing_alg_values_supported")),
    ).toBe(true);
    expect(findings(report).map((f) => f.outcome)).toEqual(["skip"]);
  });

  it("warns when ES256 is missing, and only notes a server without DPoP", async () => {
    expect(findings(await audit(withAlgs(["PS256"]))).every((f) => f.outcome === "warn")).toBe(true);
    const none = findings(await audit());
    expect(none.length).toBeGreaterThan(0);
    expect(none.every((f) => f.outcome === "info")).toBe(true);
  });
});
