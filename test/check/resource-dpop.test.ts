/**
 * The resource side of DPoP in `gatehouse check` (RFC 9449 §7, RFC 9728 §2): `prm.dpop` and
 * `challenge.dpop`. Gatehouse's own gate with each DPoP policy (bearer, allowed, required) in front
 * of Gatehouse's authorization server holds every MUST rule, and the findings say what each policy
 * advertises; the loopback fixture, deliberately broken, fails where a client would be misled:
 * DPoP required without algorithms, `none`/HS* listed, a Bearer-only challenge, bad `algs`.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { type CheckReport, runCheck } from "../../src/check/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { createResourceServer, jwtVerifier } from "../../src/resource-server/index.js";
import type { Logger } from "../../src/shared/log.js";
import { buildChallenge } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { type Fixture, type FixtureOptions, startFixture } from "./fixture.js";

const quiet: Logger = { info() {}, warn() {}, error() {} };

function outcomes(report: CheckReport, rule: string) {
  return report.findings.filter((f) => f.rule === rule);
}

describe("gatehouse check against Gatehouse's gate with each DPoP policy", () => {
  const POLICIES = ["bearer", "allowed", "required"] as const;
  let as: AuthorizationServer | undefined;
  let asHttp: ListeningServer;
  const gates = new Map<(typeof POLICIES)[number], ListeningServer>();
  const handlers = new Map<string, (r: Request) => Promise<Response>>();

  beforeAll(async () => {
    asHttp = await listen((r) => as!.fetch(r));
    for (const policy of POLICIES) {
      gates.set(
        policy,
        await listen(
          (r) => handlers.get(policy)?.(r) ?? Promise.resolve(new Response(null, { status: 503 })),
        ),
      );
    }
    // One authorization server issuing tokens for the three gates below, each its own resource.
    as = await createAuthorizationServer({
      issuer: asHttp.url,
      store: createMemoryStore(),
      resources: [...gates.values()].map((g) => ({ uri: g.url, scopes: ["notes:read"] })),
      allowInsecureLoopback: true,
      maintenanceIntervalMs: 0,
      logger: quiet,
    });
  });
  afterAll(async () => {
    await Promise.all([...gates.values()].map((g) => g.close()));
    await as?.close();
    await asHttp.close();
  });

  /** The gate of `policy` (DPoP options as an operator writes them); the resource is its origin. */
  function startGate(policy: (typeof POLICIES)[number]): string {
    const http = gates.get(policy)!;
    const gate = createResourceServer({
      resource: http.url,
      authorizationServers: [asHttp.url],
      scopesSupported: ["notes:read"],
      logger: quiet,
      verifier: jwtVerifier({
        issuer: asHttp.url,
        audience: http.url,
        jwksUri: String(as!.metadata.jwks_uri),
      }),
      dpop: { policy, algorithms: ["ES256", "EdDSA"] },
    });
    const protectedRoute = gate.requireBearer({ scopes: ["notes:read"] });
    handlers.set(policy, async (request) =>
      gate.handles(request)
        ? gate.metadataResponse(request)
        : protectedRoute(request, async () => Response.json({})),
    );
    return `${http.url}/notes`;
  }

  it.each(["bearer", "allowed", "required"] as const)("policy %s: every MUST rule holds", async (policy) => {
    const report = await runCheck(startGate(policy), { timeoutMs: 5000 });
    expect(report.findings.filter((f) => f.outcome === "fail")).toEqual([]);
    expect(report.ok).toBe(true);
    const prm = outcomes(report, "prm.dpop");
    const challenge = outcomes(report, "challenge.dpop");
    expect(prm.length).toBeGreaterThan(0);
    expect(challenge).toHaveLength(1);
    const replay = outcomes(report, "prm.dpop-replay");
    if (policy === "bearer") {
      expect(prm.every((f) => f.outcome === "info" && f.message === "DPoP not advertised")).toBe(true);
      expect(challenge[0]!.outcome).toBe("skip");
      expect(replay.map((f) => f.outcome)).toEqual(["skip"]);
    } else {
      // Several instances need one shared replay guard: said, since it cannot be seen from outside.
      expect(replay.map((f) => f.outcome)).toEqual(["info"]);
      expect(replay[0]!.message).toContain("storeReplayGuard");
      expect(prm.every((f) => f.outcome === "pass")).toBe(true);
      expect(prm[0]!.message).toBe(`DPoP ${policy === "required" ? "required" : "accepted"}: ES256, EdDSA`);
      expect(challenge[0]!).toMatchObject({ outcome: "pass" });
      expect(challenge[0]!.message).toContain('algs="ES256 EdDSA"');
    }
    // A DPoP-only resource's challenge is the DPoP one: the challenge rules read it.
    const www = outcomes(report, "challenge.www-authenticate")[0]!;
    expect(www.outcome).toBe("pass");
    if (policy === "required") {
      expect(www.message).toContain("DPoP challenge only");
      expect(outcomes(report, "challenge.resource-metadata")[0]!.outcome).toBe("pass");
      expect(outcomes(report, "resource.invalid-token-error")[0]!.outcome).toBe("pass");
    }
  });
});

describe("gatehouse check against a resource that gets DPoP wrong", () => {
  const open: Fixture[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((f) => f.close()));
  });

  async function audit(options: FixtureOptions): Promise<CheckReport> {
    const fixture = await startFixture(options);
    open.push(fixture);
    return runCheck(fixture.resourceUrl, { timeoutMs: 5000 });
  }

  const prm =
    (fields: Record<string, unknown>): FixtureOptions["prm"] =>
    (doc) => ({ ...doc, ...fields });
  const dpopOnly =
    (algs?: string) =>
    ({ prmUrl }: { prmUrl: string }) =>
      buildChallenge("DPoP", { resource_metadata: prmUrl, ...(algs === undefined ? {} : { algs }) });

  it("fails DPoP required without algorithms, and algorithms that are none or HMAC", async () => {
    const missing = outcomes(
      await audit({ prm: prm({ dpop_bound_access_tokens_required: true }), challenge: dpopOnly("ES256") }),
      "prm.dpop",
    );
    expect(missing.length).toBeGreaterThan(0);
    expect(missing.every((f) => f.outcome === "fail" && f.message.includes("missing"))).toBe(true);

    for (const bad of [["ES256", "none"], ["HS256"]]) {
      const found = outcomes(
        await audit({ prm: prm({ dpop_signing_alg_values_supported: bad }) }),
        "prm.dpop",
      );
      expect(found.length).toBeGreaterThan(0);
      expect(found.every((f) => f.outcome === "fail" && f.message.includes(bad.at(-1)!))).toBe(true);
    }
    const notBoolean = outcomes(
      await audit({
        prm: prm({ dpop_bound_access_tokens_required: "yes", dpop_signing_alg_values_supported: ["ES256"] }),
      }),
      "prm.dpop",
    );
    expect(notBoolean.every((f) => f.outcome === "fail" && f.message.includes("not a boolean"))).toBe(true);
  });

  it("fails a resource whose metadata requires DPoP but whose 401 offers only Bearer", async () => {
    const report = await audit({
      prm: prm({ dpop_bound_access_tokens_required: true, dpop_signing_alg_values_supported: ["ES256"] }),
    });
    const [finding] = outcomes(report, "challenge.dpop");
    expect(finding).toMatchObject({ outcome: "fail", level: "MUST" });
    expect(finding!.message).toContain("schemes: Bearer");
    expect(report.ok).toBe(false);
  });

  it("fails none or HS* in the challenge's algs; warns without algs, with Bearer beside, or algs unlike the metadata", async () => {
    const required = prm({
      dpop_bound_access_tokens_required: true,
      dpop_signing_alg_values_supported: ["ES256"],
    });
    const judged = async (challenge: FixtureOptions["challenge"]) =>
      outcomes(await audit({ prm: required, challenge }), "challenge.dpop")[0]!;

    const hmac = await judged(dpopOnly("ES256 HS256"));
    expect(hmac.outcome).toBe("fail");
    expect(hmac.message).toContain("HS256");
    const noAlgs = await judged(dpopOnly());
    expect(noAlgs.outcome).toBe("warn");
    expect(noAlgs.message).toContain("no algs");
    const both = await judged(
      ({ prmUrl }) =>
        `${buildChallenge("Bearer", { resource_metadata: prmUrl })}, ${buildChallenge("DPoP", { algs: "ES256" })}`,
    );
    expect(both.outcome).toBe("warn");
    expect(both.message).toContain("also offers Bearer");
    const unlike = await judged(dpopOnly("EdDSA"));
    expect(unlike.outcome).toBe("warn");
    expect(unlike.message).toContain("differ");
    expect(await judged(dpopOnly("ES256"))).toMatchObject({ outcome: "pass" });
  });

  it("only notes a resource that accepts DPoP but challenges with Bearer alone", async () => {
    const report = await audit({ prm: prm({ dpop_signing_alg_values_supported: ["ES256"] }) });
    expect(outcomes(report, "prm.dpop").every((f) => f.outcome === "pass")).toBe(true);
    expect(outcomes(report, "challenge.dpop")[0]!.outcome).toBe("info");
  });
});
