/**
 * The README's "protect a service" snippets (node:http, Express, Hono), run as written on
 * loopback: the only changes are the issuer URL (a local issuer whose key signs the test tokens)
 * and the port (0 instead of 3000). Then the spec's resource-server rules are checked over HTTP.
 */

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { importExample, REPO_ROOT } from "./package-source.js";

const README_ISSUER = "https://auth.example.com";
const RESOURCE = "https://api.example.com";

/** A local issuer: an ES256 key, its JWKS at `/jwks.json` on loopback, and an RFC 9068 signer. */
async function startIssuer() {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };
  const http: ListeningServer = await listen(async (request) =>
    new URL(request.url).pathname === "/jwks.json"
      ? Response.json({ keys: [jwk] })
      : new Response(null, { status: 404 }),
  );
  return {
    url: http.url,
    close: () => http.close(),
    sign: (claims: JWTPayload) =>
      new SignJWT({ client_id: "readme-client", ...claims })
        .setProtectedHeader({ alg: "ES256", kid: "k1", typ: "at+jwt" })
        .setIssuer(http.url)
        .setIssuedAt()
        .setExpirationTime("5m")
        .setJti(crypto.randomUUID())
        .sign(privateKey),
  };
}

/** The README's ```ts blocks. */
function readmeSnippets(): string[] {
  const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  return [...readme.matchAll(/^```ts[ \t]*\n([\s\S]*?)^```[ \t]*$/gm)].map((m) => m[1]!);
}

/**
 * Runs a snippet with the issuer replaced and port 0; returns the base URL of the server it
 * started. Servers are captured through `Server.prototype.listen`, which node:http, Express's
 * `app.listen` and `@hono/node-server`'s `serve` all go through.
 */
async function runSnippet(
  name: string,
  code: string,
  issuer: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const patched = code.replaceAll(README_ISSUER, issuer).replace(/\b3000\b/g, "0");
  expect(patched).not.toContain("3000");
  const dir = join(REPO_ROOT, ".cache", "readme-run");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.ts`);
  writeFileSync(file, patched);

  const started: Server[] = [];
  const original = Server.prototype.listen;
  Server.prototype.listen = function (this: Server, ...args: unknown[]) {
    started.push(this);
    return (original as (...a: unknown[]) => Server).apply(this, args);
  } as typeof original;
  try {
    await importExample(file);
  } finally {
    Server.prototype.listen = original;
  }
  expect(started).toHaveLength(1);
  const server = started[0]!;
  if (!server.listening) await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

let issuer: Awaited<ReturnType<typeof startIssuer>>;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

const SNIPPETS: [name: string, marker: string][] = [
  ["node-http", "createServer((req, res) =>"],
  ["express", 'from "gatehouse-auth/express"'],
  ["hono", 'from "gatehouse-auth/hono"'],
];

describe.each(SNIPPETS)("README snippet: protect a %s service", (name, marker) => {
  let service: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    const matching = readmeSnippets().filter((s) => s.includes(marker));
    expect(matching, `exactly one README snippet contains ${JSON.stringify(marker)}`).toHaveLength(1);
    service = await runSnippet(name, matching[0]!, issuer.url);
  });
  afterAll(async () => {
    await service?.close();
  });

  const bearer = async (claims: JWTPayload) => ({ authorization: `Bearer ${await issuer.sign(claims)}` });

  it("rule: no token → 401 with resource_metadata and no error", async () => {
    const response = await fetch(`${service.url}/notes`);
    expect(response.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenge?.scheme.toLowerCase()).toBe("bearer");
    expect(challenge?.params.error).toBeUndefined();
    expect(challenge?.params.resource_metadata).toBe(`${RESOURCE}/.well-known/oauth-protected-resource`);
  });

  it("serves the protected resource metadata publicly (RFC 9728)", async () => {
    const response = await fetch(`${service.url}/.well-known/oauth-protected-resource`);
    expect(response.status).toBe(200);
    const metadata = (await response.json()) as Record<string, unknown>;
    expect(metadata.resource).toBe(RESOURCE);
    expect(metadata.authorization_servers).toEqual([issuer.url]);
  });

  it("a valid token signed by the trusted issuer's key → 200, the handler sees the subject", async () => {
    const response = await fetch(`${service.url}/notes`, {
      headers: await bearer({ aud: RESOURCE, sub: "alice", scope: "notes:read" }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ owner: "alice", notes: [] });
  });

  it("rule: too few scopes → 403 insufficient_scope naming notes:read", async () => {
    const response = await fetch(`${service.url}/notes`, {
      headers: await bearer({ aud: RESOURCE, sub: "alice", scope: "profile" }),
    });
    expect(response.status).toBe(403);
    const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
    expect(challenge?.params.error).toBe("insufficient_scope");
    expect(challenge?.params.scope).toBe("notes:read");
  });

  it("rule: a token for another audience (even one that starts with ours) → 401 invalid_token", async () => {
    for (const aud of ["https://other.example.com", `${RESOURCE}.evil.example`]) {
      const response = await fetch(`${service.url}/notes`, {
        headers: await bearer({ aud, sub: "alice", scope: "notes:read" }),
      });
      expect(response.status).toBe(401);
      const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
      expect(challenge?.params.error).toBe("invalid_token");
    }
  });
});
