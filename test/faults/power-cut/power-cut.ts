/**
 * TEST ONLY: the power-cut emulation's two halves outside the shim (./shim.c): compiling the shim
 * with the machine's C compiler, and the restore step that, after a SIGKILL, reverts every write the
 * process did not fsync. Plus a `gatehouse serve` started under the shim (./serve.mjs).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { open, readdir, readFile, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { databaseArgs, RESOURCE, SCOPES, SHARED_ISSUER } from "../../support/instances.js";

const SHIM_SOURCE = fileURLToPath(new URL("./shim.c", import.meta.url));
const SERVE = fileURLToPath(new URL("./serve.mjs", import.meta.url));
const MAIN = fileURLToPath(new URL("../../../dist/cli/main.js", import.meta.url));

/** Compiles the shim into `dir` with the machine's `cc` and returns the shared object's path. */
export function compileShim(dir: string): Promise<string> {
  const out = join(dir, "powercut.so");
  return new Promise((resolve, reject) => {
    execFile(
      "cc",
      ["-O1", "-shared", "-fPIC", "-Wall", "-Werror", "-o", out, SHIM_SOURCE, "-ldl", "-lpthread"],
      { timeout: 60_000 },
      (error, _stdout, stderr) =>
        error ? reject(new Error(`cc could not build the power-cut shim: ${stderr}`)) : resolve(out),
    );
  });
}

interface Undo {
  index: number;
  path: string;
  offset: number;
  oldSize: number;
  oldBytes: Buffer;
}

export interface RestoreResult {
  /** Undo records applied (writes that were never synced and are now gone). */
  reverted: number;
  /** Writes the process made that a sync covered. */
  durable: number;
  /** Sync records seen. */
  syncs: number;
  /** Undo records per file (by base name): reverted, and covered by a sync. */
  byFile: Record<string, { reverted: number; durable: number }>;
}

/**
 * Applies, newest first, every undo record of the log at `logPath` that no later sync of its file
 * covered: the files under the shim's directory go back to what was on disk at the power cut. A
 * torn last record (the process killed while appending it) is ignored: its write never happened.
 * The -shm files go too (on a real machine they would hold whatever; SQLite rebuilds them).
 */
export async function restoreAfterPowerCut(logPath: string, dir: string): Promise<RestoreResult> {
  const log = existsSync(logPath) ? await readFile(logPath) : Buffer.alloc(0);
  const undos: Undo[] = [];
  const syncedBefore = new Map<string, number>();
  let syncs = 0;
  let at = 0;
  const need = (n: number) => at + n <= log.length;
  for (;;) {
    if (!need(5)) break;
    const kind = String.fromCharCode(log[at]!);
    const plen = log.readUInt32LE(at + 1);
    if (!need(5 + plen)) break;
    const path = log.toString("utf8", at + 5, at + 5 + plen);
    let p = at + 5 + plen;
    if (kind === "U") {
      if (!need(5 + plen + 24)) break;
      const offset = Number(log.readBigInt64LE(p));
      const oldSize = Number(log.readBigInt64LE(p + 8));
      const oldLen = Number(log.readBigInt64LE(p + 16));
      p += 24;
      if (p + oldLen + 1 > log.length || log[p + oldLen] !== 0x45) break;
      undos.push({ index: undos.length, path, offset, oldSize, oldBytes: log.subarray(p, p + oldLen) });
      at = p + oldLen + 1;
    } else if (kind === "S") {
      if (p + 9 > log.length || log[p + 8] !== 0x45) break;
      const before = Number(log.readBigUInt64LE(p));
      syncedBefore.set(path, Math.max(syncedBefore.get(path) ?? 0, before));
      syncs++;
      at = p + 9;
    } else {
      throw new Error(`the undo log is corrupt at byte ${at} (record kind ${JSON.stringify(kind)})`);
    }
  }
  let reverted = 0;
  const byFile: RestoreResult["byFile"] = {};
  for (let i = undos.length - 1; i >= 0; i--) {
    const undo = undos[i]!;
    const name = basename(undo.path);
    const counts = byFile[name] ?? { reverted: 0, durable: 0 };
    byFile[name] = counts;
    if (undo.index < (syncedBefore.get(undo.path) ?? 0)) {
      counts.durable++;
      continue;
    }
    counts.reverted++;
    const file = await open(undo.path, "r+");
    try {
      if (undo.oldBytes.length > 0) await file.write(undo.oldBytes, 0, undo.oldBytes.length, undo.offset);
      await file.truncate(undo.oldSize);
    } finally {
      await file.close();
    }
    reverted++;
  }
  for (const name of await readdir(dir)) {
    if (name.endsWith("-shm")) await rm(join(dir, name), { force: true });
  }
  return { reverted, durable: undos.length - reverted, syncs, byFile };
}

export interface PoweredServer {
  base: string;
  child: ChildProcess;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL: the power cut (the process gets no chance to write anything more). */
  cut(): Promise<void>;
  stop(): Promise<void>;
}

export type Durability = "normal" | "full" | "unsafe-normal-without-fsync";

/**
 * `gatehouse serve` (the built CLI's serve command, ./serve.mjs) on the SQLite database in
 * `dataDir`; with `shim`, under the power-cut shim logging to `log` (and failing fsyncs while
 * `fail` exists).
 */
export async function startServer(options: {
  dataDir: string;
  durability: Durability;
  shim?: { path: string; log: string; fail: string };
}): Promise<PoweredServer> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` first`);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.GATEHOUSE_DATABASE_URL;
  delete env.GATEHOUSE_TEST_FAULT;
  env.GATEHOUSE_TEST_SQLITE_DURABILITY = options.durability;
  // libuv may submit file operations through io_uring, past the shim's view of fsync: off.
  env.UV_USE_IO_URING = "0";
  if (options.shim) {
    env.LD_PRELOAD = options.shim.path;
    env.POWERCUT_DIR = options.dataDir;
    env.POWERCUT_LOG = options.shim.log;
    env.POWERCUT_FAIL = options.shim.fail;
  }
  const args = [
    SERVE,
    "--insecure-loopback",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--issuer",
    SHARED_ISSUER,
    "--resource",
    RESOURCE,
    "--scopes",
    SCOPES,
    "--no-request-log",
    "--json",
    ...databaseArgs({ kind: "sqlite", dataDir: options.dataDir }),
  ];
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-20_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const port = await new Promise<number>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gatehouse serve was not ready within 30 s; stderr:\n${stderr}`));
    }, 30_000);
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const ready = /"event":"ready"[^\n]*"port":(\d+)/.exec(stdout);
      if (ready) {
        clearTimeout(timer);
        resolve(Number(ready[1]));
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gatehouse serve exited (${code ?? signal}) before it was ready; stderr:\n${stderr}`));
    });
  });
  return {
    base: `http://127.0.0.1:${port}`,
    child,
    stderr: () => stderr,
    exited,
    async cut() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
