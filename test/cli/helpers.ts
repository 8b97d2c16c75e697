/**
 * Runs the built `gatehouse` command (dist/cli/main.js) as a child process: one-shot commands with
 * `runCli`, long-running ones (`serve`, `demo`) with `startCli`, which waits for the single JSON
 * ready line on stdout and stops the process with SIGTERM; `startDemo` is `gatehouse demo --json`
 * on free ports.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");
export const MAIN = join(ROOT, "dist/cli/main.js");

/** Builds once when dist is missing (`npm test` builds first; a lone `vitest run` may not). */
export function ensureBuilt(): void {
  if (existsSync(MAIN)) return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "inherit" });
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `gatehouse <args>` to completion (in `cwd`, else the checkout), feeding `input` on stdin. */
export function runCli(
  args: string[],
  options: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: options.cwd ?? ROOT,
      env: {
        ...process.env,
        GATEHOUSE_DATABASE_URL: "",
        GATEHOUSE_STORE_KEY_LOCATION: "file",
        ...options.env,
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding("utf8").on("data", (c: string) => {
      stderr += c;
    });
    child.once("error", reject);
    child.once("close", (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(options.input ?? "");
  });
}

/** A `gatehouse` run as on a machine without a browser (see {@link startHeadless}). */
export interface HeadlessCli {
  child: ChildProcess;
  /** Resolves with the exit code and the output once the process is gone. */
  done: Promise<CliResult>;
  stdout(): string;
  stderr(): string;
}

/**
 * Starts `gatehouse <args>` as on a headless machine: standard input closed (`/dev/null`, not a
 * terminal), stdout and stderr pipes, no `DISPLAY`, `WAYLAND_DISPLAY` or `BROWSER` unless `env`
 * sets them, the token store in `configDir`. The caller kills `child` if it must not outlive a test.
 */
export function startHeadless(args: string[], configDir: string, env: NodeJS.ProcessEnv = {}): HeadlessCli {
  const { DISPLAY: _d, WAYLAND_DISPLAY: _w, BROWSER: _b, ...inherited } = process.env;
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd: ROOT,
    env: {
      ...inherited,
      GATEHOUSE_DATABASE_URL: "",
      GATEHOUSE_STORE_KEY_LOCATION: "file",
      GATEHOUSE_CONFIG_DIR: configDir,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const done = new Promise<CliResult>((resolveDone, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolveDone({ code, stdout, stderr }));
  });
  return { child, done, stdout: () => stdout, stderr: () => stderr };
}

export interface RunningCli<T> {
  child: ChildProcess;
  /** The parsed ready line. */
  ready: T;
  stderr(): string;
  stdout(): string;
  /** Resolves with the exit code and signal once the process is gone. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after 10 s; resolves with the exit status. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a long-running command and waits (up to 30 s) for its first stdout line, parsed as JSON. */
export async function startCli<T = Record<string, unknown>>(
  args: string[],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<RunningCli<T>> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, GATEHOUSE_DATABASE_URL: "", GATEHOUSE_STORE_KEY_LOCATION: "file", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr = (stderr + c).slice(-50_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once("exit", (code, signal) => r({ code, signal })),
  );
  const ready = await new Promise<T>((resolveReady, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gatehouse ${args[0]} printed no ready line within 30 s; stderr:\n${stderr}`));
    }, 30_000);
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      const before = stdout;
      stdout += c;
      if (before.includes("\n")) return;
      const newline = stdout.indexOf("\n");
      if (newline < 0) return;
      clearTimeout(timer);
      try {
        resolveReady(JSON.parse(stdout.slice(0, newline)) as T);
      } catch {
        reject(new Error(`the ready line is not JSON: ${stdout.slice(0, newline)}`));
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(
        new Error(`gatehouse ${args[0]} exited (${code ?? signal}) before it was ready; stderr:\n${stderr}`),
      );
    });
  });
  return {
    child,
    ready,
    stderr: () => stderr,
    stdout: () => stdout,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = "gatehouse-cli-"): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** Every JSON log line on stderr (non-JSON lines, like the insecure banner, are skipped). */
export function logLines(stderr: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of stderr.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut by the tail buffer
    }
  }
  return out;
}

/** The ready line of `gatehouse demo --json`. */
export interface DemoReady {
  issuer: string;
  /** The PRM resource identifier: the notes URL itself. */
  resource: string;
  notes: string;
  username: string;
  password: string;
  port: number;
  resourcePort: number;
  /** The admin page and the account page of the authorization server. */
  admin: string;
  account: string;
  accessTokenTtlSeconds: number;
}

/**
 * Starts `gatehouse demo --json` on free ports (authorization server and notes resource) with its
 * data in `dataDir`, plus `extraArgs`, and waits for the ready line.
 */
export function startDemo(dataDir: string, extraArgs: string[] = []): Promise<RunningCli<DemoReady>> {
  return startCli<DemoReady>([
    "demo",
    "--port",
    "0",
    "--resource-port",
    "0",
    "--data",
    dataDir,
    "--json",
    ...extraArgs,
  ]);
}
