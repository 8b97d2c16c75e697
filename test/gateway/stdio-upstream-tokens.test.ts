/**
 * `--stdio-upstream-token-env`: a stdio MCP server behind the gateway gets the user's upstream
 * access token in its environment, end to end on loopback: Gatehouse's authorization server with a
 * GitHub-style provider that keeps tokens (sealed, bound to the grant), users signing in through
 * it, the gateway asking `/upstream/token` with its own client credentials, and
 * @modelcontextprotocol/server-everything (stdio) printing its environment through its get-env
 * tool, driven by the SDK v2 client. Hostile: a user's child never has another user's token, nor
 * the MCP client's own token; after the grant is revoked (the access token, a JWT, still verifies
 * at the gateway) no child is started and nothing is injected.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { createStdioUpstream } from "../../src/gateway/stdio-upstream.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
  upstreamTokenClient,
} from "../../src/resource-server/index.js";
import { sha256Base64url } from "../../src/shared/crypto.js";
import type { Logger } from "../../src/shared/log.js";
import { generateKeyEncryptionKey } from "../../src/shared/secret-envelope.js";
import { Agent, hiddenFields, makeClient } from "../authorization-server/pages/harness.js";
import {
  type Gatehouse,
  type GithubLike,
  type McpClient,
  RESOURCE,
  registerMcpClient,
  startGatehouse,
  startGithubLike,
  visitProvider,
} from "../authorization-server/upstream/support.js";
import { ensureBuilt, MAIN } from "../cli/helpers.js";
import { testTls } from "../support/tls.js";
import { freePort } from "./everything.js";

/** The gateway's own confidential client at Gatehouse (the provider's keepTokens lists it). */
const GATEWAY = { clientId: "stdio-gateway", clientSecret: "stdio-gateway-secret-0123456789" };

let github: GithubLike;
let gatehouse: Gatehouse;
let mcp: McpClient;
const issued: string[] = [];
const logged: string[] = [];
const logger: Logger = {
  info: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
  warn: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
  error: (event, fields) => logged.push(JSON.stringify({ event, ...fields })),
};

beforeAll(async () => {
  github = await startGithubLike();
  for (const [id, login] of [
    [1, "octo"],
    [2, "hubot"],
  ] as const) {
    github.users.set(login, {
      id,
      login,
      emails: [{ email: `${login}@example.com`, primary: true, verified: true }],
      orgs: [],
    });
  }
  gatehouse = await startGatehouse(async () => ({
    providers: [
      github.providerOptions({
        createAccounts: true,
        keepTokens: { resourceServers: [{ clientId: GATEWAY.clientId, resource: RESOURCE }] },
      }),
    ],
    extra: {
      keyEncryptionKeys: [generateKeyEncryptionKey()],
      onAuditEvent: (event) => {
        if (event.type === "upstream_token_issued") issued.push(event.type);
      },
      clients: [
        makeClient({
          clientId: GATEWAY.clientId,
          redirectUris: [],
          responseTypes: [],
          grantTypes: [],
          tokenEndpointAuthMethod: "client_secret_basic",
          clientSecretHash: sha256Base64url(GATEWAY.clientSecret),
        }),
      ],
    },
  }));
  mcp = await registerMcpClient(gatehouse.url);
}, 30_000);
afterAll(async () => {
  await gatehouse?.close();
  await github?.close();
});

/** The MCP client's flow, the user signing in at the GitHub-style provider (as upstream-tokens.test.ts). */
async function signInThroughGithub(login: string): Promise<{ accessToken: string; refreshToken: string }> {
  const agent = new Agent(gatehouse.url);
  const toLogin = await agent.get(mcp.authorizeUrl().replace(gatehouse.url, ""));
  const loginPage = await agent.get(toLogin.headers.get("location")!);
  const started = await agent.post("/login", { ...hiddenFields(await loginPage.text()), upstream: "github" });
  const form = await visitProvider(started.headers.get("location")!);
  const fields = Object.fromEntries(
    [...form.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [
      m[1]!,
      m[2]!.replace(/&#38;/g, "&"),
    ]),
  );
  const decided = await visitProvider(`${github.url}/login/oauth/authorize`, {
    ...fields,
    login,
    decision: "authorize",
  });
  const done = await agent.get(decided.location!);
  const consent = await agent.get(done.headers.get("location")!);
  const approved = await agent.post("/consent", {
    ...hiddenFields(await consent.text()),
    decision: "approve",
  });
  const code = new URL(approved.headers.get("location")!).searchParams.get("code")!;
  const tokens = await mcp.redeem(code);
  expect(tokens.status).toBe(200);
  return { accessToken: String(tokens.body.access_token), refreshToken: String(tokens.body.refresh_token) };
}

/** GitHub's /user with `token`, as the stdio server would call it. */
function githubUser(token: string): Promise<{ status: number; login?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${github.url}/user`,
      { ca: testTls().ca, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const body = Buffer.concat(chunks).toString();
          resolve({
            status: res.statusCode ?? 0,
            login: res.statusCode === 200 ? JSON.parse(body).login : undefined,
          });
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Processes of this machine whose environment holds `value` (Linux /proc; ours are readable). */
function processesHolding(value: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`).includes(value)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return found;
}

/** Polls `check` until it holds or `ms` pass; answers its last value. */
async function eventually(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  return check();
}

/** The grant id a Gatehouse access token's jti names (`<grantId>.<unique>`). */
function grantOf(accessToken: string): string {
  const claims = JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString()) as {
    jti: string;
  };
  return claims.jti.slice(0, claims.jti.lastIndexOf("."));
}

async function startGateway(revocation?: { everyMs: number }) {
  const metadata = (await (
    await fetch(`${gatehouse.url}/.well-known/oauth-authorization-server`)
  ).json()) as {
    jwks_uri: string;
  };
  const resourceServer = createResourceServer({
    resource: RESOURCE,
    authorizationServers: [gatehouse.url],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: gatehouse.url, audience: RESOURCE, jwksUri: metadata.jwks_uri }),
    ),
  });
  const gate = createOperationGate(resourceServer, { policy: { base: ["notes:read"], default: {} } });
  const upstream = createStdioUpstream({
    argv: [
      process.execPath,
      createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/dist/index.js"),
      "stdio",
    ],
    env: { PATH: process.env.PATH ?? "" },
    scope: "user",
    upstreamTokens: {
      variables: { GITHUB_TOKEN: "github" },
      client: upstreamTokenClient({ issuer: gatehouse.url, clientAuth: GATEWAY }),
    },
    ...(revocation && { revocation: { store: gatehouse.store, everyMs: revocation.everyMs } }),
    logger,
  });
  const gateway = createHttpGateway({ stdio: upstream, resourceServer, gate, logger });
  // The gateway's handler called in process, at the resource's own URL (its Host check passes).
  const connect = async (accessToken: string) => {
    const transport = new StreamableHTTPClientTransport(new URL(RESOURCE), {
      fetch: (url, init) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${accessToken}`);
        return gateway.fetch(new Request(url, { ...init, headers }));
      },
    });
    const client = new Client({ name: "upstream-token-test", version: "1.0.0" });
    await client.connect(transport);
    return { client, transport };
  };
  return { upstream, gateway, connect };
}

async function childEnv(client: Client): Promise<Record<string, string>> {
  const answer = await client.callTool({ name: "get-env", arguments: {} });
  return JSON.parse((answer.content as { text: string }[])[0]!.text) as Record<string, string>;
}

describe("the user's upstream token in the stdio child's environment", () => {
  it("each user's child holds that user's GitHub token (opens /user as them), never the MCP client's token", async () => {
    const { upstream, connect } = await startGateway();
    try {
      const octo = await signInThroughGithub("octo");
      const hubot = await signInThroughGithub("hubot");
      const before = issued.length;
      const octoSession = await connect(octo.accessToken);
      const hubotSession = await connect(hubot.accessToken);
      const octoEnv = await childEnv(octoSession.client);
      const hubotEnv = await childEnv(hubotSession.client);
      expect(octoEnv.GITHUB_TOKEN).toMatch(/^gho_/);
      expect(await githubUser(octoEnv.GITHUB_TOKEN!)).toEqual({ status: 200, login: "octo" });
      expect(await githubUser(hubotEnv.GITHUB_TOKEN!)).toEqual({ status: 200, login: "hubot" });
      expect(hubotEnv.GITHUB_TOKEN).not.toBe(octoEnv.GITHUB_TOKEN);
      // Neither child sees an MCP client's access token, its own or another's.
      for (const env of [octoEnv, hubotEnv]) {
        for (const token of [octo.accessToken, hubot.accessToken]) {
          expect(Object.values(env).some((v) => v.includes(token))).toBe(false);
        }
      }
      // One fetch per child started; octo's second session joins the running child, fetching nothing.
      expect(issued.length - before).toBe(2);
      const octoAgain = await connect(octo.accessToken);
      expect(upstream.children).toBe(2);
      expect(issued.length - before).toBe(2);
      expect((await childEnv(octoAgain.client)).GITHUB_TOKEN).toBe(octoEnv.GITHUB_TOKEN);
      // A new child (after octo's sessions end) asks again.
      await octoSession.transport.terminateSession();
      await octoAgain.transport.terminateSession();
      expect(upstream.children).toBe(1);
      const octoLater = await connect(octo.accessToken);
      expect(issued.length - before).toBe(3);
      expect(await githubUser((await childEnv(octoLater.client)).GITHUB_TOKEN!)).toEqual({
        status: 200,
        login: "octo",
      });
    } finally {
      await upstream.close();
    }
  }, 60_000);

  it("after the grant is revoked, the still-verifying access token starts no child: nothing is injected", async () => {
    const { upstream, gateway } = await startGateway();
    try {
      const octo = await signInThroughGithub("octo");
      const revoked = await fetch(`${gatehouse.url}/revoke`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: mcp.clientId, token: octo.refreshToken }),
      });
      expect(revoked.status).toBe(200);
      const answer = await gateway.fetch(
        new Request(RESOURCE, {
          method: "POST",
          headers: {
            authorization: `Bearer ${octo.accessToken}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: {
              protocolVersion: "2025-11-25",
              capabilities: {},
              clientInfo: { name: "t", version: "1" },
            },
          }),
        }),
      );
      expect(answer.status).toBe(403);
      expect(answer.headers.get("mcp-session-id")).toBeNull();
      expect(await answer.json()).toMatchObject({
        id: 1,
        error: { message: "Sign in through github again to use this server" },
      });
      expect(upstream.children).toBe(0);
      // The refusal is logged by its reason, without a token.
      const line = logged.find((l) => l.includes("gateway.stdio_upstream_token_refused"))!;
      expect(JSON.parse(line)).toMatchObject({ provider: "github", reason: "invalid_request" });
      expect(logged.join("\n")).not.toContain(octo.accessToken);
      expect(logged.join("\n")).not.toMatch(/gho_/);
    } finally {
      await upstream.close();
    }
  }, 60_000);
});

describe("a revocation reaches the running child (the store shared with the authorization server)", () => {
  it("hostile: the grant revoked, the user's child (with the old GitHub token in its environment) is stopped; a new initialize is refused", async () => {
    const { upstream, connect, gateway } = await startGateway({ everyMs: 100 });
    try {
      const octo = await signInThroughGithub("octo");
      const session = await connect(octo.accessToken);
      const token = (await childEnv(session.client)).GITHUB_TOKEN!;
      expect(token).toMatch(/^gho_/);
      expect(processesHolding(token)).toHaveLength(1);
      const revoked = await fetch(`${gatehouse.url}/revoke`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: mcp.clientId, token: octo.refreshToken }),
      });
      expect(revoked.status).toBe(200);
      // The access token is a JWT and still verifies at the gateway: only the store tells.
      expect(await eventually(() => processesHolding(token).length === 0)).toBe(true);
      expect(upstream.children).toBe(0);
      await expect(childEnv(session.client)).rejects.toThrow();
      const again = await gateway.fetch(
        new Request(RESOURCE, {
          method: "POST",
          headers: {
            authorization: `Bearer ${octo.accessToken}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params: {} }),
        }),
      );
      expect(again.status).toBe(403);
      expect(upstream.children).toBe(0);
      const line = logged.find((l) => l.includes("gateway.stdio_access_gone"))!;
      expect(JSON.parse(line)).toMatchObject({ reason: "revoked" });
      expect(logged.join("\n")).not.toContain(token);
    } finally {
      await upstream.close();
    }
  }, 60_000);

  it("hostile: the kept GitHub token rotated, the child holding the old one is stopped; the next initialize gets the new one", async () => {
    const { upstream, connect } = await startGateway({ everyMs: 100 });
    try {
      const octo = await signInThroughGithub("octo");
      const first = await connect(octo.accessToken);
      const old = (await childEnv(first.client)).GITHUB_TOKEN!;
      // Let the first check note the version the child started with.
      await new Promise((r) => setTimeout(r, 300));
      expect(processesHolding(old)).toHaveLength(1);
      const grantId = grantOf(octo.accessToken);
      const set = (await gatehouse.store.getUpstreamTokens(grantId, "github"))!;
      // A rotation as the authorization server's refresh makes it: the set replaced, version up.
      expect(
        await gatehouse.store.replaceUpstreamTokens(grantId, "github", set.version, {
          sealed: set.sealed,
          updatedAt: Date.now(),
        }),
      ).toBe(true);
      expect(await eventually(() => processesHolding(old).length === 0)).toBe(true);
      expect(upstream.children).toBe(0);
      const line = logged.filter((l) => l.includes("gateway.stdio_access_gone")).at(-1)!;
      expect(JSON.parse(line)).toMatchObject({ reason: "upstream_token_rotated" });
      // Started again on the next initialize, with the kept token fetched afresh.
      const second = await connect(octo.accessToken);
      expect(await githubUser((await childEnv(second.client)).GITHUB_TOKEN!)).toEqual({
        status: 200,
        login: "octo",
      });
      expect(upstream.children).toBe(1);
    } finally {
      await upstream.close();
    }
  }, 60_000);

  it("hostile: a token whose grant is revoked (still a verifying JWT) does not join the user's running child", async () => {
    const { upstream, connect, gateway } = await startGateway({ everyMs: 60_000 });
    try {
      const live = await signInThroughGithub("octo");
      const session = await connect(live.accessToken);
      const token = (await childEnv(session.client)).GITHUB_TOKEN!;
      const other = await signInThroughGithub("octo");
      const revoked = await fetch(`${gatehouse.url}/revoke`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ client_id: mcp.clientId, token: other.refreshToken }),
      });
      expect(revoked.status).toBe(200);
      const joined = await gateway.fetch(
        new Request(RESOURCE, {
          method: "POST",
          headers: {
            authorization: `Bearer ${other.accessToken}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "initialize", params: {} }),
        }),
      );
      expect(joined.status).toBe(403);
      expect(joined.headers.get("mcp-session-id")).toBeNull();
      // The live grant's child is untouched.
      expect((await childEnv(session.client)).GITHUB_TOKEN).toBe(token);
    } finally {
      await upstream.close();
    }
  }, 60_000);

  it("a live grant keeps its child: checks that find nothing stop nothing", async () => {
    const { upstream, connect } = await startGateway({ everyMs: 50 });
    try {
      const octo = await signInThroughGithub("hubot");
      const session = await connect(octo.accessToken);
      const token = (await childEnv(session.client)).GITHUB_TOKEN!;
      await new Promise((r) => setTimeout(r, 400));
      expect(processesHolding(token)).toHaveLength(1);
      expect((await childEnv(session.client)).GITHUB_TOKEN).toBe(token);
    } finally {
      await upstream.close();
    }
  }, 60_000);
});

describe("the command", () => {
  it("--stdio-upstream-token-env GITHUB_TOKEN=github with the gateway's client credentials from a file", async () => {
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-upstream-"));
    const script = join(dir, "env-stdio.js");
    writeFileSync(
      script,
      `const rl = require("node:readline").createInterface({ input: process.stdin });
       rl.on("line", (line) => { const m = JSON.parse(line); if (m.id === undefined) return;
         process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { token: process.env.GITHUB_TOKEN ?? null, names: Object.keys(process.env) } }) + "\\n"); });`,
    );
    writeFileSync(join(dir, "policy.yaml"), "base: [notes:read]\ndefault: {}\n");
    writeFileSync(join(dir, "secret"), `${GATEWAY.clientSecret}\n`);
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        MAIN,
        "gateway",
        "--stdio",
        `"${process.execPath}" "${script}"`,
        "--stdio-upstream-token-env",
        "GITHUB_TOKEN=github",
        "--upstream-token-client-id",
        GATEWAY.clientId,
        "--upstream-token-client-secret-file",
        join(dir, "secret"),
        "--resource",
        RESOURCE,
        "--allowed-host",
        `127.0.0.1:${port}`,
        "--authorization-server",
        gatehouse.url,
        "--policy",
        join(dir, "policy.yaml"),
        "--port",
        String(port),
        "--json",
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, GATEHOUSE_GATEWAY_SECRET: "gateway-only" },
      },
    );
    let stdout = "";
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`gateway did not start: ${stderr}`)), 20_000);
        child.stdout!.on("data", (c: Buffer) => {
          stdout += c.toString();
          if (stdout.includes("\n")) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      const octo = await signInThroughGithub("octo");
      const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${octo.accessToken}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
      });
      expect(response.status).toBe(200);
      const { result } = (await response.json()) as { result: { token: string; names: string[] } };
      expect(await githubUser(result.token)).toEqual({ status: 200, login: "octo" });
      // The gateway's own secret and environment stay with the gateway.
      expect(result.names).not.toContain("GATEHOUSE_GATEWAY_SECRET");
      expect(result.names).toContain("GITHUB_TOKEN");
      expect(stderr).not.toContain(result.token);
      expect(stderr).not.toContain(GATEWAY.clientSecret);
      expect(stderr).not.toContain(octo.accessToken);
    } finally {
      child.kill("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await exited).toBe(0);
  }, 60_000);
});
