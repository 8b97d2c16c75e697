/**
 * Issue 26: users could only be added, listed or given a new password, so offboarding was
 * impossible. `gatehouse users disable|enable|admin [--revoke]|remove` through the built CLI, on
 * SQLite and PostgreSQL: each names the store it wrote to, disabling and removing revoke the
 * user's grants (their tokens) and end the sessions (read back from the store), each change is an
 * audit line on stderr, and the last enabled administrator cannot be disabled, removed or demoted.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { createPostgresStore } from "../../src/storage/postgres/index.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { issueGrant, session } from "../../src/storage/testing/fixtures.js";
import { createTestDatabase, type TestDatabase } from "../support/instances.js";
import { ensureBuilt, logLines, runCli, tempDir } from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let db: TestDatabase;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-offboarding-");
  db = await createTestDatabase("offboarding");
});
afterAll(async () => {
  dir?.remove();
  await db?.drop();
});

/** What a signed-in user holds: a session and a grant with refresh and access tokens. */
async function signedIn(store: AuthorizationStore, userId: string) {
  const now = Date.now();
  const browser = session({ userId, createdAt: now, expiresAt: now + 3_600_000 });
  await store.createSession(browser);
  const { grantId, issued } = await issueGrant(store, now, { userId, sessionHash: browser.idHash });
  return { sessionHash: browser.idHash, grantId, refreshHash: issued.refreshToken!.tokenHash };
}

const STORES = [
  {
    name: "SQLite (--data)",
    flags: () => ["--data", join(dir.path, "data")],
    description: () => `SQLite ${join(dir.path, "data", "gatehouse.sqlite")}`,
    open: () => createSqliteStore({ path: join(dir.path, "data", "gatehouse.sqlite") }),
  },
  {
    name: "PostgreSQL (--database-url)",
    flags: () => ["--database-url", db.url],
    description: () => `PostgreSQL 127.0.0.1:5432/${db.name}`,
    open: () => createPostgresStore({ connectionString: db.url }),
  },
];

describe.each(STORES)("gatehouse users on $name", (target) => {
  const cli = (...args: string[]) => runCli(["users", ...args, ...target.flags()]);

  it("disable ends a user's access, enable lets them back, remove deletes them; the store is named", async () => {
    for (const name of ["ada", "bob"]) {
      const added = await cli("add", name, ...(name === "ada" ? ["--admin"] : []));
      expect(added.code, added.stderr).toBe(0);
    }
    let store = target.open();
    await store.migrate();
    const bob = (await store.getUserByUsername("bob"))!;
    const held = [await signedIn(store, bob.id), await signedIn(store, bob.id)];
    await store.close();

    const disabled = await cli("disable", "bob");
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(disabled.stdout).toContain("disabled user bob");
    expect(disabled.stdout).toContain("revoked 2 grants and ended 2 sessions");
    expect(disabled.stdout).toContain(`store: ${target.description()}`);
    const audit = logLines(disabled.stderr).find((l) => l.event === "user_changed");
    expect(audit, disabled.stderr).toMatchObject({
      audit: true,
      user_id: bob.id,
      change: "disable",
      by: "cli",
      grants_revoked: 2,
      sessions_ended: 2,
    });

    store = target.open();
    for (const h of held) {
      expect((await store.getGrant(h.grantId))?.revokedAt).toBeDefined();
      expect((await store.getRefreshToken(h.refreshHash))?.revokedAt).toBeDefined();
      expect(await store.getSession(h.sessionHash, Date.now())).toBeUndefined();
    }
    expect((await store.getUser(bob.id))?.disabledAt).toBeDefined();
    await store.close();

    const listed = await cli("list", "--json");
    expect(JSON.parse(listed.stdout).users).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ username: "bob", disabled: true, admin: false }),
        expect.objectContaining({ username: "ada", disabled: false, admin: true }),
      ]),
    );
    expect((await cli("list")).stdout).toMatch(/bob\s+no\s+disabled \d{4}-/);

    const enabled = await cli("enable", "bob", "--json");
    expect(JSON.parse(enabled.stdout)).toEqual({
      username: "bob",
      change: "enable",
      admin: false,
      disabled: false,
      store: target.description(),
    });

    const removed = await cli("remove", "bob");
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain("removed user bob");
    const again = await cli("remove", "bob");
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no user named bob in ${target.description()}`);
  });

  it("the last enabled administrator cannot be disabled, removed or demoted; after another is made one, it can", async () => {
    await cli("add", "carol");
    for (const args of [
      ["disable", "ada"],
      ["remove", "ada"],
      ["admin", "ada", "--revoke"],
    ]) {
      const refused = await cli(...args);
      expect(refused.code, args.join(" ")).toBe(1);
      expect(refused.stderr).toContain(`ada is the last enabled administrator in ${target.description()}`);
      expect(refused.stderr).toContain("gatehouse users admin <username>");
    }
    const promoted = await cli("admin", "carol");
    expect(promoted.code, promoted.stderr).toBe(0);
    expect(promoted.stdout).toContain("carol is now an administrator");
    const demoted = await cli("admin", "ada", "--revoke");
    expect(demoted.code, demoted.stderr).toBe(0);
    expect(demoted.stdout).toContain("ada is no longer an administrator");
    expect((await cli("disable", "carol")).code).toBe(1);
  });
});

describe("gatehouse users help", () => {
  it("lists the new subcommands and says what disabling does", async () => {
    const help = await runCli(["users", "--help"]);
    for (const line of [
      "users disable <username>",
      "users enable <username>",
      "users admin <username> [--revoke]",
      "users remove <username>",
    ]) {
      expect(help.stdout).toContain(line);
    }
    expect(help.stdout).toContain("The last enabled administrator");
  });
});
