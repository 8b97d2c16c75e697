/**
 * `gatehouse demo` (what `npm start` runs) as a real process on free ports: the JSON ready line,
 * health, metadata, the notes resource's 401 challenge pointing at its metadata, and the demo user
 * whose password is reset (and printed) on every start.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyPassword } from "../../src/authorization-server/password.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { type DemoReady, ensureBuilt, type RunningCli, startCli, tempDir } from "../cli/helpers.js";

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-demo-");
  demo = await startCli<DemoReady>([
    "demo",
    "--port",
    "0",
    "--resource-port",
    "0",
    "--data",
    dir.path,
    "--json",
  ]);
});
afterAll(async () => {
  await demo?.stop();
  dir?.remove();
});

describe("gatehouse demo", () => {
  it("prints exactly one JSON line with the real ports", () => {
    const { ready } = demo;
    expect(ready.issuer).toBe(`http://localhost:${ready.port}`);
    expect(ready.resource).toBe(`http://localhost:${ready.resourcePort}`);
    expect(ready.port).toBeGreaterThan(0);
    expect(ready.resourcePort).toBeGreaterThan(0);
    expect(ready.username).toBe("demo");
    expect(ready.password.length).toBeGreaterThanOrEqual(16);
    expect(demo.stdout().trim().split("\n")).toHaveLength(1);
    // Development mode is said loudly.
    expect(demo.stderr()).toContain("INSECURE");
  });

  it("answers /health and serves metadata for its issuer, with the demo scopes and registration", async () => {
    const health = await fetch(`${demo.ready.issuer}/health`);
    expect(health.status).toBe(200);
    const res = await fetch(`${demo.ready.issuer}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    const metadata = (await res.json()) as Record<string, unknown>;
    expect(metadata.issuer).toBe(demo.ready.issuer);
    expect(metadata.scopes_supported).toEqual(
      expect.arrayContaining(["notes:read", "notes:write", "offline_access"]),
    );
    expect(metadata.code_challenge_methods_supported).toEqual(["S256"]);
    expect(metadata.registration_endpoint).toBe(`${demo.ready.issuer}/register`);
    expect(metadata.client_id_metadata_document_supported).toBe(true);
    expect(metadata.authorization_response_iss_parameter_supported).toBe(true);
  });

  it("protects GET /notes with a 401 whose challenge names the resource metadata", async () => {
    const res = await fetch(`${demo.ready.resource}/notes`);
    expect(res.status).toBe(401);
    const header = res.headers.get("www-authenticate") ?? "";
    const challenge = parseWWWAuthenticate(header).find((c) => c.scheme.toLowerCase() === "bearer");
    expect(challenge, header).toBeDefined();
    const metadataUrl = challenge!.params.resource_metadata;
    expect(metadataUrl).toBe(`${demo.ready.resource}/.well-known/oauth-protected-resource`);
    const prm = (await (await fetch(metadataUrl!)).json()) as {
      resource: string;
      authorization_servers: string[];
    };
    expect(prm.resource).toBe(demo.ready.resource);
    expect(prm.authorization_servers).toEqual([demo.ready.issuer]);
    const bad = await fetch(`${demo.ready.resource}/notes`, {
      headers: { authorization: "Bearer not-a-token" },
    });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("www-authenticate")).toContain('error="invalid_token"');
  });

  it("resets the demo user's password on each start and exits 0 on SIGTERM", async () => {
    const first = demo.ready.password;
    const { code } = await demo.stop();
    expect(code).toBe(0);
    demo = await startCli<DemoReady>([
      "demo",
      "--port",
      "0",
      "--resource-port",
      "0",
      "--data",
      dir.path,
      "--json",
    ]);
    expect(demo.ready.password).not.toBe(first);
    const { code: code2 } = await demo.stop();
    expect(code2).toBe(0);
    const store = createSqliteStore({ path: join(dir.path, "gatehouse.sqlite") });
    try {
      const users = await store.listUsers();
      expect(users.filter((u) => u.username === "demo")).toHaveLength(1);
      expect(await verifyPassword(demo.ready.password, users[0]!.passwordHash)).toBe(true);
      expect(await verifyPassword(first, users[0]!.passwordHash)).toBe(false);
    } finally {
      await store.close();
    }
  });
});
