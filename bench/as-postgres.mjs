/**
 * The PostgreSQL side of bench/authorization-server.mjs (issue 25's "PostgreSQL ×1 and ×2" row):
 * a fresh database per store kind, created at the start of the run and dropped at its end; the CPU
 * PostgreSQL spends for a store, read from /proc for the backends connected to that database; and
 * the scaling model that turns measured CPU per request into predicted rates on N cores.
 *
 * The model (also in docs/scaling.md, "PostgreSQL: one instance, two, and the model"). With
 * c_gh the CPU one operation costs the Gatehouse instances (summed over instances, in ms) and c_pg
 * the CPU it costs PostgreSQL's backends, k instances on N cores serve at most
 *
 *   X(k, N) = 1000 × min(k / c_gh, N / (c_gh + c_pg))   operations per second:
 *
 * - k / c_gh: each instance runs its JavaScript (HTTP, signing, the pg driver) on one event loop,
 *   so it uses one core at most; k instances at most k cores between them;
 * - N / (c_gh + c_pg): all the CPU an operation needs, Gatehouse's and the database's, shares the
 *   N cores.
 *
 * It assumes the load generator and the balancer run elsewhere (here they share the machine, pinned
 * to another core), that PostgreSQL's backends spread over cores (one process per connection) and
 * that its commit is not the limit (group commit; thousands of small commits per second on SSD),
 * and that latency is hidden by concurrency (enough requests in flight per instance). It leaves out
 * PostgreSQL's shared background processes (WAL writer, checkpointer), which serve every database
 * on the server and cannot be attributed to one. The predicted ×2 ÷ ×1 on N cores is
 * X(2, N) ÷ X(1, N), each X with the costs measured with that many instances (so what sharing
 * costs, say a cache emptied by the other instance's writes, is in the ×2 figure).
 */

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

/** The PostgreSQL server the bench creates its databases on (trust auth on loopback by default). */
export const DEFAULT_DATABASE_URL =
  process.env.GATEHOUSE_BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** A URL without its password, for messages. */
export function redact(url) {
  try {
    const u = new URL(url);
    u.password = "";
    return u.href;
  } catch {
    return "(invalid URL)";
  }
}

/**
 * Connects to the server of `adminUrl`; answers undefined and the reason when it does not answer,
 * so the run can leave the PostgreSQL stores out and say why.
 */
export async function connectAdmin(adminUrl) {
  const { default: pg } = await import("pg");
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
    return { admin };
  } catch (error) {
    return { reason: `PostgreSQL is not reachable at ${redact(adminUrl)} (${error.message})` };
  }
}

/**
 * One fresh database per name in `kinds` on the admin connection's server; `url(kind)` is its
 * connection string, `backendCpuMs(kind)` what its backends have used so far, `drop()` removes them
 * all (forcing out any connection left).
 */
export async function benchDatabases(admin, adminUrl, kinds) {
  const names = new Map();
  const created = [];
  const drop = async () => {
    for (const name of created) {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    }
  };
  try {
    for (const kind of kinds) {
      // A lowercase identifier of our own making: no quoting needed, nothing from outside in it.
      const name = `gh_bench_as_${kind.replace(/[^a-z0-9]/g, "_")}_${randomBytes(4).toString("hex")}`;
      await admin.query(`CREATE DATABASE ${name}`);
      created.push(name);
      names.set(kind, name);
    }
  } catch (error) {
    await drop();
    throw error;
  }
  return {
    url(kind) {
      const url = new URL(adminUrl);
      url.pathname = `/${names.get(kind)}`;
      return url.href;
    },
    /**
     * ANALYZE of `kind`'s database on a connection of its own (closed before the window's CPU
     * snapshot): what autovacuum does for a running database whose tables grow.
     */
    async analyze(kind) {
      const { default: pg } = await import("pg");
      const client = new pg.Client({ connectionString: this.url(kind) });
      await client.connect();
      try {
        await client.query("ANALYZE");
      } finally {
        await client.end();
      }
    },
    /** CPU ms per backend pid connected to `kind`'s database now (a snapshot for {@link cpuBetween}). */
    async backendCpu(kind) {
      const { rows } = await admin.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'",
        [names.get(kind)],
      );
      return new Map(
        rows.map((row) => [row.pid, processCpuMs(row.pid)]).filter(([, ms]) => ms !== undefined),
      );
    },
    drop,
  };
}

const CLOCK_TICK_MS = 10; // USER_HZ is 100 on Linux for /proc/<pid>/stat

/**
 * CPU time a process has used, in ms: /proc/<pid>/schedstat's first field (ns on the CPU, exact)
 * when the kernel has it, else utime + stime from /proc/<pid>/stat (10 ms ticks). Undefined when
 * the process is gone or not visible (PostgreSQL on another host: then nothing is counted, and the
 * output says so).
 */
function processCpuMs(pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th
      // field of the line, stime the 15th (proc(5)).
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
    } catch {
      return undefined;
    }
  }
}

/**
 * CPU the backends used between two snapshots: every backend at `after`, less what it had at
 * `before` (a backend that started in between counts from 0; one that ended in between is lost,
 * which the bench avoids by keeping its pools' connections open).
 */
export function cpuBetween(before, after) {
  let ms = 0;
  for (const [pid, now] of after) ms += now - (before.get(pid) ?? 0);
  return ms;
}

/** X(k, N) of the module comment, operations per second; undefined without both costs. */
export function predictedRate(instances, cores, ghMsPerOp, pgMsPerOp) {
  if (!(ghMsPerOp > 0) || !(pgMsPerOp >= 0)) return undefined;
  return 1000 * Math.min(instances / ghMsPerOp, cores / (ghMsPerOp + pgMsPerOp));
}

const round = (value, digits) => Math.round(value * 10 ** digits) / 10 ** digits;

/**
 * The model for one case: from the ×1 and ×2 rows' summaries (serverCpuMsPerOp summed over the
 * instances, pgCpuMsPerOp), the predicted rates for 1 and 2 instances on each of `cores` and the
 * predicted ×2 ÷ ×1.
 */
export function scalingModel(x1, x2, cores = [2, 4, 8, 16]) {
  if (x1?.pgCpuMsPerOp === undefined || x2?.pgCpuMsPerOp === undefined) return undefined;
  const costs = {
    x1: { gatehouseMsPerOp: x1.serverCpuMsPerOp, postgresMsPerOp: x1.pgCpuMsPerOp },
    x2: { gatehouseMsPerOp: x2.serverCpuMsPerOp, postgresMsPerOp: x2.pgCpuMsPerOp },
  };
  const byCores = cores.map((n) => {
    const one = predictedRate(1, n, costs.x1.gatehouseMsPerOp, costs.x1.postgresMsPerOp);
    const two = predictedRate(2, n, costs.x2.gatehouseMsPerOp, costs.x2.postgresMsPerOp);
    // Two instances at ×1's costs: what ×2 would give if sharing the database cost nothing.
    const twoAtX1 = predictedRate(2, n, costs.x1.gatehouseMsPerOp, costs.x1.postgresMsPerOp);
    return {
      cores: n,
      x1PerSecond: one === undefined ? undefined : Math.round(one),
      x2PerSecond: two === undefined ? undefined : Math.round(two),
      x2OverX1: one && two ? round(two / one, 2) : undefined,
      x2OverX1AtX1Costs: one && twoAtX1 ? round(twoAtX1 / one, 2) : undefined,
    };
  });
  return { ...costs, byCores };
}
