/**
 * The in-memory `TokenStore`: `createAuthFetch`'s default, for a process that logs in each time it
 * starts.
 */
import type { StoreKind, StoreRecords, TokenStore } from "./types.js";

/**
 * A store that lives as long as the process: the default for library use. Values are copied in
 * and out so that callers cannot mutate what is stored.
 */
export class MemoryTokenStore implements TokenStore {
  readonly #data = new Map<string, unknown>();

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
}
