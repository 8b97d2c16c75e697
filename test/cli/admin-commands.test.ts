/**
 * `gatehouse users|clients|keys` against a real SQLite file: what they print, what they store
 * (hashes only), and that they refuse bad input with exit status 2.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyPassword } from "../../src/authorization-server/core/password.js";
import { sha256Base64url } from "../../src/shared/crypto.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { ensureBuilt, runCli, tempDir } from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let data: string[];

/** Reads the store the commands wrote, outside any command. */
async function inspect<T>(read: (store: ReturnType<typeof createSqliteStore>) => Promise<T>): Promise<T> {
  const store = createSqliteStore({ path: join(dir.path, "gatehouse.sqlite") });
  try {
    await store.migrate();
    return await read(store);
  } finally {
    await store.close();
  }
}

function dbBytes(): string {
  const file = join(dir.path, "gatehouse.sqlite");
  let text = readFileSync(file).toString("latin1");
  try {
    text += readFileSync(`${file}-wal`).toString("latin1");
  } catch {
    // no WAL file: everything is checkpointed
  }
  return text;
}

beforeAll(() => {
  ensureBuilt();
  dir = tempDir();
  data = ["--data", dir.path];
});
afterAll(() => dir.remove());

describe("gatehouse users", () => {
  it("generates, prints once and stores only a scrypt hash of the password when none is given", async () => {
    const r = await runCli(["users", "add", "alice", ...data, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as { username: string; password: string; admin: boolean };
    expect(printed.username).toBe("alice");
    expect(printed.admin).toBe(false);
    expect(printed.password).toMatch(/^[A-Za-z0-9]{20}$/);
    const user = await inspect((s) => s.getUserByUsername("alice"));
    expect(user?.passwordHash.startsWith("scrypt$")).toBe(true);
    expect(await verifyPassword(printed.password, user!.passwordHash)).toBe(true);
    expect(dbBytes()).not.toContain(printed.password);
  });

  it("never echoes a password read from stdin", async () => {
    const secret = "stdin-password-do-not-echo-7f3a";
    const r = await runCli(["users", "add", "bob", "--password-stdin", "--admin", ...data], {
      input: `${secret}\n`,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(secret);
    expect(r.stdout).toContain("created user bob (admin)");
    const user = await inspect((s) => s.getUserByUsername("bob"));
    expect(user?.isAdmin).toBe(true);
    expect(await verifyPassword(secret, user!.passwordHash)).toBe(true);
  });

  it("refuses a short stdin password, a duplicate user and a malformed username", async () => {
    const short = await runCli(["users", "add", "carol", "--password-stdin", ...data], { input: "short\n" });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain("at least 12 characters");
    expect(short.stderr).not.toContain("short\n");
    const duplicate = await runCli(["users", "add", "alice", ...data]);
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toContain("already exists");
    const bad = await runCli(["users", "add", "no spaces please", ...data]);
    expect(bad.code).toBe(2);
  });

  it("lists users without any hash and changes a password with passwd", async () => {
    const list = await runCli(["users", "list", ...data, "--json"]);
    expect(list.code, list.stderr).toBe(0);
    const users = (JSON.parse(list.stdout) as { users: { username: string; admin: boolean }[] }).users;
    expect(users.map((u) => u.username)).toEqual(["alice", "bob"]);
    expect(list.stdout).not.toContain("scrypt");
    const human = await runCli(["users", "list", ...data]);
    expect(human.stdout).toMatch(/USERNAME\s+ADMIN/);

    const before = await inspect((s) => s.getUserByUsername("alice"));
    const passwd = await runCli(["users", "passwd", "alice", ...data, "--json"]);
    expect(passwd.code, passwd.stderr).toBe(0);
    const { password } = JSON.parse(passwd.stdout) as { password: string };
    const after = await inspect((s) => s.getUserByUsername("alice"));
    expect(after?.passwordHash).not.toBe(before?.passwordHash);
    expect(await verifyPassword(password, after!.passwordHash)).toBe(true);
    const missing = await runCli(["users", "passwd", "nobody", ...data]);
    expect(missing.code).toBe(1);
  });
});

describe("gatehouse clients", () => {
  it("prints a confidential client's secret once and stores only its SHA-256", async () => {
    const r = await runCli([
      "clients",
      "add",
      "--name",
      "Reporting tool",
      "--redirect-uri",
      "https://app.example.com/callback",
      "--redirect-uri",
      "http://127.0.0.1/callback",
      "--confidential",
      "--scope",
      "notes:read",
      ...data,
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as {
      client_id: string;
      client_secret: string;
      token_endpoint_auth_method: string;
    };
    expect(printed.token_endpoint_auth_method).toBe("client_secret_basic");
    expect(printed.client_secret.length).toBeGreaterThanOrEqual(43); // 256 bits, base64url
    const client = await inspect((s) => s.getClient(printed.client_id));
    expect(client?.source).toBe("preregistered");
    expect(client?.clientSecretHash).toBe(sha256Base64url(printed.client_secret));
    expect(client?.redirectUris).toEqual(["https://app.example.com/callback", "http://127.0.0.1/callback"]);
    expect(client?.scope).toBe("notes:read");
    expect(dbBytes()).not.toContain(printed.client_secret);

    const list = await runCli(["clients", "list", ...data, "--json"]);
    expect(list.stdout).toContain(printed.client_id);
    expect(list.stdout).not.toContain(printed.client_secret);
    expect(list.stdout).not.toContain(client!.clientSecretHash!);
  });

  it("adds a public client with no secret", async () => {
    const r = await runCli([
      "clients",
      "add",
      "--name",
      "CLI",
      "--redirect-uri",
      "http://localhost:8765/cb",
      ...data,
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as { client_id: string; client_secret?: string };
    expect(printed.client_secret).toBeUndefined();
    const client = await inspect((s) => s.getClient(printed.client_id));
    expect(client?.tokenEndpointAuthMethod).toBe("none");
    expect(client?.clientSecretHash).toBeUndefined();
  });

  it("refuses redirect URIs the server would refuse (plain http off loopback, dangerous schemes, fragments)", async () => {
    for (const uri of ["http://app.example.com/cb", "javascript:alert(1)", "https://app.example.com/cb#x"]) {
      const r = await runCli(["clients", "add", "--name", "x", "--redirect-uri", uri, ...data]);
      expect(r.code, uri).toBe(2);
      expect(r.stderr).toContain("--redirect-uri");
    }
    const none = await runCli(["clients", "add", "--name", "x", ...data]);
    expect(none.code).toBe(2);
    const httpsId = await runCli([
      "clients",
      "add",
      "--name",
      "x",
      "--redirect-uri",
      "https://a.example/cb",
      "--client-id",
      "https://a.example/doc",
      ...data,
    ]);
    expect(httpsId.code).toBe(2);
  });

  it("refuses grant types the server does not know, a service grant for a public client, and redirect URIs without the code grant", async () => {
    const add = (...args: string[]) => runCli(["clients", "add", "--name", "svc", ...args, ...data]);
    const unknown = await add("--grant-type", "password", "--confidential");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--grant-type "password" is not one of');
    const publicExchange = await add("--grant-type", "urn:ietf:params:oauth:grant-type:token-exchange");
    expect(publicExchange.code).toBe(2);
    expect(publicExchange.stderr).toContain("needs a confidential client");
    const strayRedirect = await add(
      "--grant-type",
      "client_credentials",
      "--confidential",
      "--redirect-uri",
      "https://svc.example/cb",
    );
    expect(strayRedirect.code).toBe(2);
    expect(strayRedirect.stderr).toContain("--redirect-uri needs the authorization_code grant");
    // A device client: public, no redirect URI.
    const device = await add("--grant-type", "urn:ietf:params:oauth:grant-type:device_code", "--json");
    expect(device.code, device.stderr).toBe(0);
    expect(JSON.parse(device.stdout)).toMatchObject({
      token_endpoint_auth_method: "none",
      redirect_uris: [],
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code"],
    });
  });

  it("removes a client", async () => {
    const added = await runCli([
      "clients",
      "add",
      "--name",
      "Temp",
      "--redirect-uri",
      "https://t.example/cb",
      "--client-id",
      "temp-client",
      ...data,
    ]);
    expect(added.code, added.stderr).toBe(0);
    const removed = await runCli(["clients", "remove", "temp-client", ...data]);
    expect(removed.code, removed.stderr).toBe(0);
    expect(await inspect((s) => s.getClient("temp-client"))).toBeUndefined();
    const again = await runCli(["clients", "remove", "temp-client", ...data]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("no client");
  });
});

describe("gatehouse keys", () => {
  it("rotates: the new key signs, the old one stays published until tokens it signed expire", async () => {
    const first = await runCli(["keys", "rotate", ...data, "--json"]);
    expect(first.code, first.stderr).toBe(0);
    const second = await runCli(["keys", "rotate", ...data, "--json", "--access-token-ttl", "600"]);
    expect(second.code, second.stderr).toBe(0);
    const kid1 = (JSON.parse(first.stdout) as { kid: string }).kid;
    const kid2 = (JSON.parse(second.stdout) as { kid: string }).kid;
    expect(kid2).not.toBe(kid1);

    const list = await runCli(["keys", "list", ...data, "--json"]);
    expect(list.code, list.stderr).toBe(0);
    const keys = (JSON.parse(list.stdout) as { keys: { kid: string; status: string }[] }).keys;
    expect(keys.find((k) => k.kid === kid2)?.status).toBe("signing");
    expect(keys.find((k) => k.kid === kid1)?.status).toBe("published");
    // Public facts only.
    expect(list.stdout).not.toMatch(/"d"\s*:/);
    const stored = await inspect((s) => s.listSigningKeys());
    const old = stored.find((k) => k.kid === kid1)!;
    expect(old.expiresAt! - old.retiredAt!).toBe((600 + 300) * 1000);
  });

  it("answers an unknown subcommand with usage and status 2", async () => {
    const r = await runCli(["keys", "explode", ...data]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown subcommand");
  });
});
