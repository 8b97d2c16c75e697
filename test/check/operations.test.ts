/**
 * `gatehouse check --token-file`: the per-operation probes and rules against real servers on
 * loopback. @modelcontextprotocol/server-everything (HTTP, its own process) behind the gateway
 * (Gatehouse's operation gate) passes; broken set-ups fail: a server in front of the same gateway
 * that challenges one scope at a time, a gateway whose policy lets every tool through (the call
 * answered 200), and a server that refuses inside a 200 JSON-RPC answer.
 */

import type { ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parse } from "yaml";
import { type Finding, runCheck } from "../../src/check/index.js";
import { run } from "../../src/cli/commands/check.js";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  type OperationPolicy,
} from "../../src/resource-server/index.js";
import { parseOperationPolicy } from "../../src/resource-server/operations/policy.js";
import { startEverything } from "../gateway/everything.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

/** The operator's policy: echo for everyone, get-sum needs math, get-tiny-image two scopes at once. */
const POLICY_YAML = `base: [mcp:use]
default: deny
methods:
  tools/list: {}
tools:
  echo: {}
  get-sum: { scopes: [math] }
  get-tiny-image: { scopes: [images, media] }
`;

async function startGateway(
  issuer: TestIssuer,
  upstream: string,
  policy: OperationPolicy,
): Promise<{ url: string; server: ListeningServer }> {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const server = await listen((request) => handler(request));
  const resource = `${server.url}/mcp`;
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    scopesSupported: ["mcp:use", "math", "images", "media"],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, { policy, filterListings: true });
  const gateway = createHttpGateway({ upstream, resourceServer, gate });
  handler = (request) => gateway.fetch(request);
  return { url: resource, server };
}

/**
 * A broken server: relays to `target` but, on a 403, names only one scope of the challenge
 * (the last: one scope at a time, what 2026-07-28 asks servers not to do).
 */
async function startOneAtATime(target: string): Promise<ListeningServer> {
  return listen(async (request) => {
    const headers = new Headers(request.headers);
    headers.delete("host");
    const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.text();
    const answer = await fetch(target, {
      method: request.method,
      headers,
      ...(body !== undefined && { body }),
    });
    const out = new Headers(answer.headers);
    const challenge = answer.headers.get("www-authenticate");
    if (answer.status === 403 && challenge) {
      out.set("www-authenticate", challenge.replace(/scope="[^"]*?([^" ]+)"/, 'scope="$1"'));
    }
    out.delete("content-length");
    out.delete("content-encoding");
    return new Response(answer.body, { status: answer.status, headers: out });
  });
}

/** A broken server: accepts the token, lists one tool and refuses it inside a 200 JSON-RPC answer. */
async function startRefusesInside200(): Promise<ListeningServer> {
  return listen(async (request) => {
    if (request.method !== "POST") return new Response(null, { status: 405 });
    if (!request.headers.get("authorization")?.startsWith("Bearer ")) {
      return new Response(null, { status: 401, headers: { "www-authenticate": "Bearer" } });
    }
    const message = (await request.json()) as { id?: number; method: string };
    if (message.id === undefined) return new Response(null, { status: 202 });
    const result =
      message.method === "initialize"
        ? {
            protocolVersion: "2025-11-25",
            capabilities: { tools: {} },
            serverInfo: { name: "x", version: "1" },
          }
        : message.method === "tools/list"
          ? { tools: [{ name: "delete-note", inputSchema: { type: "object" } }] }
          : undefined;
    const body = result
      ? { jsonrpc: "2.0", id: message.id, result }
      : {
          jsonrpc: "2.0",
          id: message.id,
          error: { code: -32003, message: "Forbidden: insufficient scope notes:write" },
        };
    return Response.json(body);
  });
}

const only = (findings: Finding[], rule: string) => findings.filter((f) => f.rule === rule);

let issuer: TestIssuer;
let everything: { url: string; child: ChildProcess };
let directory: string;
let policyFile: string;
beforeAll(async () => {
  issuer = await startIssuer();
  everything = await startEverything();
  directory = await mkdtemp(join(tmpdir(), "gatehouse-check-ops-"));
  policyFile = join(directory, "policy.yaml");
  writeFileSync(policyFile, POLICY_YAML);
}, 30_000);
afterAll(async () => {
  everything?.child.kill("SIGKILL");
  await issuer?.close();
  if (directory) await rm(directory, { recursive: true, force: true });
});

describe("in front of server-everything", () => {
  let gated: { url: string; server: ListeningServer };
  let permissive: { url: string; server: ListeningServer };
  let oneAtATime: ListeningServer;
  beforeAll(async () => {
    gated = await startGateway(issuer, everything.url, parse(POLICY_YAML) as OperationPolicy);
    permissive = await startGateway(issuer, everything.url, { base: ["mcp:use"], tools: { "*": {} } });
    oneAtATime = await startOneAtATime(gated.url);
  });
  afterAll(async () => {
    await gated?.server.close();
    await permissive?.server.close();
    await oneAtATime?.close();
  });

  const token = (audience: string) =>
    issuer.sign({ aud: audience, sub: "auditor", client_id: "check", scope: "mcp:use" });

  it("the gateway passes: every tool the policy refuses gets 403 insufficient_scope naming all it needs", async () => {
    const report = await runCheck(gated.url, {
      operations: { token: await token(gated.url), policy: parseOperationPolicy(POLICY_YAML, policyFile) },
    });
    const ops = report.observations.operations!;
    expect(ops.error).toBeUndefined();
    // The filtered listing shows echo alone; the policy's hidden tools are called, echo is not run.
    expect(ops.listed).toEqual(["echo"]);
    expect(ops.calls.map((c) => c.tool).sort()).toEqual(["get-sum", "get-tiny-image"]);
    for (const rule of [
      "resource.operation-policy",
      "resource.operation-insufficient-scope",
      "resource.operation-challenge-scope",
    ]) {
      const verdicts = only(report.findings, rule);
      expect(verdicts.map((f) => [f.subject, f.outcome])).toEqual([
        ["tools/call get-sum", "pass"],
        ["tools/call get-tiny-image", "pass"],
      ]);
    }
    expect(only(report.findings, "resource.operation-challenge-scope")[1]!.message).toBe(
      'scope="mcp:use images media"',
    );
    // The token's value is in no finding and no exchange.
    const t = await token(gated.url);
    expect(JSON.stringify(report)).not.toContain(t.split(".")[2]);
  }, 30_000);

  it("a server that challenges one scope at a time is reported, naming the scope it left out", async () => {
    const report = await runCheck(`${oneAtATime.url}/mcp`, {
      operations: { token: await token(gated.url), policy: parseOperationPolicy(POLICY_YAML, policyFile) },
    });
    const challenge = only(report.findings, "resource.operation-challenge-scope");
    const image = challenge.find((f) => f.subject === "tools/call get-tiny-image")!;
    expect(image.outcome).toBe("warn"); // A SHOULD: warned, not failed.
    expect(image.message).toContain("absent: images");
    expect(challenge.find((f) => f.subject === "tools/call get-sum")!.outcome).toBe("pass");
  }, 30_000);

  it("a server that lets the call through (200) fails the policy rule, and the check", async () => {
    const report = await runCheck(permissive.url, {
      operations: {
        token: await token(permissive.url),
        policy: parseOperationPolicy(POLICY_YAML, policyFile),
      },
    });
    const enforced = only(report.findings, "resource.operation-policy");
    expect(enforced.map((f) => [f.subject, f.outcome])).toEqual([
      ["tools/call get-sum", "fail"],
      ["tools/call get-tiny-image", "fail"],
    ]);
    expect(enforced[0]!.message).toMatch(/^HTTP 200 .*\(the policy needs math\)$/);
    expect(report.ok).toBe(false);
  }, 30_000);

  it("without a policy, the listed tools are called and the refusals judged by their form", async () => {
    const report = await runCheck(gated.url, { operations: { token: await token(gated.url) } });
    const ops = report.observations.operations!;
    expect(ops.calls.map((c) => c.tool)).toEqual(["echo"]);
    // echo with no arguments is the server's argument error, not a refusal: nothing to judge.
    expect(only(report.findings, "resource.operation-insufficient-scope").map((f) => f.outcome)).toEqual([
      "skip",
    ]);
  }, 30_000);
});

describe("a server that refuses inside a 200", () => {
  let server: ListeningServer;
  beforeAll(async () => {
    server = await startRefusesInside200();
  });
  afterAll(async () => server?.close());

  it("is reported: no client can step up from a JSON-RPC error", async () => {
    const report = await runCheck(server.url, { operations: { token: "opaque-token-with-few-scopes" } });
    const verdicts = only(report.findings, "resource.operation-insufficient-scope");
    expect(verdicts).toHaveLength(1);
    expect(verdicts[0]).toMatchObject({ subject: "tools/call delete-note", outcome: "warn" });
    expect(verdicts[0]!.message).toContain("a refusal inside a 200");
  });

  it("with a policy but a token whose scopes are unknown, says so instead of guessing", async () => {
    const report = await runCheck(server.url, {
      operations: { token: "opaque-token-with-few-scopes", policy: parseOperationPolicy(POLICY_YAML, "p") },
    });
    expect(only(report.findings, "resource.operation-policy")[0]).toMatchObject({ outcome: "skip" });
    expect(only(report.findings, "resource.operation-policy")[0]!.message).toContain("--token-scope");
  });
});

describe("the command", () => {
  async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
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
    try {
      return { code: await run(args), stdout, stderr };
    } finally {
      vi.restoreAllMocks();
    }
  }

  it("refuses --policy without --token-file, and a token file that is not one token (status 2, no echo)", async () => {
    const missing = await cli(["http://127.0.0.1:9/mcp", "--policy", policyFile]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--policy and --token-scope need --token-file");
    const file = join(directory, "two-lines");
    writeFileSync(file, "secret-one\nsecret-two\n");
    const bad = await cli(["http://127.0.0.1:9/mcp", "--token-file", file]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("does not hold one bearer token");
    expect(bad.stderr).not.toContain("secret-one");
  });

  it("--token-file and --policy judge the calls, in the JSON report", async () => {
    const server = await startRefusesInside200();
    try {
      const file = join(directory, "token");
      writeFileSync(file, "opaque-token-with-few-scopes\n");
      const { code, stdout } = await cli([
        `${server.url}/mcp`,
        "--json",
        "--token-file",
        file,
        "--token-scope",
        "mcp:use",
        "--policy",
        policyFile,
      ]);
      expect(code).toBe(1);
      const report = JSON.parse(stdout) as { findings: Finding[] };
      const enforced = only(report.findings, "resource.operation-policy");
      // The listed tool (denied by the policy's default) and the policy's unlisted ones are called;
      // the server answers each with 200.
      expect(enforced.map((f) => [f.subject, f.outcome])).toEqual([
        ["tools/call delete-note", "fail"],
        ["tools/call get-sum", "fail"],
        ["tools/call get-tiny-image", "fail"],
      ]);
      expect(stdout).not.toContain("opaque-token-with-few-scopes");
    } finally {
      await server.close();
    }
  });
});
