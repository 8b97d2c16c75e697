/**
 * Test support for the gateway tests that run `gatehouse gateway` as a process (dist/cli/main.js):
 * the process started and waited on until its ready line, and stopped with SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { MAIN } from "../cli/helpers.js";

export interface GatewayProcess {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Runs `gatehouse gateway <args>` and waits for its first line on stdout (it is ready then). */
export async function startGatewayProcess(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [MAIN, "gateway", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr!.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${stderr}`)), 20_000);
    child.stdout!.on("data", () => {
      if (stdout.includes("\n")) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}: ${stderr}`));
    });
  });
  return {
    child,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
    async stop() {
      child.kill("SIGTERM");
      return exited;
    },
  };
}
