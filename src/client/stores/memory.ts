/**
 * The in-memory `TokenStore`: `createAuthFetch`'s default, for a process that logs in each time it
 * starts. Its `withLock` is an in-process mutex: the store is not shared with other processes.
 */
import type { StoreKind, StoreRecords, TokenStore } from "./types.js";

/**
 * A store that lives as long as the process: the default for library use. Values are copied in
 * and out so that callers cannot mutate what is stored.
 */
export class MemoryTokenStore implements TokenStore {
  readonly #data = new Map<string, unknown>();
  /** The tail of each named lock's queue of holders. */
  readonly #locks = new Map<string, Promise<void>>();

  async get<K extends StoreKind>(kind: K, key: string): Promise<StoreRecords[K] | undefined> {
    const value = this.#data.get(`${kind}\u0000${key}`);
    return value === undefined ? undefined : (structuredClone(value) as StoreRecords[K]);
  }

  async set<K extends StoreKind>(kind: K, key: string, value: StoreRecords[K]): Promise<void> {
    this.#data.set(`${kind}\u0000${key}`, structuredClone(value));
  }

  async delete(kind: StoreKind, key: string): Promise<void> {
    this.#data.delete(`${kind}\u0000${key}`);
  }

  async list<K extends StoreKind>(kind: K): Promise<Array<[string, StoreRecords[K]]>> {
    const prefix = `${kind}\u0000`;
    const out: Array<[string, StoreRecords[K]]> = [];
    for (const [k, v] of this.#data) {
      if (k.startsWith(prefix)) out.push([k.slice(prefix.length), structuredClone(v) as StoreRecords[K]]);
    }
    return out;
  }

  async clear(): Promise<void> {
    this.#data.clear();
  }

  /** Holders of one name run one after another, in the order they asked. */
  async withLock<T>(name: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#locks.get(name) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.#locks.set(name, tail);
    await previous;
    try {
      return await task();
    } finally {
      release();
      // The last holder leaves no entry behind.
      if (this.#locks.get(name) === tail) this.#locks.delete(name);
    }
  }
}
