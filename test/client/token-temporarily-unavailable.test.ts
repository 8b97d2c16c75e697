/**
 * Issue 26: during a database outage the authorization server answers /token with 503
 * `temporarily_unavailable` and Retry-After (RFC 6749 §5.2 error code, RFC 9110 §10.2.3), and the
 * CLI said "token response does not conform — the server does not follow the MCP authorization
 * spec". The client now reads it as an outage: "token endpoint temporarily unavailable, retry in
 * N s", an OAuth error carrying `temporarily_unavailable`. A real authorization server stand-in on
 * loopback answers the token request so; the client and the CLI's wording are the real ones.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeError } from "../../src/cli/client-commands.js";
import { clientCredentialsGrant, createAuthFetch, isAuthorizationFlowError } from "../../src/client/index.js";

let server: Server;
let base: string;
let retryAfter: string | undefined = "7";

beforeAll(async () => {
  server = createServer((req, res) => {
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/mcp") {
      res.writeHead(401, {
        "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
      });
      return res.end();
    }
    if (req.url === "/.well-known/oauth-protected-resource/mcp")
      return json(200, { resource: `${base}/mcp`, authorization_servers: [base] });
    if (req.url === "/.well-known/oauth-authorization-server")
      return json(200, {
        issuer: base,
        token_endpoint: `${base}/token`,
        authorization_endpoint: `${base}/authorize`,
        response_types_supported: ["code"],
        grant_types_supported: ["client_credentials"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["client_secret_basic"],
      });
    if (req.url === "/token") {
      req.resume();
      return json(
        503,
        { error: "temporarily_unavailable", error_description: "the database is not answering" },
        retryAfter === undefined ? {} : { "retry-after": retryAfter },
      );
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function failure(): Promise<unknown> {
  const authFetch = createAuthFetch({
    grant: clientCredentialsGrant({ clientId: "svc", clientSecret: "s3cret-value" }),
  });
  try {
    await authFetch(`${base}/mcp`);
  } catch (error) {
    return error;
  }
  throw new Error("the request succeeded");
}

describe("503 temporarily_unavailable at the token endpoint", () => {
  it("is an outage with its wait, not a nonconforming server", async () => {
    retryAfter = "7";
    const error = await failure();
    expect(isAuthorizationFlowError(error)).toBe(true);
    if (!isAuthorizationFlowError(error)) return;
    expect(error.kind).toBe("oauth");
    expect(error.oauthError?.error).toBe("temporarily_unavailable");
    expect(error.status).toBe(503);
    const line = describeError(error);
    expect(line).toContain("token endpoint temporarily unavailable, retry in 7 s");
    expect(line).not.toContain("does not conform");
    expect(line).not.toContain("does not follow the MCP authorization spec");
  });

  it("without Retry-After it says to retry later", async () => {
    retryAfter = undefined;
    const line = describeError(await failure());
    expect(line).toContain("token endpoint temporarily unavailable, retry later");
  });
});
