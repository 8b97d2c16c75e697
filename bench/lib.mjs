/**
 * What the gate benchmarks (bench/resource-server.mjs, bench/dpop.mjs) share: the bare-jose
 * verification loop a child runs, the IPC with their server children, and the statistics.
 */
import { execFileSync } from "node:child_process";

/**
 * Runs `op` in ten concurrent chains (like ten connections) for `seconds`, `next()` giving each
 * call its input; answers operations per second and CPU µs per operation of this process.
 */
export async function concurrentLoop(seconds, next, op) {
  const deadline = Date.now() + seconds * 1000;
  const cpuBefore = process.cpuUsage();
  let done = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (Date.now() < deadline) {
        await op(next());
        done++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return {
    opsPerSecond: done / seconds,
    cpuMicrosPerOp: (cpu.user + cpu.system) / Math.max(1, done),
  };
}

/**
 * A started child `proc` with its first message (its port, or that it is ready), after sending it
 * `config`; rejects when it fails or exits non-zero (`what` names it in the error).
 */
export function childReady(proc, config, what) {
  proc.send(config);
  return new Promise((resolve, reject) => {
    proc.once("message", (m) => resolve({ proc, ...m }));
    proc.once("error", reject);
    proc.once("exit", (code) => {
      if (code !== 0) reject(new Error(`${what} exited with ${code}`));
    });
  });
}

/** Sends `message` to the child and answers its first reply that passes `test`. */
export function ask(proc, message, test) {
  proc.send(message);
  return new Promise((resolve) => {
    const onMessage = (m) => {
      if (test(m)) {
        proc.off("message", onMessage);
        resolve(m);
      }
    };
    proc.on("message", onMessage);
  });
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export const round1 = (x) => Math.round(x * 10) / 10;
export const round3 = (x) => Math.round(x * 1000) / 1000;

/** The summary of a {@link concurrentLoop}'s rounds: medians, and each round's rate. */
export function loopSummary(rounds) {
  return {
    opsPerSecond: Math.round(median(rounds.map((x) => x.opsPerSecond))),
    cpuMicrosPerOp: round1(median(rounds.map((x) => x.cpuMicrosPerOp))),
    rounds: rounds.map((x) => Math.round(x.opsPerSecond)),
  };
}

/**
 * The median over rounds of case `a`'s rate / case `b`'s in the same round (requests or
 * operations per second), from `perRound` (case name → its rounds' measurements).
 */
export function roundRatio(perRound, a, b) {
  const rate = (name, i) => perRound[name][i].requestsPerSecond ?? perRound[name][i].opsPerSecond;
  return round3(median(perRound[a].map((_, i) => rate(a, i) / rate(b, i))));
}

/**
 * `--help` prints `usage` and answers true (the caller stops); otherwise an option outside
 * `valueOptions` (each followed by its value) and `flagOptions` is refused, since a typo would
 * start a long run with the defaults.
 */
export function helpOrCheckArgs(args, { valueOptions, flagOptions, usage }) {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(usage);
    return true;
  }
  for (let i = 0; i < args.length; i++) {
    if (valueOptions.includes(args[i])) i++;
    else if (!flagOptions.includes(args[i])) throw new Error(`unknown option ${args[i]} (--help lists them)`);
  }
  return false;
}

/**
 * Pins process `pid` (every thread of it; threads made later inherit the mask) to `cores` (taskset's
 * list form, e.g. "0" or "1,2") with `taskset`. Answers false when it could not (no `taskset`, or
 * BENCH_NO_PIN set): then nothing is pinned, and the caller says so with its figures.
 */
export function pinProcess(pid, cores) {
  if (process.env.BENCH_NO_PIN) return false;
  try {
    execFileSync("taskset", ["-a", "-cp", cores, String(pid)], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
