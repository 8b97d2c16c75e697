/**
 * Single flight: concurrent callers with the same key share one promise; the entry is removed when
 * it settles, so a later call starts afresh. Used where doing the work twice is wrong (presenting
 * one refresh token twice trips reuse detection) or wasteful (two fetches of one metadata
 * document, two verifications of one access token).
 */
export class SingleFlight<T> {
  readonly #inFlight = new Map<string, Promise<T>>();

  run(key: string, task: () => Promise<T>): Promise<T> {
    const existing = this.#inFlight.get(key);
    if (existing) return existing;
    const promise: Promise<T> = task().finally(() => {
      // Only its own entry: a later flight under the same key may already stand there.
      if (this.#inFlight.get(key) === promise) this.#inFlight.delete(key);
    });
    this.#inFlight.set(key, promise);
    return promise;
  }

  get size(): number {
    return this.#inFlight.size;
  }
}
