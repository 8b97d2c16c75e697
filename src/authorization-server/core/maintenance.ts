/**
 * The purge timer: expired codes, tokens, sessions and unused registrations are deleted from the
 * store at an interval.
 */
import type { ServerContext } from "./context.js";

/** Default interval of {@link startMaintenance}. */
export const DEFAULT_MAINTENANCE_INTERVAL_MS = 10 * 60 * 1000;

export interface Maintenance {
  /** Runs one purge now (also what the timer calls). */
  runOnce(): Promise<void>;
  stop(): void;
}

/**
 * Purges expired codes, tokens, interactions, sessions and unused registrations every `intervalMs`
 * (0 = never). The timer is unref'd so it never keeps a process alive; a failed purge is logged and
 * retried at the next tick.
 */
export function startMaintenance(ctx: ServerContext, intervalMs: number): Maintenance {
  let running = false;
  const runOnce = async () => {
    if (running) return;
    running = true;
    try {
      const purged = await ctx.store.purgeExpired(ctx.now());
      ctx.log.info("purged_expired", { ...purged });
    } catch (error) {
      ctx.log.warn("purge_failed", { reason: error instanceof Error ? error.message : String(error) });
    } finally {
      running = false;
    }
  };
  const timer = intervalMs > 0 ? setInterval(() => void runOnce(), intervalMs) : undefined;
  timer?.unref();
  return {
    runOnce,
    stop() {
      if (timer) clearInterval(timer);
    },
  };
}
