/**
 * An encrypted file store for the command line (spec "Token theft" 1: tokens MUST be stored
 * securely; "Refresh tokens": kept confidential in storage).
 *
 * - AES-256-GCM over the whole JSON document, with a fresh 96-bit IV per write and a fixed
 *   associated-data label, so a file from another program or version does not decrypt.
 * - The key comes from `GATEHOUSE_STORE_KEY` (32 bytes, base64url or hex) or from a key file
 *   created with mode 0600 next to the data (so copying only the data file leaks nothing).
 * - The directory is created 0700, files 0600; writes go to a temporary file that is fsynced and
 *   renamed over the old one, so a crash leaves either the old or the new document.
 * - Every operation re-reads the file first, so two processes lose at most a concurrent write.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmod, mkdir, open, readFile, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { GatehouseTypeError } from "../../shared/errors.js";
import type { StoreKind, StoreRecords, TokenStore } from "./types.js";

const AAD = Buffer.from("gatehouse-client-store-v1");
type Document = { [K in StoreKind]?: Record<string, StoreRecords[K]> };

export interface EncryptedFileStoreOptions {
  /** Directory holding `store.enc` and (unless a key is given) `store.key`. */
  directory: string;
  /** 32-byte key; defaults to `GATEHOUSE_STORE_KEY`, then to the key file. */
  key?: Uint8Array;
}

function decodeKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64url");
  if (key.length !== 32) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "the store key must be 32 bytes, written as base64url or 64 hex digits",
    );
  }
  return key;
}

async function writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
}

export class EncryptedFileTokenStore implements TokenStore {
  readonly #dir: string;
  readonly #file: string;
  readonly #keyFile: string;
  #key: Buffer | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: EncryptedFileStoreOptions) {
    this.#dir = options.directory;
    this.#file = join(options.directory, "store.enc");
    this.#keyFile = join(options.directory, "store.key");
    if (options.key) {
      if (options.key.length !== 32) {
        throw new GatehouseTypeError("ERR_INVALID_OPTION", "the store key must be 32 bytes");
      }
      this.#key = Buffer.from(options.key);
    } else if (process.env.GATEHOUSE_STORE_KEY) {
      this.#key = decodeKey(process.env.GATEHOUSE_STORE_KEY);
    }
  }

  /** The path of the encrypted data file. */
  get path(): string {
    return this.#file;
  }

  async #ensureDir(): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    const info = await stat(this.#dir);
    // A directory created earlier with a looser mode is tightened: owner only.
    if ((info.mode & 0o077) !== 0) await chmod(this.#dir, 0o700);
  }

  async #getKey(): Promise<Buffer> {
    if (this.#key) return this.#key;
    await this.#ensureDir();
    try {
      this.#key = decodeKey(await readFile(this.#keyFile, "utf8"));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      const fresh = randomBytes(32);
      try {
        const handle = await open(this.#keyFile, "wx", 0o600);
        try {
          await handle.writeFile(fresh.toString("base64url"));
          await handle.sync();
        } finally {
          await handle.close();
        }
        this.#key = fresh;
      } catch (createError) {
        // Another process created it first: use theirs.
        if ((createError as NodeJS.ErrnoException).code !== "EEXIST") throw createError;
        this.#key = decodeKey(await readFile(this.#keyFile, "utf8"));
      }
    }
    return this.#key;
  }

  async #load(): Promise<Document> {
    let raw: string;
    try {
      raw = await readFile(this.#file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw error;
    }
    const key = await this.#getKey();
    const envelope = JSON.parse(raw) as { v: number; iv: string; tag: string; data: string };
    if (envelope.v !== 1) throw new Error("unsupported store format version");
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(envelope.iv, "base64url"));
    decipher.setAAD(AAD);
    decipher.setAuthTag(Buffer.from(envelope.tag, "base64url"));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(Buffer.from(envelope.data, "base64url")), decipher.final()]);
    } catch (cause) {
      throw new Error(`cannot decrypt ${this.#file}: wrong key or damaged file`, { cause });
    }
    return JSON.parse(plain.toString("utf8")) as Document;
  }

  async #save(doc: Document): Promise<void> {
    const key = await this.#getKey();
    await this.#ensureDir();
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, iv);
    cipher.setAAD(AAD);
    const data = Buffer.concat([cipher.update(JSON.stringify(doc), "utf8"), cipher.final()]);
    const envelope = {
      v: 1,
      iv: iv.toString("base64url"),
      tag: cipher.getAuthTag().toString("base64url"),
      data: data.toString("base64url"),
    };
    await writeFileAtomic(this.#file, JSON.stringify(envelope));
  }

  /** Runs operations one at a time so that read-modify-write cycles in this process never interleave. */
  #serial<T>(operation: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(operation, operation);
    this.#queue = next.catch(() => {});
    return next;
  }

  get<K extends StoreKind>(kind: K, key: string): Promise<StoreRecords[K] | undefined> {
    return this.#serial(async () => {
      const doc = await this.#load();
      const table = doc[kind] as Record<string, StoreRecords[K]> | undefined;
      return table && Object.hasOwn(table, key) ? table[key] : undefined;
    });
  }

  set<K extends StoreKind>(kind: K, key: string, value: StoreRecords[K]): Promise<void> {
    return this.#serial(async () => {
      const doc = await this.#load();
      const table = (doc[kind] ?? {}) as Record<string, StoreRecords[K]>;
      table[key] = value;
      (doc as Record<string, unknown>)[kind] = table;
      await this.#save(doc);
    });
  }

  delete(kind: StoreKind, key: string): Promise<void> {
    return this.#serial(async () => {
      const doc = await this.#load();
      const table = doc[kind] as Record<string, unknown> | undefined;
      if (!table || !Object.hasOwn(table, key)) return;
      delete table[key];
      await this.#save(doc);
    });
  }

  list<K extends StoreKind>(kind: K): Promise<Array<[string, StoreRecords[K]]>> {
    return this.#serial(async () => {
      const doc = await this.#load();
      return Object.entries((doc[kind] ?? {}) as Record<string, StoreRecords[K]>);
    });
  }

  clear(): Promise<void> {
    return this.#serial(async () => {
      await unlink(this.#file).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error;
      });
    });
  }
}
