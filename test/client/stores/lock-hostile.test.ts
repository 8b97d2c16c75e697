/**
 * Hostile lock paths and lock records (issue 22): a dangling symlink at the lock path or at its
 * takeover guard, a symlink pointing at someone else's file, a lock written on another host with
 * an mtime far in the future, and symlinks planted for the encrypted store's data and key files.
 * Every case must end (an error that says why, or the lock taken) well before the test's guard,
 * which only turns a hang into a failure message; no case asserts how long anything took.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EncryptedFileTokenStore } from "../../../src/client/stores/encrypted-file.js";
import { LockTimeoutError, withFileLock } from "../../../src/client/stores/file-lock.js";
import { settleWithin } from "../settle-within.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gh-lock-hostile-"));
  dirs.push(dir);
  return dir;
}

describe("withFileLock: hostile lock paths", () => {
  it("a dangling symlink at the lock path is refused with an error naming the symlink, not spun on", async () => {
    const dir = tempDir();
    const path = join(dir, "x.lock");
    symlinkSync(join(dir, "nowhere"), path);
    let ran = false;
    const outcome = await settleWithin(
      withFileLock(
        path,
        async () => {
          ran = true;
        },
        { waitMs: 500 },
      ),
    );
    expect(outcome.hung).toBeUndefined();
    expect(String(outcome.error)).toMatch(/symbolic link/);
    expect(String(outcome.error)).toContain(path);
    expect(ran).toBe(false);
    // The planted link is not followed: nothing was created at its target.
    expect(existsSync(join(dir, "nowhere"))).toBe(false);
  });

  it("a symlink to another file at the lock path is refused and the file it points at is untouched", async () => {
    const dir = tempDir();
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "keep me");
    const old = new Date(Date.now() - 3_600_000);
    utimesSync(victim, old, old); // old enough to look stale if it were judged as a lock
    const path = join(dir, "x.lock");
    symlinkSync(victim, path);
    const outcome = await settleWithin(withFileLock(path, async () => "ran", { waitMs: 500 }));
    expect(outcome.hung).toBeUndefined();
    expect(outcome.value).toBeUndefined();
    expect(String(outcome.error)).toMatch(/symbolic link/);
    expect(readFileSync(victim, "utf8")).toBe("keep me");
  });

  it("a stale lock whose takeover guard is a dangling symlink ends with an error, not a spin", async () => {
    const dir = tempDir();
    const path = join(dir, "x.lock");
    writeFileSync(path, JSON.stringify({ pid: 1, host: "elsewhere.invalid", created_at: 0, nonce: "left" }));
    const old = new Date(Date.now() - 3_600_000);
    utimesSync(path, old, old);
    symlinkSync(join(dir, "nowhere"), `${path}.takeover`);
    const outcome = await settleWithin(withFileLock(path, async () => "ran", { waitMs: 500 }));
    expect(outcome.hung).toBeUndefined();
    expect(String(outcome.error)).toMatch(/symbolic link/);
    expect(String(outcome.error)).toContain(`${path}.takeover`);
  });

  it("a lock from another host dated a year ahead is taken over once it stays unchanged for staleMs", async () => {
    const path = join(tempDir(), "x.lock");
    writeFileSync(
      path,
      JSON.stringify({ pid: 4242, host: "elsewhere.invalid", created_at: Date.now(), nonce: "future" }),
    );
    const ahead = new Date(Date.now() + 365 * 24 * 3_600_000);
    utimesSync(path, ahead, ahead);
    const outcome = await settleWithin(
      withFileLock(path, async () => "ran", { staleMs: 400, waitMs: 10_000 }),
    );
    expect(outcome.hung).toBeUndefined();
    expect(outcome.error).toBeUndefined();
    expect(outcome.value).toBe("ran");
    expect(existsSync(path)).toBe(false);
  });

  it("a future-dated lock that its owner keeps touching is still waited for (a living owner keeps it)", async () => {
    const path = join(tempDir(), "x.lock");
    writeFileSync(
      path,
      JSON.stringify({ pid: 4242, host: "elsewhere.invalid", created_at: Date.now(), nonce: "alive" }),
    );
    // Another host whose clock runs an hour ahead, touching its lock as a living owner does.
    let skewedNow = Date.now() + 3_600_000;
    const touch = () => {
      skewedNow += 100;
      utimesSync(path, new Date(skewedNow), new Date(skewedNow));
    };
    touch();
    const heartbeat = setInterval(touch, 100);
    try {
      const outcome = await settleWithin(
        withFileLock(path, async () => "ran", { staleMs: 400, waitMs: 1_500 }),
      );
      expect(outcome.hung).toBeUndefined();
      expect(outcome.error).toBeInstanceOf(LockTimeoutError);
      expect(JSON.parse(readFileSync(path, "utf8")).nonce).toBe("alive");
    } finally {
      clearInterval(heartbeat);
    }
  });
});

describe("EncryptedFileTokenStore: no symlink in the store directory is followed", () => {
  const record = {
    issuer: "https://as.example",
    client_id: "c",
    token_endpoint_auth_method: "none" as const,
    source: "dynamic" as const,
    registered_at: 1,
  };

  it("store.enc as a symlink to another file is refused, naming the symlink", async () => {
    const dir = join(tempDir(), "cfg");
    const store = new EncryptedFileTokenStore({ directory: dir });
    await store.set("client", "a", record);
    const elsewhere = join(dirs[dirs.length - 1]!, "elsewhere.enc");
    const before = readFileSync(join(dir, "store.enc"));
    writeFileSync(elsewhere, before);
    rmSync(join(dir, "store.enc"));
    symlinkSync(elsewhere, join(dir, "store.enc"));
    const fresh = new EncryptedFileTokenStore({ directory: dir });
    await expect(fresh.get("client", "a")).rejects.toThrow(/symbolic link/);
    await expect(fresh.set("client", "b", record)).rejects.toThrow(/symbolic link/);
    // The link's target was not rewritten through the link.
    expect(readFileSync(elsewhere).equals(before)).toBe(true);
  });

  it("store.key as a symlink is refused, naming the symlink", async () => {
    const root = tempDir();
    const dir = join(root, "cfg");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const planted = join(root, "planted.key");
    writeFileSync(planted, Buffer.alloc(32, 7).toString("base64url"));
    symlinkSync(planted, join(dir, "store.key"));
    const store = new EncryptedFileTokenStore({ directory: dir });
    await expect(store.set("client", "a", record)).rejects.toThrow(/symbolic link/);
    expect(existsSync(join(dir, "store.enc"))).toBe(false);
  });

  it("a dangling symlink at the data lock ends the write with an error, not a hang", async () => {
    const dir = join(tempDir(), "cfg");
    const store = new EncryptedFileTokenStore({ directory: dir, lock: { waitMs: 500 } });
    await store.set("client", "a", record);
    symlinkSync(join(dir, "nowhere"), join(dir, "store.enc.lock"));
    const outcome = await settleWithin(store.set("client", "b", record));
    expect(outcome.hung).toBeUndefined();
    expect(String(outcome.error)).toMatch(/symbolic link/);
    expect((await new EncryptedFileTokenStore({ directory: dir }).get("client", "a"))?.client_id).toBe("c");
  });
});
