/**
 * The token stores' locks (TokenStore.withLock): the lock file shared by processes (file-lock.ts)
 * with its stale-lock rule, the encrypted file store's locked read-modify-write across real
 * processes (./lock-child.mjs on the built library), and the memory store's in-process mutex.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { EncryptedFileTokenStore } from "../../../src/client/stores/encrypted-file.js";
import { LockTimeoutError, withFileLock } from "../../../src/client/stores/file-lock.js";
import { MemoryTokenStore } from "../../../src/client/stores/memory.js";
import { ensureBuilt } from "../../cli/helpers.js";

const CHILD = join(import.meta.dirname, "lock-child.mjs");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
beforeAll(() => ensureBuilt());

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gh-locks-"));
  dirs.push(dir);
  return dir;
}

/** The pid of a process that has exited (a real pid, now free). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""]);
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid!;
}

function writeLock(path: string, owner: { pid: number; host?: string }, ageMs = 0): void {
  writeFileSync(
    path,
    JSON.stringify({ pid: owner.pid, host: owner.host ?? hostname(), created_at: Date.now(), nonce: "left" }),
  );
  if (ageMs > 0) {
    const then = new Date(Date.now() - ageMs);
    utimesSync(path, then, then);
  }
}

describe("withFileLock: the stale-lock rule", () => {
  it("takes over a lock whose pid is dead, and removes its own lock afterwards", async () => {
    const path = join(tempDir(), "x.lock");
    const pid = await deadPid();
    writeLock(path, { pid });
    const seen = await withFileLock(
      path,
      async () => JSON.parse(readFileSync(path, "utf8")) as { pid: number },
    );
    expect(seen.pid).toBe(process.pid);
    expect(existsSync(path)).toBe(false);
  });

  it("waits for a living owner and gives up with an error naming the file and pid", async () => {
    const path = join(tempDir(), "x.lock");
    writeLock(path, { pid: process.pid });
    let ran = false;
    const attempt = withFileLock(
      path,
      async () => {
        ran = true;
      },
      { waitMs: 300 },
    );
    await expect(attempt).rejects.toThrow(LockTimeoutError);
    await expect(attempt).rejects.toThrow(`${path} (held by pid ${process.pid} on ${hostname()})`);
    expect(ran).toBe(false);
    // The living owner's lock is still there.
    expect(JSON.parse(readFileSync(path, "utf8")).nonce).toBe("left");
  });

  it("takes over a lock not touched for staleMs even when its pid lives (a frozen owner)", async () => {
    const path = join(tempDir(), "x.lock");
    writeLock(path, { pid: process.pid }, 60_000);
    expect(await withFileLock(path, async () => "ran", { staleMs: 30_000, waitMs: 5_000 })).toBe("ran");
  });

  it("judges another host's lock by age only: a fresh one is waited for, an old one taken over", async () => {
    const path = join(tempDir(), "x.lock");
    // A pid that is dead here means nothing for a lock written on another machine.
    writeLock(path, { pid: await deadPid(), host: "elsewhere.invalid" });
    await expect(withFileLock(path, async () => "ran", { waitMs: 300 })).rejects.toThrow(
      /elsewhere\.invalid/,
    );
    writeLock(path, { pid: await deadPid(), host: "elsewhere.invalid" }, 60_000);
    expect(await withFileLock(path, async () => "ran", { staleMs: 30_000 })).toBe("ran");
  });

  it("a lock file cut short (no owner record) is judged by its age", async () => {
    const path = join(tempDir(), "x.lock");
    writeFileSync(path, "");
    await expect(withFileLock(path, async () => "ran", { waitMs: 300 })).rejects.toThrow(LockTimeoutError);
    const then = new Date(Date.now() - 60_000);
    utimesSync(path, then, then);
    expect(await withFileLock(path, async () => "ran")).toBe("ran");
  });

  it("releases the lock when the task throws", async () => {
    const path = join(tempDir(), "x.lock");
    await expect(
      withFileLock(path, async () => {
        throw new Error("task failed");
      }),
    ).rejects.toThrow("task failed");
    expect(existsSync(path)).toBe(false);
  });
});

interface Child {
  process: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, [CHILD], {
    env: { ...process.env, GATEHOUSE_STORE_KEY: "", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
      if (stdout.startsWith("ready\n")) resolve();
    });
    child.once("exit", () => reject(new Error(`the child exited before it was ready: ${stderr}`)));
  });
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once("close", (code) => resolve({ code, stdout, stderr })),
  );
  return { process: child, ready, done };
}

async function runTogether(children: Child[]) {
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.process.stdin.end("go\n");
  const results = await Promise.all(children.map((c) => c.done));
  for (const r of results) {
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("ready\ndone\n");
    expect(r.code).toBe(0);
  }
}

describe("EncryptedFileTokenStore across processes", () => {
  const PROCESSES = 4;
  const ROUNDS = 25;

  it("withLock excludes other processes: a read-modify-write counter loses no update", async () => {
    const dir = tempDir();
    const counter = join(dir, "counter");
    writeFileSync(counter, "0");
    const env = {
      STORE_DIR: join(dir, "cfg"),
      CHILD_MODE: "counter",
      COUNTER_FILE: counter,
      ROUNDS: String(ROUNDS),
    };
    await runTogether(Array.from({ length: PROCESSES }, (_, i) => startChild({ ...env, CHILD_ID: `p${i}` })));
    expect(Number(readFileSync(counter, "utf8"))).toBe(PROCESSES * ROUNDS);
  });

  it("concurrent writes from several processes are all kept (the data file's lock)", async () => {
    const dir = join(tempDir(), "cfg");
    const env = { STORE_DIR: dir, CHILD_MODE: "writes", ROUNDS: String(ROUNDS) };
    await runTogether(Array.from({ length: PROCESSES }, (_, i) => startChild({ ...env, CHILD_ID: `p${i}` })));
    const keys = (await new EncryptedFileTokenStore({ directory: dir }).list("client")).map(([k]) => k);
    expect(keys).toHaveLength(PROCESSES * ROUNDS);
    expect(existsSync(join(dir, "store.enc.lock"))).toBe(false);
  });
});

describe("MemoryTokenStore.withLock", () => {
  it("runs holders of one name one after another, and of different names independently", async () => {
    const store = new MemoryTokenStore();
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = store.withLock("a", async () => {
      order.push("first in");
      await new Promise<void>((resolve) => {
        releaseFirst = resolve;
      });
      order.push("first out");
    });
    const second = store.withLock("a", async () => {
      order.push("second in");
    });
    const other = store.withLock("b", async () => {
      order.push("other name");
    });
    await other;
    expect(order).toEqual(["first in", "other name"]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(["first in", "other name", "first out", "second in"]);
  });

  it("a failing holder releases the lock", async () => {
    const store = new MemoryTokenStore();
    await expect(
      store.withLock("a", async () => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(await store.withLock("a", async () => "next")).toBe("next");
  });
});
