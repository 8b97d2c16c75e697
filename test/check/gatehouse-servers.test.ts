/**
 * The auditor against this repository's own servers, composed as `gatehouse demo` composes them:
 * createAuthorizationServer (memory store) + the demo notes resource, both over node:http on
 * loopback. Every MUST rule is expected to hold, at both revisions and for an issuer with a path.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { runCheck } from "../../src/check/index.js";
import { createNotesResource } from "../../src/demo/notes-resource.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { Logger } from "../../src/shared/log.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";

const quiet: Logger = { info() {}, warn() {}, error() {} };

interface Stack {
  resourceUrl: string;
  issuer: string;
  close(): Promise<void>;
}

async function startStack(issuerPath: string, resourcePath: string): Promise<Stack> {
  let as: AuthorizationServer | undefined;
  let notes: ReturnType<typeof createNotesResource> | undefined;
  const asHttp: ListeningServer = await listen((r) => as!.fetch(r));
  const rsHttp: ListeningServer = await listen((r) => notes!.fetch(r));
  const issuer = `${asHttp.url}${issuerPath}`;
  const resource = `${rsHttp.url}${resourcePath}`;
  as = await createAuthorizationServer({
    issuer,
    store: createMemoryStore(),
    resources: [{ uri: resource, scopes: ["notes:read", "notes:write"] }],
    allowInsecureLoopback: true,
    dynamicRegistration: { enabled: true },
    clientMetadataDocuments: { enabled: true, trust: { kind: "any-https" } },
    maintenanceIntervalMs: 0,
    logger: quiet,
  });
  notes = createNotesResource({ resource, issuer, jwksUri: String(as.metadata.jwks_uri), logger: quiet });
  return {
    resourceUrl: `${resource}/notes`,
    issuer,
    async close() {
      await as!.close();
      await rsHttp.close();
      await asHttp.close();
    },
  };
}

describe.each([
  { issuerPath: "", resourcePath: "" },
  { issuerPath: "/tenant-a", resourcePath: "/api" },
])(
  "gatehouse check against Gatehouse's own servers (issuer path '$issuerPath')",
  ({ issuerPath, resourcePath }) => {
    let stack: Stack;
    beforeAll(async () => {
      stack = await startStack(issuerPath, resourcePath);
    });
    afterAll(async () => {
      await stack.close();
    });

    it.each(["2026-07-28", "2025-11-25"] as const)(
      "every MUST rule holds (revision %s)",
      async (revision) => {
        const report = await runCheck(stack.resourceUrl, { revision, timeoutMs: 5000 });
        const failed = report.findings.filter((f) => f.outcome === "fail");
        expect(failed).toEqual([]);
        expect(report.ok).toBe(true);
        // The facts behind the verdicts, so the pass is not vacuous.
        const outcome = (rule: string) =>
          report.findings.filter((f) => f.rule === rule).map((f) => f.outcome);
        expect(outcome("challenge.status-401")).toEqual(["pass"]);
        expect(outcome("challenge.resource-metadata")).toEqual(["pass"]);
        expect(outcome("as.pkce").length).toBeGreaterThan(0);
        expect(outcome("as.pkce").every((o) => o === "pass")).toBe(true);
        expect(outcome("as.issuer").every((o) => o === "pass")).toBe(true);
        expect(outcome("as.discovery-form").every((o) => o === "pass")).toBe(true);
        expect(outcome("as.discovery-form")).toHaveLength(issuerPath ? 3 : 2);
        expect(outcome("resource.invalid-token-401")).toEqual(["pass"]);
        expect(outcome("resource.invalid-token-error")).toEqual(["pass"]);
        expect(outcome("resource.query-token-refused")).toEqual(["pass"]);
        expect(report.observations.authorizationServers.map((s) => s.issuer)).toEqual([stack.issuer]);
        // The notes live under the resource URI: its PRM names the parent, which MCP clients accept.
        expect(outcome("prm.resource").every((o) => o === "warn")).toBe(true);
        if (revision === "2026-07-28")
          expect(outcome("as.iss-parameter").every((o) => o === "pass")).toBe(true);
      },
    );
  },
);
