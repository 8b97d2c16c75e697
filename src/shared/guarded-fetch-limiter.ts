/**
 * Per-host concurrency limit for the guarded fetch (`guarded-fetch.ts`): at most `limit` requests
 * to one host (host:port) at a time; the rest wait in line, inside their own deadline.
 */

/** Hands out per-host slots; a waiter leaves the line when its signal aborts. */
export class HostLimiter {
  private readonly active = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();
  constructor(private readonly limit: number) {}

  async acquire(host: string, signal: AbortSignal): Promise<() => void> {
    if ((this.active.get(host) ?? 0) >= this.limit) {
      await new Promise<void>((resolve, reject) => {
        const queue = this.waiting.get(host) ?? [];
        const go = () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        const onAbort = () => {
          const q = this.waiting.get(host);
          const at = q ? q.indexOf(go) : -1;
          if (q && at >= 0) q.splice(at, 1);
          reject(signal.reason);
        };
        queue.push(go);
        this.waiting.set(host, queue);
        signal.addEventListener("abort", onAbort, { once: true });
      });
    } else {
      this.active.set(host, (this.active.get(host) ?? 0) + 1);
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.get(host)?.shift();
      if (next) {
        next(); // hand the slot over: the active count stays the same
      } else {
        const n = (this.active.get(host) ?? 1) - 1;
        if (n <= 0) this.active.delete(host);
        else this.active.set(host, n);
        this.waiting.delete(host);
      }
    };
  }
}
